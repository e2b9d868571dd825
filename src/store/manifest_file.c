/* Manifest files in the store: where each lives, writing one so that a
 * crash leaves the old or the new one and never a torn one, and reading
 * one back with bounds.
 *
 * STORE/manifests/<series>/<checkpoint>.manifest; names longer than
 * SHORT_NAME bytes, or holding a '~', become "<first bytes>~<hash>.manifest"
 * so that every file name fits NAME_MAX and the two forms never meet.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "index.h"
#include "manifest.h"

#define SHORT_NAME 160

int ck_fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return -errno;
	/* Some filesystems cannot sync a directory (EINVAL): nothing more to do there. */
	if (fsync(fd) < 0 && errno != EINVAL)
		rc = -errno;
	close(fd);
	return rc;
}

static char *file_name(const char *name)
{
	size_t n = strlen(name);
	char *out = malloc(SHORT_NAME + 64);
	XXH128_hash_t h;

	if (!out)
		return NULL;
	if (n <= SHORT_NAME && !strchr(name, '~')) {
		snprintf(out, SHORT_NAME + 64, "%s%s", name, CK_MANIFEST_SUFFIX);
		return out;
	}
	h = XXH3_128bits(name, n);
	snprintf(out, SHORT_NAME + 64, "%.*s~%016" PRIx64 "%016" PRIx64 "%s", (int)(n < 64 ? n : 64), name,
		 h.high64, h.low64, CK_MANIFEST_SUFFIX);
	return out;
}

char *ck_manifest_path(const char *store, const char *series, const char *name)
{
	char *fname = file_name(name), *path = NULL;
	size_t n;

	if (!fname)
		return NULL;
	n = strlen(store) + strlen(CK_MANIFEST_DIR) + strlen(series) + strlen(fname) + 4;
	path = malloc(n);
	if (path)
		snprintf(path, n, "%s/%s/%s/%s", store, CK_MANIFEST_DIR, series, fname);
	free(fname);
	return path;
}

/* mkdir that makes the new entry durable in its parent. */
static int make_dir(const char *parent, const char *dir)
{
	if (mkdir(dir, 0755) == 0)
		return ck_fsync_dir(parent);
	return errno == EEXIST ? 0 : -errno;
}

static char *with_suffix(const char *path, const char *what)
{
	size_t n = strlen(path) + strlen(what) + 32;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s.%s.%ld", path, what, (long)getpid());
	return p;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int write_durably(const char *tmp, const struct ck_buf *text)
{
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc;

	if (fd < 0)
		return -errno;
	rc = write_all(fd, text->data, text->len);
	if (rc == 0 && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* The directories STORE/manifests and STORE/manifests/<series>; *series_dir is new. */
static int make_dirs(const char *store, const char *series, char **series_dir)
{
	size_t n = strlen(store) + strlen(CK_MANIFEST_DIR) + strlen(series) + 3;
	char *top = malloc(n), *dir = malloc(n);
	int rc = -ENOMEM;

	if (top && dir) {
		snprintf(top, n, "%s/%s", store, CK_MANIFEST_DIR);
		snprintf(dir, n, "%s/%s", top, series);
		rc = make_dir(store, top);
		if (rc == 0)
			rc = make_dir(top, dir);
	}
	free(top);
	if (rc < 0) {
		free(dir);
		return rc;
	}
	*series_dir = dir;
	return 0;
}

static void txn_clear(struct ck_manifest_txn *tx)
{
	free(tx->path);
	free(tx->backup);
	memset(tx, 0, sizeof(*tx));
}

/* The text of m as the store records it: in the current format, with the
 * paths under root relative to it. */
static int write_recorded(const char *root, const struct ck_manifest *m, struct ck_buf *text, struct ck_error *err)
{
	struct ck_manifest rec = *m;
	struct ck_ingest *files = calloc(m->nfiles + 1, sizeof(*files));
	int rc;

	if (!files)
		return ck_fail(err, ENOMEM, "out of memory");
	rec.version = 0;
	rec.ckpt.src_path = (char *)ck_store_rel_path(root, m->ckpt.src_path);
	for (size_t i = 0; i < m->nfiles; i++) {
		files[i] = m->files[i];
		files[i].info.src_path = (char *)ck_store_rel_path(root, m->files[i].info.src_path);
	}
	rec.files = files;
	rc = ck_manifest_write(text, &rec, err);
	free(files);
	return rc;
}

int ck_manifest_store(const char *store, const struct ck_manifest *m, struct ck_manifest_txn *tx,
		      struct ck_error *err)
{
	struct ck_buf text = CK_BUF_INIT;
	char *dir = NULL, *tmp = NULL;
	int rc;

	memset(tx, 0, sizeof(*tx));
	rc = write_recorded(store, m, &text, err);
	if (rc < 0)
		return rc;
	tx->path = ck_manifest_path(store, m->ckpt.series, m->ckpt.name);
	tmp = tx->path ? with_suffix(tx->path, "tmp") : NULL;
	tx->backup = tx->path ? with_suffix(tx->path, "old") : NULL;
	if (!tmp || !tx->backup) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = make_dirs(store, m->ckpt.series, &dir);
	if (rc < 0) {
		ck_fail(err, -rc, "%s/%s/%s: cannot make the manifest directory: %s", store, CK_MANIFEST_DIR,
			m->ckpt.series, strerror(-rc));
		goto out;
	}
	rc = write_durably(tmp, &text);
	if (rc < 0) {
		ck_fail(err, -rc, "%s: %s", tmp, strerror(-rc));
		unlink(tmp);
		goto out;
	}
	/* Keep the previous manifest under another name until the index commit is known. */
	if (link(tx->path, tx->backup) == 0) {
		tx->had_old = 1;
	} else {
		tx->had_old = errno != ENOENT;
		free(tx->backup);
		tx->backup = NULL;
	}
	if (rename(tmp, tx->path) < 0) {
		rc = ck_fail(err, errno, "%s: %s", tx->path, strerror(errno));
		unlink(tmp);
		if (tx->backup)
			unlink(tx->backup);
		goto out;
	}
	rc = ck_fsync_dir(dir);
	if (rc < 0) {
		ck_fail(err, -rc, "%s: %s", dir, strerror(-rc));
		ck_manifest_store_rollback(tx);
	}
out:
	if (rc < 0)
		txn_clear(tx);
	ck_buf_free(&text);
	free(tmp);
	free(dir);
	return rc;
}

void ck_manifest_store_commit(struct ck_manifest_txn *tx)
{
	if (tx->backup)
		unlink(tx->backup);
	txn_clear(tx);
}

void ck_manifest_store_rollback(struct ck_manifest_txn *tx)
{
	char *dir;

	if (!tx->path)
		return;
	if (tx->backup)
		rename(tx->backup, tx->path);
	else if (!tx->had_old)
		unlink(tx->path);
	/* Without a backup (no hard links here) the new manifest stays: it
	 * describes a checkpoint that was completely verified. */
	dir = strdup(tx->path);
	if (dir && strrchr(dir, '/')) {
		*strrchr(dir, '/') = '\0';
		ck_fsync_dir(dir);
	}
	free(dir);
	txn_clear(tx);
}

/* Recorded paths made absolute against root. */
static int resolve_paths(const char *root, struct ck_manifest *m, struct ck_error *err)
{
	int rc = ck_store_abs_path_inplace(root, &m->ckpt.src_path);

	for (size_t i = 0; i < m->nfiles && rc == 0; i++)
		rc = ck_store_abs_path_inplace(root, &m->files[i].info.src_path);
	if (rc < 0) {
		ck_manifest_clear(m);
		return ck_fail(err, ENOMEM, "out of memory");
	}
	return 0;
}

int ck_manifest_load(const char *root, const char *path, struct ck_manifest *out, struct ck_error *err)
{
	struct stat sb;
	char *text;
	size_t got = 0;
	int fd, rc;

	memset(out, 0, sizeof(*out));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return ck_fail(err, errno, "%s", errno == ELOOP ? "a symbolic link, not a manifest" : strerror(errno));
	if (fstat(fd, &sb) < 0) {
		rc = ck_fail(err, errno, "%s", strerror(errno));
		close(fd);
		return rc;
	}
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > CK_MANIFEST_MAX_BYTES) {
		close(fd);
		if (!S_ISREG(sb.st_mode))
			return ck_fail(err, EINVAL, "not a regular file");
		return ck_fail(err, E2BIG, "%" PRIu64 " bytes (a manifest has at most %u)", (uint64_t)sb.st_size,
			       CK_MANIFEST_MAX_BYTES);
	}
	text = malloc((size_t)sb.st_size + 1);
	if (!text) {
		close(fd);
		return ck_fail(err, ENOMEM, "out of memory");
	}
	while (got < (size_t)sb.st_size) {
		ssize_t r = read(fd, text + got, (size_t)sb.st_size - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	rc = got == (size_t)sb.st_size ? 0 : -EIO;
	close(fd);
	if (rc == 0)
		rc = ck_manifest_parse(text, got, out, err);
	else
		ck_fail(err, EIO, "short read (%zu of %" PRIu64 " bytes)", got, (uint64_t)sb.st_size);
	free(text);
	if (rc == 0 && root)
		rc = resolve_paths(root, out, err);
	return rc;
}
