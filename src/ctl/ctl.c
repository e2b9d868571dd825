/* Control files of a mount (include/ckptfs/ctl.h).
 *
 * Inode numbers: the directory is CK_CTL_INO_BIT | 1, its files
 * CK_CTL_INO_BIT | (2 + file); a series file is CK_CTL_INO_BIT |
 * SERIES_FILE_BIT | series << 16 | file, series being an index into the
 * series names seen (kept for the mount's life, so an inode keeps
 * meaning the same file). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/clock.h"
#include "ckptfs/ctl.h"

#define SERIES_FILE_BIT ((uint64_t)1 << 48)
#define MAX_FILES 0xffffu
#define MAX_SERIES ((uint64_t)1 << 32)

struct ctl_file {
	char *name;
	int series_file;
	ck_ctl_render_fn fn;
	void *ctx;
};

struct ck_ctl {
	pthread_mutex_t lock;
	struct ctl_file *files;
	size_t nfiles;
	char **series;          /* interned series names */
	size_t nseries;
	int64_t created_ns;
};

int ck_ctl_new(struct ck_ctl **out)
{
	struct ck_ctl *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	c->created_ns = ck_now_ns();
	*out = c;
	return 0;
}

void ck_ctl_free(struct ck_ctl *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nfiles; i++)
		free(c->files[i].name);
	for (size_t i = 0; i < c->nseries; i++)
		free(c->series[i]);
	free(c->files);
	free(c->series);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static int plain_name(const char *s)
{
	return s && *s && strlen(s) <= 255 && !strchr(s, '/') && strcmp(s, ".") && strcmp(s, "..");
}

static struct ctl_file *find_file(const struct ck_ctl *c, const char *name, int series_file, size_t *index)
{
	for (size_t i = 0; i < c->nfiles; i++) {
		if (c->files[i].series_file == series_file && strcmp(c->files[i].name, name) == 0) {
			if (index)
				*index = i;
			return &c->files[i];
		}
	}
	return NULL;
}

int ck_ctl_add(struct ck_ctl *c, const char *name, int series_file, ck_ctl_render_fn fn, void *ctx)
{
	struct ctl_file *f;

	if (!plain_name(name) || !fn)
		return -EINVAL;
	if (find_file(c, name, series_file, NULL))
		return -EEXIST;
	if (c->nfiles >= MAX_FILES)
		return -ENOMEM;
	f = realloc(c->files, (c->nfiles + 1) * sizeof(*f));
	if (!f)
		return -ENOMEM;
	c->files = f;
	f = &c->files[c->nfiles];
	f->name = strdup(name);
	if (!f->name)
		return -ENOMEM;
	f->series_file = series_file;
	f->fn = fn;
	f->ctx = ctx;
	c->nfiles++;
	return 0;
}

uint64_t ck_ctl_dir_ino(void)
{
	return CK_CTL_INO_BIT | 1;
}

int ck_ctl_is_series_file(const struct ck_ctl *c, const char *name)
{
	return find_file(c, name, 1, NULL) != NULL;
}

/* Whether the file is there now: its generator says so. */
static int present(const struct ctl_file *f, const char *series)
{
	struct ck_buf b = CK_BUF_INIT;
	int rc = f->fn(f->ctx, series, &b);

	ck_buf_free(&b);
	return rc;
}

int ck_ctl_lookup(struct ck_ctl *c, const char *name, uint64_t *ino)
{
	size_t i;

	if (!find_file(c, name, 0, &i))
		return -ENOENT;
	*ino = CK_CTL_INO_BIT | (2 + i);
	return 0;
}

/* The index of series among the interned names, adding it: 0 or -ENOMEM. */
static int intern(struct ck_ctl *c, const char *series, uint64_t *index)
{
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nseries; i++) {
		if (strcmp(c->series[i], series) == 0) {
			*index = i;
			goto out;
		}
	}
	if (c->nseries >= MAX_SERIES) {
		rc = -ENOMEM;
		goto out;
	}
	{
		char **v = realloc(c->series, (c->nseries + 1) * sizeof(*v));

		if (!v) {
			rc = -ENOMEM;
			goto out;
		}
		c->series = v;
		v[c->nseries] = strdup(series);
		if (!v[c->nseries]) {
			rc = -ENOMEM;
			goto out;
		}
		*index = c->nseries++;
	}
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ck_ctl_lookup_series(struct ck_ctl *c, const char *series, const char *name, uint64_t *ino)
{
	uint64_t s;
	size_t i;
	int rc;

	if (!find_file(c, name, 1, &i))
		return -ENOENT;
	rc = present(&c->files[i], series);
	if (rc)
		return rc;
	rc = intern(c, series, &s);
	if (rc)
		return rc;
	*ino = CK_CTL_INO_BIT | SERIES_FILE_BIT | s << 16 | i;
	return 0;
}

/* The file and series (NULL for the control directory's files) of ino:
 * 0, -ENOENT; 1 for the directory itself.  The series name is copied
 * into *series (caller frees). */
static int decode(struct ck_ctl *c, uint64_t ino, const struct ctl_file **f, char **series)
{
	uint64_t low = ino & ~CK_CTL_INO_BIT;
	int rc = 0;

	*f = NULL;
	*series = NULL;
	if (!ck_ctl_is_ino(ino))
		return -ENOENT;
	if (low == 1)
		return 1;
	if (!(low & SERIES_FILE_BIT)) {
		if (low < 2 || low - 2 >= c->nfiles || c->files[low - 2].series_file)
			return -ENOENT;
		*f = &c->files[low - 2];
		return 0;
	}
	low &= ~SERIES_FILE_BIT;
	if ((low & 0xffff) >= c->nfiles || !c->files[low & 0xffff].series_file)
		return -ENOENT;
	*f = &c->files[low & 0xffff];
	pthread_mutex_lock(&c->lock);
	if ((low >> 16) >= c->nseries)
		rc = -ENOENT;
	else if (!(*series = strdup(c->series[low >> 16])))
		rc = -ENOMEM;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ck_ctl_render(struct ck_ctl *c, uint64_t ino, struct ck_buf *out)
{
	const struct ctl_file *f;
	char *series;
	int rc = decode(c, ino, &f, &series);

	if (rc == 1)
		return -EISDIR;
	if (rc == 0)
		rc = f->fn(f->ctx, series, out);
	free(series);
	return rc;
}

int ck_ctl_getattr(struct ck_ctl *c, uint64_t ino, struct ck_ctl_attr *out)
{
	struct ck_buf b = CK_BUF_INIT;
	int rc;

	memset(out, 0, sizeof(*out));
	if (ino == ck_ctl_dir_ino()) {
		out->mode = S_IFDIR | 0555;
		out->mtime_ns = c->created_ns;
		return 0;
	}
	rc = ck_ctl_render(c, ino, &b);
	if (rc == 0) {
		out->mode = S_IFREG | 0444;
		out->size = b.len;
		out->mtime_ns = ck_now_ns();
	}
	ck_buf_free(&b);
	return rc;
}

int ck_ctl_dir_entry(struct ck_ctl *c, size_t i, const char **name, uint64_t *ino)
{
	for (size_t k = 0, seen = 0; k < c->nfiles; k++) {
		if (c->files[k].series_file)
			continue;
		if (seen++ == i) {
			*name = c->files[k].name;
			*ino = CK_CTL_INO_BIT | (2 + k);
			return 0;
		}
	}
	return -ENOENT;
}
