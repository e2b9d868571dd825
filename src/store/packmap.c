/* Packmaps: the file maps of one checkpoint, written durably beside its
 * manifest before the index learns them, so that recovery and reindex can
 * rebuild the packed state (docs/format.md, "Packed store"). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/fileio.h"
#include "manifest.h"
#include "chunk_table.h"

#define PACKMAP_MAX_BYTES (1u << 30)

char *ck_packmap_path(const char *store, const char *series, const char *ckpt)
{
	char *m = ck_manifest_path(store, series, ckpt), *p;
	size_t n, sl = strlen(CK_MANIFEST_SUFFIX);

	if (!m)
		return NULL;
	n = strlen(m);
	if (n < sl || strcmp(m + n - sl, CK_MANIFEST_SUFFIX) != 0) {
		free(m);
		errno = EINVAL;
		return NULL;
	}
	p = malloc(n - sl + sizeof(CK_PACKMAP_SUFFIX));
	if (p) {
		memcpy(p, m, n - sl);
		strcpy(p + n - sl, CK_PACKMAP_SUFFIX);
	}
	free(m);
	return p;
}

static int encode(struct ck_buf *b, const struct ck_packmap *pm)
{
	XXH128_hash_t h;
	int rc = 0;

	rc |= ck_buf_put(b, CK_PACKMAP_MAGIC, 8);
	rc |= ck_buf_put_le32(b, CK_PACKMAP_VERSION);
	rc |= ck_buf_put_le32(b, (uint32_t)pm->nfiles);
	rc |= ck_buf_put_le32(b, (uint32_t)strlen(pm->series));
	rc |= ck_buf_puts(b, pm->series);
	rc |= ck_buf_put_le32(b, (uint32_t)strlen(pm->ckpt));
	rc |= ck_buf_puts(b, pm->ckpt);
	for (size_t i = 0; i < pm->nfiles && rc == 0; i++) {
		size_t at;

		rc |= ck_buf_put_le32(b, (uint32_t)strlen(pm->files[i].relpath));
		rc |= ck_buf_puts(b, pm->files[i].relpath);
		rc |= ck_buf_put_le64(b, pm->files[i].dev);
		rc |= ck_buf_put_le64(b, pm->files[i].ino);
		rc |= ck_buf_put_le64(b, pm->files[i].size);
		rc |= ck_buf_put_le64(b, (uint64_t)pm->files[i].mtime_ns);
		at = b->len;
		rc |= ck_buf_put_le32(b, 0);
		rc |= ck_fmap_put(b, &pm->files[i].map);
		if (rc == 0)
			ck_set_le32(b->data + at, (uint32_t)(b->len - at - 4));
	}
	if (rc)
		return -ENOMEM;
	h = XXH3_128bits(b->data, b->len);
	rc |= ck_buf_put_le64(b, h.high64);
	rc |= ck_buf_put_le64(b, h.low64);
	return rc ? -ENOMEM : 0;
}

int ck_packmap_store(const char *path, const struct ck_packmap *pm, struct ck_error *err)
{
	struct ck_buf b = CK_BUF_INIT;
	int rc = encode(&b, pm) < 0 ? ck_fail(err, ENOMEM, "out of memory") : ck_file_replace(path, b.data, b.len, err);

	ck_buf_free(&b);
	return rc;
}

static int decode(const uint8_t *p, size_t n, struct ck_packmap *pm, struct ck_error *err)
{
	struct ck_error why = { { 0 } };
	XXH128_hash_t h;
	size_t at = 16;
	uint32_t nfiles;

	if (n < 32 || memcmp(p, CK_PACKMAP_MAGIC, 8) != 0)
		return ck_fail(err, EBADMSG, "not a packmap");
	h = XXH3_128bits(p, n - 16);
	if (ck_le64(p + n - 16) != h.high64 || ck_le64(p + n - 8) != h.low64)
		return ck_fail(err, EBADMSG, "checksum mismatch (torn or damaged)");
	if (ck_le32(p + 8) != CK_PACKMAP_VERSION)
		return ck_fail(err, EPROTONOSUPPORT, "unsupported packmap version %u", ck_le32(p + 8));
	nfiles = ck_le32(p + 12);
	n -= 16;
	if (nfiles > n / 8)
		return ck_fail(err, EBADMSG, "%u files cannot fit", nfiles);
	for (int i = 0; i < 2; i++) {
		uint32_t len;
		char **dst = i ? &pm->ckpt : &pm->series;

		if (n - at < 4 || (len = ck_le32(p + at)) > n - at - 4 || len == 0)
			return ck_fail(err, EBADMSG, "truncated %s name", i ? "checkpoint" : "series");
		*dst = strndup((const char *)p + at + 4, len);
		if (!*dst)
			return ck_fail(err, ENOMEM, "out of memory");
		if (strlen(*dst) != len)
			return ck_fail(err, EBADMSG, "a NUL byte in the %s name", i ? "checkpoint" : "series");
		at += 4 + len;
	}
	pm->files = calloc(nfiles ? nfiles : 1, sizeof(*pm->files));
	if (!pm->files)
		return ck_fail(err, ENOMEM, "out of memory");
	for (uint32_t i = 0; i < nfiles; i++) {
		uint32_t len, mlen;
		int rc;

		if (n - at < 4 || (len = ck_le32(p + at)) > n - at - 4 || n - at - 4 - len < 36)
			return ck_fail(err, EBADMSG, "file %u: truncated", i);
		pm->files[i].relpath = strndup((const char *)p + at + 4, len);
		if (!pm->files[i].relpath)
			return ck_fail(err, ENOMEM, "out of memory");
		pm->nfiles = i + 1;
		at += 4 + len;
		pm->files[i].dev = ck_le64(p + at);
		pm->files[i].ino = ck_le64(p + at + 8);
		pm->files[i].size = ck_le64(p + at + 16);
		pm->files[i].mtime_ns = (int64_t)ck_le64(p + at + 24);
		at += 32;
		mlen = ck_le32(p + at);
		if (mlen > n - at - 4)
			return ck_fail(err, EBADMSG, "file %u: truncated map", i);
		rc = ck_fmap_get(p + at + 4, mlen, &pm->files[i].map, &why);
		if (rc < 0)
			return ck_fail(err, rc == -ENOMEM ? ENOMEM : EBADMSG, "%s: %s", pm->files[i].relpath, why.msg);
		at += 4 + mlen;
	}
	if (at != n)
		return ck_fail(err, EBADMSG, "%zu bytes after the last file", n - at);
	return 0;
}

int ck_packmap_load(const char *path, struct ck_packmap *out, struct ck_error *err)
{
	uint8_t *p;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = ck_read_file(path, PACKMAP_MAX_BYTES, &p, &len);
	if (rc == -ENOENT)
		return -ENOENT;
	if (rc == -ELOOP || rc == -EINVAL || rc == -EFBIG)
		return ck_fail(err, EBADMSG, "%s: not a regular file of a packmap's size", path);
	if (rc < 0)
		return ck_fail(err, -rc, "%s: %s", path, strerror(-rc));
	rc = decode(p, len, out, err);
	if (rc < 0) {
		char why[sizeof(err->msg)] = "";

		if (err)
			snprintf(why, sizeof(why), "%s", err->msg);
		ck_packmap_clear(out);
		ck_fail(err, -rc, "%s: %s", path, why);
	}
	free(p);
	return rc;
}

int ck_packmap_parse(const void *p, size_t n, struct ck_packmap *out, struct ck_error *err)
{
	int rc;

	memset(out, 0, sizeof(*out));
	rc = decode(p, n, out, err);
	if (rc < 0)
		ck_packmap_clear(out);
	return rc;
}

void ck_packmap_clear(struct ck_packmap *pm)
{
	for (size_t i = 0; i < pm->nfiles; i++) {
		free(pm->files[i].relpath);
		ck_fmap_clear(&pm->files[i].map);
	}
	free(pm->files);
	free(pm->series);
	free(pm->ckpt);
	memset(pm, 0, sizeof(*pm));
}
