/* See include/ckptfs/fileio.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/fileio.h"

int ck_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t got = pread(fd, p, len, (off_t)off);

		if (got < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (got == 0)
			return -EIO;
		p += got;
		off += (uint64_t)got;
		len -= (size_t)got;
	}
	return 0;
}

char *ck_path_join(const char *a, const char *b)
{
	size_t n = strlen(a) + strlen(b) + 2;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s%s%s", a, *a ? "/" : "", b);
	return p;
}
