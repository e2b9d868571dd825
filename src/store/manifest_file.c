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

#include "ckptfs/fileio.h"
#include "index.h"
#include "manifest.h"
#include "staging.h"

#define SHORT_NAME 160

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

static char *with_suffix(const char *path, const char *what)
{
	size_t n = strlen(path) + strlen(what) + 32;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s.%s.%ld", path, what, (long)getpid());
	return p;
}

static void txn_clear(struct ck_manifest_txn *tx)
{
	free(tx->path);
	free(tx->backup);
	memset(tx, 0, sizeof(*tx));
}

/* The text of m as the store records it: in the current format, with the
 * paths under root relative to it (manifest.h). */
static int write_recorded(const char *root, const struct ck_manifest *m, struct ck_buf *text, struct ck_error *err)
{
	struct ck_manifest rec = *m;
	struct ck_ingest *files = calloc(m->nfiles + 1, sizeof(*files));
	int rc;

	if (!files)
		return ck_fail(err, ENOMEM, "out of memory");
	/* A checkpoint whose files have no owners recorded is written in
	 * version 1, which holds absolute paths only. */
	int rel = !m->nfiles || m->files[0].info.has_owner;

	rec.version = 0;
	rec.ckpt.src_path = rel ? (char *)ck_store_rel_path(root, m->ckpt.src_path) : m->ckpt.src_path;
	for (size_t i = 0; i < m->nfiles; i++) {
		files[i] = m->files[i];
		if (rel)
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
	char *dir = NULL;
	int rc;

	memset(tx, 0, sizeof(*tx));
	rc = write_recorded(store, m, &text, err);
	if (rc < 0)
		return rc;
	tx->path = ck_manifest_path(store, m->ckpt.series, m->ckpt.name);
	tx->backup = tx->path ? with_suffix(tx->path, "old") : NULL;
	if (!tx->backup) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	rc = ck_store_area_dir(store, CK_MANIFEST_DIR, m->ckpt.series, &dir, err);
	if (rc < 0)
		goto out;
	/* Keep the previous manifest under another name until the index commit is known. */
	if (link(tx->path, tx->backup) == 0) {
		tx->had_old = 1;
	} else {
		tx->had_old = errno != ENOENT;
		free(tx->backup);
		tx->backup = NULL;
	}
	rc = ck_file_replace(tx->path, text.data, text.len, err);
	if (rc < 0)
		ck_manifest_store_rollback(tx);
out:
	if (rc < 0)
		txn_clear(tx);
	ck_buf_free(&text);
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
	if (!tx->path)
		return;
	if (tx->backup) {
		rename(tx->backup, tx->path);
		/* Left when the new manifest never replaced the old one: rename()
		 * between two links of one file does nothing. */
		unlink(tx->backup);
	} else if (!tx->had_old) {
		unlink(tx->path);
	}
	/* Without a backup (no hard links here) the new manifest stays: it
	 * describes a checkpoint that was completely verified. */
	ck_fsync_parent(tx->path);
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
	uint8_t *text;
	size_t len;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = ck_read_file(path, CK_MANIFEST_MAX_BYTES, &text, &len);
	if (rc == -ELOOP)
		return ck_fail(err, ELOOP, "a symbolic link, not a manifest");
	if (rc == -EINVAL)
		return ck_fail(err, EINVAL, "not a regular file");
	if (rc == -EFBIG)
		return ck_fail(err, E2BIG, "%zu bytes (a manifest has at most %u)", len, CK_MANIFEST_MAX_BYTES);
	if (rc == -EIO)
		return ck_fail(err, EIO, "shorter than its size (%zu bytes)", len);
	if (rc < 0)
		return ck_fail(err, -rc, "%s", strerror(-rc));
	rc = ck_manifest_parse((const char *)text, len, out, err);
	free(text);
	if (rc == 0 && root)
		rc = resolve_paths(root, out, err);
	return rc;
}
