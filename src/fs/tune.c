/* Kernel settings that decide FUSE read speed and that only root may
 * change (ckptfs(1): readahead_kb= and pipe_max_kb=):
 *
 * - the mount's readahead (/sys/class/bdi/0:MINOR/read_ahead_kb): the
 *   kernel only sends 1 MiB read requests if readahead allows it, and the
 *   daemon can only lower readahead through the FUSE handshake;
 * - fs.pipe-max-size: a 1 MiB reply is spliced only if libfuse's pipe can
 *   grow past 1 MiB (data plus header), and the default limit is exactly
 *   1 MiB.  Root may exceed the limit anyway (CAP_SYS_RESOURCE); raising it
 *   lets daemons of other users on this host splice too.
 *
 * Neither ever fails the mount: they are about speed, not correctness.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "ckptfs/log.h"
#include "tune.h"

#define PIPE_MAX_SIZE "/proc/sys/fs/pipe-max-size"

static int read_ulong(const char *path, unsigned long *out)
{
	FILE *f = fopen(path, "re");
	int ok;

	if (!f)
		return -errno;
	ok = fscanf(f, "%lu", out) == 1;
	fclose(f);
	return ok ? 0 : -EINVAL;
}

static int write_ulong(const char *path, unsigned long v)
{
	char text[32];
	int len = snprintf(text, sizeof(text), "%lu\n", v);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;
	int rc = 0;

	if (fd < 0)
		return -errno;
	n = write(fd, text, (size_t)len);
	if (n != len)
		rc = n < 0 ? -errno : -EIO;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

void ckfs_raise_pipe_max(unsigned min_kb)
{
	unsigned long cur, want = (unsigned long)min_kb * 1024;
	int rc;

	if (!min_kb)
		return;
	rc = read_ulong(PIPE_MAX_SIZE, &cur);
	if (rc) {
		ck_debug("%s: %s", PIPE_MAX_SIZE, strerror(-rc));
		return;
	}
	if (cur >= want)
		return;
	if (geteuid() != 0) {
		ck_info("fs.pipe-max-size is %lu KiB: large reads are copied instead of spliced "
			"(an administrator can raise it: sysctl fs.pipe-max-size=%lu)",
			cur / 1024, want);
		return;
	}
	rc = write_ulong(PIPE_MAX_SIZE, want);
	if (rc)
		ck_warn("cannot raise fs.pipe-max-size to %u KiB: %s", min_kb, strerror(-rc));
	else
		ck_info("raised fs.pipe-max-size from %lu to %u KiB for 1 MiB splices",
			cur / 1024, min_kb);
}

void ckfs_raise_readahead(dev_t dev, unsigned kb)
{
	char path[80];
	unsigned long cur = 0;
	int rc;

	if (!kb)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(dev), minor(dev));
	rc = read_ulong(path, &cur);
	if (rc == 0 && cur == kb)
		return;
	if (geteuid() != 0) {
		ck_info("readahead stays at %lu KiB: setting %s needs root", cur, path);
		return;
	}
	rc = write_ulong(path, kb);
	if (rc)
		ck_warn("cannot set %s to %u: %s", path, kb, strerror(-rc));
	else
		ck_debug("%s: %lu -> %u", path, cur, kb);
}
