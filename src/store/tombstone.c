/* Tombstones (tombstone.h): writing one durably and reading one back.
 * The text has one spelling, like a manifest's: fixed fields, decimal
 * numbers without leading zeros, and a last line holding the XXH3-128 of
 * everything before it, so a torn or edited tombstone is never used.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/clock.h"
#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "manifest.h"
#include "delete.h"

#define MAGIC "ckptfs-tombstone 1\n"
#define CSUM_PREFIX "checksum xxh3-128="
#define MAX_TOMBSTONE 4096

char *ck_tombstone_path(const char *manifest_path)
{
	size_t n = strlen(manifest_path), sl = strlen(CK_MANIFEST_SUFFIX);
	char *p;

	if (n < sl || strcmp(manifest_path + n - sl, CK_MANIFEST_SUFFIX) != 0)
		return NULL;
	p = malloc(n - sl + sizeof(CK_TOMBSTONE_SUFFIX));
	if (p) {
		memcpy(p, manifest_path, n - sl);
		strcpy(p + n - sl, CK_TOMBSTONE_SUFFIX);
	}
	return p;
}

int ck_tombstone_format(struct ck_buf *out, int64_t imported_ns, int64_t deleted_ns)
{
	size_t start = out->len;
	XXH128_hash_t h;

	if (ck_buf_printf(out, MAGIC "imported-ns=%" PRId64 " deleted-ns=%" PRId64 "\n", imported_ns,
			  deleted_ns) < 0)
		return -ENOMEM;
	h = XXH3_128bits(out->data + start, out->len - start);
	return ck_buf_printf(out, CSUM_PREFIX "%016" PRIx64 "%016" PRIx64 "\n", h.high64, h.low64);
}

/* A signed decimal as the writer spells it ("0", "-12", never "-0" or "012"). */
static int parse_i64(const char **pp, const char *end, int64_t *out)
{
	const char *p = *pp;
	int neg = 0;
	uint64_t v = 0, lim;

	if (p < end && *p == '-') {
		neg = 1;
		p++;
	}
	if (p >= end || *p < '0' || *p > '9' || (*p == '0' && p + 1 < end && p[1] >= '0' && p[1] <= '9'))
		return -EINVAL;
	lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	while (p < end && *p >= '0' && *p <= '9') {
		unsigned d = (unsigned)(*p++ - '0');

		if (v > (lim - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (neg && v == 0)
		return -EINVAL;
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	*pp = p;
	return 0;
}

static int literal(const char **pp, const char *end, const char *s)
{
	size_t n = strlen(s);

	if ((size_t)(end - *pp) < n || memcmp(*pp, s, n) != 0)
		return -EINVAL;
	*pp += n;
	return 0;
}

int ck_tombstone_parse(const char *text, size_t len, int64_t *imported_ns, int64_t *deleted_ns,
		       struct ck_error *err)
{
	const size_t csum_len = sizeof(CSUM_PREFIX) - 1 + 32 + 1;
	const char *p = text, *body_end;
	int64_t deleted;
	char want[40];
	XXH128_hash_t h;

	if (len < csum_len || len > MAX_TOMBSTONE || text[len - 1] != '\n')
		return ck_fail(err, EBADMSG, "torn or truncated tombstone (no checksum line)");
	body_end = text + len - csum_len;
	if (body_end > text && body_end[-1] != '\n')
		return ck_fail(err, EBADMSG, "torn or truncated tombstone (no checksum line)");
	h = XXH3_128bits(text, (size_t)(body_end - text));
	snprintf(want, sizeof(want), "%016" PRIx64 "%016" PRIx64, h.high64, h.low64);
	if (memcmp(body_end, CSUM_PREFIX, sizeof(CSUM_PREFIX) - 1) != 0 ||
	    memcmp(body_end + sizeof(CSUM_PREFIX) - 1, want, 32) != 0)
		return ck_fail(err, EBADMSG, "tombstone damaged or edited (checksum mismatch)");
	if (literal(&p, body_end, MAGIC) < 0)
		return ck_fail(err, EINVAL, "not a ckptfs tombstone of format 1");
	if (literal(&p, body_end, "imported-ns=") < 0 || parse_i64(&p, body_end, imported_ns) < 0 ||
	    literal(&p, body_end, " deleted-ns=") < 0 || parse_i64(&p, body_end, &deleted) < 0 ||
	    literal(&p, body_end, "\n") < 0 || p != body_end)
		return ck_fail(err, EINVAL, "line 2: expected 'imported-ns=N deleted-ns=N'");
	if (deleted_ns)
		*deleted_ns = deleted;
	return 0;
}

int ck_tombstone_write(const char *path, int64_t imported_ns, struct ck_error *err)
{
	struct ck_buf text = CK_BUF_INIT;
	int rc = ck_tombstone_format(&text, imported_ns, ck_now_ns());

	rc = rc < 0 ? ck_fail(err, ENOMEM, "out of memory") : ck_file_replace(path, text.data, text.len, err);
	ck_buf_free(&text);
	return rc;
}

int ck_tombstone_unlink(const char *path)
{
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	return ck_fsync_parent(path);
}

int ck_tombstone_load(const char *path, int64_t *imported_ns, struct ck_error *err)
{
	char text[MAX_TOMBSTONE + 1];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	if (fd < 0)
		return errno == ENOENT ? -ENOENT : ck_fail(err, errno, "%s", strerror(errno));
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < 0)
		return ck_fail(err, errno, "%s", strerror(errno));
	return ck_tombstone_parse(text, (size_t)n, imported_ns, NULL, err);
}

int ck_tombstone_applies(const char *store, const struct ck_manifest *m)
{
	char *mpath = ck_manifest_path(store, m->ckpt.series, m->ckpt.name);
	char *tpath = mpath ? ck_tombstone_path(mpath) : NULL;
	struct ck_error why = { { 0 } };
	int64_t imported_ns = 0;
	int rc = -ENOMEM;

	if (tpath)
		rc = ck_tombstone_load(tpath, &imported_ns, &why);
	if (rc < 0 && rc != -ENOENT)
		ck_warn("%s: ignored: %s", tpath ? tpath : "tombstone", ck_error_text(&why, rc));
	free(mpath);
	free(tpath);
	return rc == 0 && imported_ns == m->imported_ns;
}
