/* Where a store's index lives, and the store's id (docs/design.md, "One
 * store, many nodes").
 *
 * On a local filesystem the LMDB environment is STORE/index, as it always
 * was.  LMDB needs a coherent memory map and working shared-memory locks,
 * which a network or distributed filesystem does not give between its
 * clients: there every node keeps its own index, built from the store's
 * manifests, in node-local storage:
 *
 *   BASE/<store id>-<hash of the store's path>/index/        the environment
 *   BASE/<store id>-<hash of the store's path>/index.lock    its lock
 *   BASE/<store id>-<hash of the store's path>/store         the store's path (for people)
 *
 * BASE is /var/cache/ckptfs, or where ckptfs -o index_dir= / ckptctl
 * --index-dir say; a user who cannot write there gets $XDG_CACHE_HOME/ckptfs
 * (~/.cache/ckptfs).  The path's hash keeps two copies of one store (same
 * id) on one node apart. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/fileio.h"
#include "ckptfs/fstype.h"
#include "index.h"
#include "manifest.h"

#define DEFAULT_BASE "/var/cache/ckptfs"
#define ID_LEN 32

static char *index_base;   /* ck_store_set_index_base */

int ck_store_set_index_base(const char *dir)
{
	char *copy = NULL;

	if (dir && !(copy = strdup(dir)))
		return -ENOMEM;
	free(index_base);
	index_base = copy;
	return 0;
}

const char *ck_store_index_base(void)
{
	return index_base;
}

/* mkdir -p, 0755. */
static int make_dirs(const char *path)
{
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *s = p + 1; rc == 0; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;

		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			rc = -errno;
		*s = c;
		if (!c)
			break;
	}
	free(p);
	return rc;
}

static int valid_id(const char *s)
{
	for (int i = 0; i < ID_LEN; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return s[ID_LEN] == '\n' || s[ID_LEN] == '\0';
}

static int read_id(const char *path, char out[ID_LEN + 1])
{
	char buf[ID_LEN + 2] = { 0 };
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < ID_LEN || !valid_id(buf))
		return -EINVAL;
	memcpy(out, buf, ID_LEN);
	out[ID_LEN] = '\0';
	return 0;
}

/* A new id, written whole to a temporary file and linked into place, so
 * that of two processes making one at once exactly one wins (link fails
 * with EEXIST, as O_EXCL would) and the other reads the winner's. */
static int make_id(const char *store, const char *path, char out[ID_LEN + 1])
{
	uint8_t raw[16];
	char text[ID_LEN + 2], *tmp = NULL;
	int fd, rc = 0;

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -EIO;
	for (int i = 0; i < 16; i++)
		snprintf(text + 2 * i, 3, "%02x", raw[i]);
	text[ID_LEN] = '\n';
	text[ID_LEN + 1] = '\0';
	if (asprintf(&tmp, "%s.tmp.%ld", path, (long)getpid()) < 0)
		return -ENOMEM;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write(fd, text, ID_LEN + 1) != ID_LEN + 1 || fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc == 0 && link(tmp, path) < 0 && errno != EEXIST)
		rc = -errno;
	unlink(tmp);
	free(tmp);
	if (rc == 0)
		rc = ck_fsync_dir(store);
	return rc < 0 ? rc : read_id(path, out);
}

int ck_store_id(const char *store, int create, char out[ID_LEN + 1], struct ck_error *err)
{
	char *path = ck_path_join(store, CK_STORE_ID_FILE);
	int rc;

	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = read_id(path, out);
	if (rc == -ENOENT && create)
		rc = make_id(store, path, out);
	if (rc == -EINVAL)
		ck_fail(err, EINVAL, "%s: not a store id (32 lowercase hex digits)", path);
	else if (rc < 0)
		ck_fail(err, -rc, "%s: %s", path, strerror(-rc));
	free(path);
	return rc;
}

/* The base directory of node-local indexes for this process. */
static int pick_base(char **out)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *alt = NULL;

	if (index_base) {
		int rc = make_dirs(index_base);

		*out = rc == 0 ? strdup(index_base) : NULL;
		return rc < 0 ? rc : *out ? 0 : -ENOMEM;
	}
	if (make_dirs(DEFAULT_BASE) == 0 && access(DEFAULT_BASE, W_OK) == 0) {
		*out = strdup(DEFAULT_BASE);
		return *out ? 0 : -ENOMEM;
	}
	if (xdg && *xdg == '/') {
		if (asprintf(&alt, "%s/ckptfs", xdg) < 0)
			return -ENOMEM;
	} else if (home && *home == '/') {
		if (asprintf(&alt, "%s/.cache/ckptfs", home) < 0)
			return -ENOMEM;
	} else {
		return -EACCES;
	}
	int rc = make_dirs(alt);

	if (rc < 0) {
		free(alt);
		return rc;
	}
	*out = alt;
	return 0;
}

/* BASE/<id>-<hash>/store: the store's path, for whoever looks at the cache. */
static void note_store(const char *node_dir, const char *store)
{
	char *path = ck_path_join(node_dir, "store");
	int fd = path ? open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;

	if (fd >= 0) {
		if (write(fd, store, strlen(store)) < 0 || write(fd, "\n", 1) < 0) {
			/* only informative */
		}
		close(fd);
	}
	free(path);
}

int ck_index_place_find(const char *store, int writable, struct ck_index_place *p, struct ck_error *err)
{
	char id[ID_LEN + 1], *base = NULL, *node = NULL;
	int rc;

	memset(p, 0, sizeof(*p));
	rc = ck_fs_shared_path(store, &p->fs);
	if (rc < 0)
		return ck_fail(err, -rc, "%s: statfs: %s", store, strerror(-rc));
	p->shared = rc;
	if (!p->shared) {
		p->dir = ck_path_join(store, CK_STORE_INDEX_DIR);
		p->lock = ck_path_join(store, CK_STORE_LOCK_FILE);
		p->parent = strdup(store);
		goto out;
	}
	/* A store made before ids (or on a read-only mount): its id is made on
	 * the first open that may write, else derived from its path. */
	rc = ck_store_id(store, writable, id, NULL);
	if (rc < 0) {
		XXH128_hash_t h = XXH3_128bits(store, strlen(store));

		snprintf(id, sizeof(id), "%016" PRIx64 "%016" PRIx64, h.high64, h.low64);
	}
	rc = pick_base(&base);
	if (rc < 0)
		return ck_fail(err, -rc, "no directory for the node-local index of %s (on %s): %s; choose one with "
			       "-o index_dir= or --index-dir", store, p->fs, strerror(-rc));
	if (asprintf(&node, "%s/%s-%016" PRIx64, base, id, (uint64_t)XXH3_64bits(store, strlen(store))) < 0) {
		free(base);
		return ck_fail(err, ENOMEM, "out of memory");
	}
	free(base);
	rc = make_dirs(node);
	if (rc < 0) {
		ck_fail(err, -rc, "%s: %s", node, strerror(-rc));
		free(node);
		return rc;
	}
	note_store(node, store);
	p->dir = ck_path_join(node, CK_STORE_INDEX_DIR);
	p->lock = ck_path_join(node, CK_STORE_LOCK_FILE);
	p->parent = node;
out:
	if (!p->dir || !p->lock || !p->parent) {
		ck_index_place_clear(p);
		return ck_fail(err, ENOMEM, "out of memory");
	}
	return 0;
}

void ck_index_place_clear(struct ck_index_place *p)
{
	free(p->dir);
	free(p->lock);
	free(p->parent);
	memset(p, 0, sizeof(*p));
}

int ck_store_temp_stale(int shared, const struct stat *sb)
{
	enum { SHARED_TEMP_AGE = 600 };

	return !shared || time(NULL) - sb->st_mtime > SHARED_TEMP_AGE;
}
