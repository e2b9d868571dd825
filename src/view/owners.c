/* Owners and modes of the mounted namespace, from what it is made of
 * (docs/design.md, "Owners and modes"):
 *
 *   /                      STORE/data (the store's own owner, 0755, when
 *                          there is none)
 *   /<series>/             the directory holding its newest checkpoint
 *   /<series>/<ckpt>/...   the checkpoint's directory and subdirectories
 *   files                  the physical files a composite draws from: the
 *                          newest version's owner and group, per class the
 *                          bits every source grants, less the classes that
 *                          cannot search the directories holding sources in
 *                          other checkpoints
 *
 * A physical file shows its owner now when it is still the imported file,
 * else what the index recorded at import, else (a store from before owners
 * were recorded) the owner of the directory that held it with that
 * directory's read bits.  A directory that is gone shows as its parent in
 * the namespace does.
 *
 * Cached: a physical file's owner (refreshed at every open by phys_check),
 * a directory's (a series' is taken again when a refresh adds checkpoints).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/fileio.h"
#include "view_internal.h"

enum { OWNER_UNKNOWN = 0, OWNER_LIVE, OWNER_RECORDED, OWNER_DERIVED };

static int stat_dir(const char *path, struct ck_owner *o)
{
	struct stat sb;

	if (stat(path, &sb) < 0)
		return -errno;
	if (!S_ISDIR(sb.st_mode))
		return -ENOTDIR;
	ck_owner_from_stat(o, &sb);
	return 0;
}

void phys_owner_update(struct ck_view *v, struct phys_file *pf, const struct ck_owner *o)
{
	pthread_mutex_lock(&v->lock);
	pf->owner = *o;
	pf->owner_state = OWNER_LIVE;
	pthread_mutex_unlock(&v->lock);
}

void phys_owner(struct ck_view *v, struct phys_file *pf, struct ck_owner *out)
{
	struct ck_owner o = { 0, 0, 0 };
	int state;

	pthread_mutex_lock(&v->lock);
	state = pf->owner_state;
	if (state)
		*out = pf->owner;
	pthread_mutex_unlock(&v->lock);
	if (state)
		return;
	if (ck_file_check_owner(&pf->info, &o, NULL) == 0) {
		state = OWNER_LIVE;
	} else if (pf->info.has_owner) {
		o = pf->info.owner;
		state = OWNER_RECORDED;
	} else {
		char *dir = strdup(pf->info.src_path), *slash = dir ? strrchr(dir, '/') : NULL;

		if (slash)
			*slash = '\0';
		if (slash && slash > dir && stat_dir(dir, &o) == 0)
			o.mode &= 0444;
		else
			memset(&o, 0, sizeof(o));
		free(dir);
		state = OWNER_DERIVED;
	}
	pthread_mutex_lock(&v->lock);
	if (!pf->owner_state) {
		pf->owner = o;
		pf->owner_state = state;
	}
	*out = pf->owner;
	pthread_mutex_unlock(&v->lock);
}

/* The path of directory node n inside its checkpoint ("" for the
 * checkpoint's own node), allocated; NULL when out of memory. */
static char *dir_relpath(const struct ck_vnode *n)
{
	const struct ck_vnode *p;
	size_t len = 0;
	char *out;

	for (p = n; p && p != p->ckpt->node; p = p->parent)
		len += strlen(p->name) + 1;
	out = malloc(len + 1);
	if (!out)
		return NULL;
	out[len] = '\0';
	for (p = n; p && p != p->ckpt->node; p = p->parent) {
		size_t k = strlen(p->name);

		len -= k;
		memcpy(out + len, p->name, k);
		if (len)
			out[--len] = '/';
	}
	return out;
}

static void root_owner(struct ck_view *v, struct ck_owner *o)
{
	char *data = ck_path_join(ck_store_path(v->store), CK_STORE_DATA_DIR);
	struct stat sb;

	if (data && stat_dir(data, o) == 0) {
		free(data);
		return;
	}
	free(data);
	if (stat(ck_store_path(v->store), &sb) == 0) {
		ck_owner_from_stat(o, &sb);
		o->mode = 0755;
	} else {
		o->uid = o->gid = 0;
		o->mode = 0755;
	}
}

/* The checkpoint whose directory gives series s its owner: the newest one
 * not deleted, else the newest. */
static const struct view_ckpt *series_source(const struct view_series *s)
{
	for (size_t i = s->nckpts; i-- > 0;)
		if (!s->ckpts[i]->info.deleted)
			return s->ckpts[i];
	return s->nckpts ? s->ckpts[s->nckpts - 1] : NULL;
}

static int dir_owner(struct ck_view *v, struct ck_vnode *n, struct ck_owner *out);

/* What directory node n is made of, looked at now. */
static void dir_owner_now(struct ck_view *v, struct ck_vnode *n, struct ck_owner *o)
{
	char *path = NULL;
	int rc = -ENOENT;

	if (!n->parent) {
		root_owner(v, o);
		return;
	}
	if (!n->ckpt) {
		const struct view_ckpt *ck = n->series ? series_source(n->series) : NULL;

		if (ck) {
			path = strdup(ck->info.src_path);
			if (path && strrchr(path, '/') && strrchr(path, '/') != path)
				*strrchr(path, '/') = '\0';
		}
	} else {
		char *rel = dir_relpath(n);

		path = rel && *rel ? ck_path_join(n->ckpt->info.src_path, rel) : rel ? strdup(n->ckpt->info.src_path) : NULL;
		free(rel);
	}
	if (path)
		rc = stat_dir(path, o);
	free(path);
	if (rc < 0)
		dir_owner(v, n->parent, o);
}

static int dir_owner(struct ck_view *v, struct ck_vnode *n, struct ck_owner *out)
{
	struct ck_owner o;
	int known;

	pthread_mutex_lock(&v->lock);
	known = n->owner_known;
	if (known)
		*out = n->owner;
	pthread_mutex_unlock(&v->lock);
	if (known)
		return 0;
	dir_owner_now(v, n, &o);
	pthread_mutex_lock(&v->lock);
	n->owner = o;
	n->owner_known = 1;
	pthread_mutex_unlock(&v->lock);
	*out = o;
	return 0;
}

void view_owner_forget(struct ck_view *v, struct ck_vnode *n)
{
	pthread_mutex_lock(&v->lock);
	n->owner_known = 0;
	pthread_mutex_unlock(&v->lock);
}

/* Calls fn for each directory that holds pf inside its own checkpoint,
 * outermost first: the checkpoint's directory, then its subdirectories
 * down to the file's.  Nothing for a single-file checkpoint.  Returns the
 * first non-zero result of fn. */
static int source_dirs(struct ck_view *v, struct phys_file *pf,
		       int (*fn)(void *ctx, const struct ck_owner *dir), void *ctx)
{
	struct ck_vnode *d = pf->ckpt->node;
	const char *p = pf->info.relpath;
	struct ck_owner o;
	int rc;

	if (!d || !d->is_dir)
		return 0;
	dir_owner(v, d, &o);
	rc = fn(ctx, &o);
	for (const char *slash; !rc && (slash = strchr(p, '/')); p = slash + 1) {
		char name[256];
		const struct ck_vnode *c = NULL;
		size_t len = (size_t)(slash - p);

		if (!len || len >= sizeof(name))
			continue;
		memcpy(name, p, len);
		name[len] = '\0';
		if (ck_view_lookup(v, d, name, &c) < 0 || !c->is_dir)
			break;
		d = (struct ck_vnode *)c;
		dir_owner(v, d, &o);
		rc = fn(ctx, &o);
	}
	return rc;
}

/* The physical files the file node n draws from: its composite's sources
 * when it builds (*f holds a reference to put), else every version. */
static void file_sources(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **f, struct phys_file ***srcs,
			 size_t *nsrcs, struct phys_file ***all)
{
	*all = NULL;
	if (view_node_vfile(v, n, f) == 0) {
		*srcs = (*f)->srcs;
		*nsrcs = (*f)->nsrcs;
		return;
	}
	*f = NULL;
	*nsrcs = 0;
	*all = calloc(n->nversions ? n->nversions : 1, sizeof(**all));
	if (*all)
		for (size_t i = 0; i < n->nversions; i++)
			(*all)[(*nsrcs)++] = n->versions[i].pf;
	*srcs = *all;
}

static int fold_dir(void *ctx, const struct ck_owner *dir)
{
	uint32_t *mode = ctx;

	*mode = ck_perm_through_dir(*mode, dir->mode);
	return 0;
}

/* The shown owner of file node n (see the top of this file). */
static void file_owner(struct ck_view *v, struct ck_vnode *n, struct ck_owner *out)
{
	struct phys_file **srcs, **all;
	struct ck_vfile *f;
	size_t nsrcs;

	phys_owner(v, n->versions[0].pf, out);
	file_sources(v, n, &f, &srcs, &nsrcs, &all);
	for (size_t i = 0; i < nsrcs; i++) {
		struct ck_owner o;
		uint32_t mode;

		phys_owner(v, srcs[i], &o);
		mode = o.mode;
		if (srcs[i]->ckpt != n->ckpt)
			source_dirs(v, srcs[i], fold_dir, &mode);
		out->mode = ck_perm_both(out->mode, mode);
	}
	if (f)
		ck_vfile_put(f);
	free(all);
}

void view_node_owner(struct ck_view *v, struct ck_vnode *n, struct ck_owner *out)
{
	if (n->is_dir || !n->nversions)
		dir_owner(v, n, out);
	else if (n->versions[0].pf->info.kind == CK_FILE_SYMLINK)
		*out = n->versions[0].pf->info.owner;   /* served from the index alone */
	else
		file_owner(v, n, out);
}

static int may_search(void *ctx, const struct ck_owner *dir)
{
	return ck_perm_check(dir, 1, ctx, CK_MAY_EXEC);
}

int ck_view_access(struct ck_view *v, const struct ck_vnode *cn, const struct ck_cred *c, int mask)
{
	struct ck_vnode *n = (struct ck_vnode *)cn;
	struct phys_file **srcs, **all;
	struct ck_vfile *f;
	struct ck_owner o;
	size_t nsrcs;
	int rc;

	view_node_owner(v, n, &o);
	rc = ck_perm_check(&o, n->is_dir, c, mask);
	if (rc || n->is_dir || !n->nversions || !(mask & CK_MAY_READ))
		return rc;
	/* Reading a composite reads every file it draws from. */
	file_sources(v, n, &f, &srcs, &nsrcs, &all);
	for (size_t i = 0; i < nsrcs && !rc; i++) {
		phys_owner(v, srcs[i], &o);
		rc = ck_perm_check(&o, 0, c, CK_MAY_READ);
		if (!rc && srcs[i]->ckpt != n->ckpt)
			rc = source_dirs(v, srcs[i], may_search, (void *)c);
	}
	if (f)
		ck_vfile_put(f);
	free(all);
	return rc;
}

size_t ck_vfile_nsources(const struct ck_vfile *f)
{
	return f->nsrcs;
}

struct ck_vsource *ck_vfile_source(const struct ck_vfile *f, size_t i)
{
	return i < f->nsrcs ? (struct ck_vsource *)f->srcs[i] : NULL;
}

void ck_view_sources_owner(struct ck_view *v, struct ck_vsource *const *srcs, size_t n, struct ck_owner *out)
{
	int64_t newest = INT64_MIN;

	memset(out, 0, sizeof(*out));
	out->mode = 07777;
	for (size_t i = 0; i < n; i++) {
		struct phys_file *pf = (struct phys_file *)srcs[i];
		struct ck_owner o;
		uint32_t mode;

		phys_owner(v, pf, &o);
		mode = o.mode;
		source_dirs(v, pf, fold_dir, &mode);
		out->mode = ck_perm_both(out->mode, mode);
		if (pf->ckpt->info.step > newest) {
			newest = pf->ckpt->info.step;
			out->uid = o.uid;
			out->gid = o.gid;
		}
	}
	if (!n)
		out->mode = 0;
}

int ck_view_sources_access(struct ck_view *v, struct ck_vsource *const *srcs, size_t n, const struct ck_cred *c,
			   int mask)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		struct phys_file *pf = (struct phys_file *)srcs[i];
		struct ck_owner o;

		phys_owner(v, pf, &o);
		rc = ck_perm_check(&o, 0, c, mask);
		if (!rc)
			rc = source_dirs(v, pf, may_search, (void *)c);
	}
	return rc;
}
