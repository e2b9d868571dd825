/* Helpers for the pickle tests (see t_pickle_util.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/buf.h"
#include "t_pickle_util.h"

int t_failures;

const char *t_fixtures_dir(void)
{
	const char *dir = test_fixtures();
	struct stat st;

	if (!dir || stat(dir, &st) || !S_ISDIR(st.st_mode)) {
		printf("SKIP: CKPT_FIXTURES is not set to the fixtures directory\n");
		exit(77);
	}
	return dir;
}

/* Position of the end-of-central-directory record, or -1. */
static long find_eocd(const uint8_t *z, size_t len)
{
	if (len < 22)
		return -1;
	for (size_t i = len - 22 + 1; i-- > 0 && len - i <= 22 + 65535;)
		if (ck_le32(z + i) == 0x06054b50)
			return (long)i;
	return -1;
}

int t_zip_members(const uint8_t *z, size_t len, struct t_zip_member *out, int max)
{
	long eocd = find_eocd(z, len);
	uint64_t n, cd;
	size_t p;
	int count = 0;

	if (eocd < 0)
		return -1;
	n = ck_le16(z + eocd + 10);
	cd = ck_le32(z + eocd + 16);
	if (eocd >= 20 && ck_le32(z + eocd - 20) == 0x07064b50) {
		uint64_t z64 = ck_le64(z + eocd - 20 + 8);

		if (z64 + 56 > len || ck_le32(z + z64) != 0x06064b50)
			return -1;
		n = ck_le64(z + z64 + 32);
		cd = ck_le64(z + z64 + 48);
	}
	p = (size_t)cd;
	for (uint64_t i = 0; i < n && count < max; i++) {
		uint16_t nlen, xlen, clen, method;
		uint64_t size, lho;

		if (p + 46 > len || ck_le32(z + p) != 0x02014b50)
			return -1;
		method = ck_le16(z + p + 10);
		size = ck_le32(z + p + 20);
		nlen = ck_le16(z + p + 28);
		xlen = ck_le16(z + p + 30);
		clen = ck_le16(z + p + 32);
		lho = ck_le32(z + p + 42);
		if (p + 46 + nlen + xlen > len || nlen >= sizeof(out->name))
			return -1;
		/* zip64 extra: the 0xFFFFFFFF fields, in order */
		for (size_t x = p + 46 + nlen; x + 4 <= p + 46 + nlen + xlen;) {
			uint16_t id = ck_le16(z + x), sz = ck_le16(z + x + 2);
			size_t f = x + 4;

			if (id == 1) {
				if (size == 0xffffffffu && f + 8 <= x + 4 + sz) {
					size = ck_le64(z + f);
					f += 16;
				}
				if (lho == 0xffffffffu && f + 8 <= x + 4 + sz)
					lho = ck_le64(z + f);
			}
			x += 4 + (size_t)sz;
		}
		if (method != 0 || lho + 30 > len || ck_le32(z + lho) != 0x04034b50)
			return -1;
		memcpy(out[count].name, z + p + 46, nlen);
		out[count].name[nlen] = '\0';
		lho += 30 + (uint64_t)ck_le16(z + lho + 26) + ck_le16(z + lho + 28);
		if (lho > len || size > len - lho)
			return -1;
		out[count].data = z + lho;
		out[count].size = size;
		count++;
		p += 46 + (size_t)nlen + xlen + clen;
	}
	return count;
}

const struct t_zip_member *t_zip_find(const struct t_zip_member *m, int n, const char *suffix)
{
	size_t sl = strlen(suffix);

	for (int i = 0; i < n; i++) {
		size_t nl = strlen(m[i].name);

		if (nl == sl ? !strcmp(m[i].name, suffix)
			     : nl > sl && m[i].name[nl - sl - 1] == '/' && !strcmp(m[i].name + nl - sl, suffix))
			return &m[i];
	}
	return NULL;
}
