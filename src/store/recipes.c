/* Recipes kept in the store (docs/format.md, "Recipes"): STORE/recipes/
 * NAME.yaml holds the document as `ckptctl recipe add` was given it, after
 * it passed the parser and the check against the store.  Adding writes a
 * temporary file, syncs it and links it to its name (a name taken already
 * fails, EEXIST), then syncs the directory; removing unlinks and syncs.
 * Readers (the mount) list the directory and read each file whole. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/recipe.h"
#include "ckptfs/store.h"
#include "ckptfs/str.h"

#define SUFFIX ".yaml"

static char *recipe_path(const char *store, const char *name)
{
	size_t n = strlen(store) + strlen(CK_STORE_RECIPES_DIR) + strlen(name) + sizeof(SUFFIX) + 3;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s/%s%s", store, CK_STORE_RECIPES_DIR, name, name[0] ? SUFFIX : "");
	return p;
}

static int check_name(const char *name, struct ck_error *err)
{
	if (!ck_recipe_name_ok(name))
		return ck_fail(err, EINVAL,
			       "'%s': a recipe name is 1 to %d letters, digits, '.', '_' or '-', not starting with '.'",
			       name, CK_RECIPE_MAX_NAME);
	return 0;
}

int ck_store_recipe_add(const char *store, const char *name, const char *text, size_t len, struct ck_error *err)
{
	char *dir = recipe_path(store, ""), *path = recipe_path(store, name), *tmp = NULL;
	int fd = -1, rc = check_name(name, err);

	if (!rc && (!dir || !path || !(tmp = malloc(strlen(path) + 32))))
		rc = -ENOMEM;
	if (rc)
		goto out;
	rc = ck_mkdir_durable(dir);
	if (rc) {
		ck_fail(err, -rc, "%s: %s", dir, strerror(-rc));
		goto out;
	}
	snprintf(tmp, strlen(path) + 32, "%s%s%ld", path, CK_REPLACE_TMP, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = ck_fail(err, errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = ck_write_all(fd, text, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	fd = -1;
	if (rc)
		ck_fail(err, -rc, "%s: %s", tmp, strerror(-rc));
	/* link, not rename: a name taken already stays as it is. */
	else if (link(tmp, path) < 0)
		rc = errno == EEXIST ? ck_fail(err, EEXIST, "recipe '%s' exists already (ckptctl recipe rm first)", name)
				     : ck_fail(err, errno, "%s: %s", path, strerror(errno));
	unlink(tmp);
	if (!rc && (rc = ck_fsync_dir(dir)) < 0)
		ck_fail(err, -rc, "%s: %s", dir, strerror(-rc));
out:
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(dir);
	free(path);
	return rc;
}

int ck_store_recipe_read(const char *store, const char *name, char **text, size_t *len, struct ck_error *err)
{
	uint8_t *buf = NULL;
	char *path;
	int rc = check_name(name, err);

	if (rc)
		return rc;
	path = recipe_path(store, name);
	if (!path)
		return -ENOMEM;
	rc = ck_read_file(path, CK_RECIPE_MAX_BYTES, &buf, len);
	if (rc == -ENOENT)
		ck_fail(err, ENOENT, "no recipe '%s'", name);
	else if (rc == -EFBIG)
		rc = ck_fail(err, E2BIG, "%s: larger than %u bytes", path, CK_RECIPE_MAX_BYTES);
	else if (rc)
		ck_fail(err, -rc, "%s: %s", path, strerror(-rc));
	free(path);
	if (!rc)
		*text = (char *)buf;
	return rc;
}

int ck_store_recipe_list(const char *store, char ***names, size_t *n)
{
	char *dir = recipe_path(store, ""), **v = NULL;
	size_t k = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	free(dir);
	if (!d && errno != ENOENT)
		return -errno;
	while (d && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		char *name;

		if (len <= strlen(SUFFIX) || !ck_ends_with(de->d_name, SUFFIX))
			continue;
		name = strndup(de->d_name, len - strlen(SUFFIX));
		if (!name) {
			rc = -ENOMEM;
			break;
		}
		if (!ck_recipe_name_ok(name)) {   /* temporary files, strays */
			free(name);
			continue;
		}
		if (k == cap) {
			char **p = ck_grow(v, &cap, sizeof(*p), 16);

			if (!p) {
				free(name);
				rc = -ENOMEM;
				break;
			}
			v = p;
		}
		v[k++] = name;
	}
	if (d)
		closedir(d);
	if (rc) {
		ck_strv_free(v, k);
		return rc;
	}
	if (k)
		qsort(v, k, sizeof(*v), ck_strp_cmp);
	*names = v ? v : calloc(1, sizeof(*v));
	*n = k;
	return *names ? 0 : -ENOMEM;
}

int ck_store_recipe_stat(const char *store, const char *name, struct stat *sb)
{
	char *path = recipe_path(store, name);
	int rc;

	if (!path)
		return -ENOMEM;
	rc = stat(path, sb) < 0 ? -errno : 0;
	free(path);
	return rc;
}

int ck_store_recipe_remove(const char *store, const char *name, struct ck_error *err)
{
	char *dir = recipe_path(store, ""), *path = recipe_path(store, name);
	int rc = check_name(name, err);

	if (!rc && (!dir || !path))
		rc = -ENOMEM;
	if (!rc && unlink(path) < 0)
		rc = ck_fail(err, errno, errno == ENOENT ? "no recipe '%s'" : "recipe '%s': cannot remove it", name);
	if (!rc && (rc = ck_fsync_dir(dir)) < 0)
		ck_fail(err, -rc, "%s: %s", dir, strerror(-rc));
	free(dir);
	free(path);
	return rc;
}
