/* Which files of deleted checkpoints the composites of live checkpoints
 * still draw from (include/ckptfs/refs.h).
 *
 * The answer comes from the composite builder itself, never from a guess:
 *
 *  1. every composite of a live checkpoint that has a version from a
 *     deleted checkpoint is built (or taken from the cache); the versions
 *     its extents read (vfile srcs) are used;
 *  2. a merge can take more than bytes from a version: the key order of a
 *     dict, a value that is no tensor.  So each such composite is built
 *     again without the versions still thought unused and compared extent
 *     by extent with the real one; where they differ, versions are kept,
 *     newest first, until they agree.  Keeping a version can change what
 *     another composite needs (merges are not monotonic in their inputs),
 *     so step 2 runs until nothing changes: at the end, every live
 *     composite is byte for byte what it is with all versions.  (Keeping
 *     the newest first would keep a partial save whose blocks a newer one
 *     replaced, rather than the older full save whose key order counts.)
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/refs.h"
#include "view_internal.h"

struct cand {
	struct phys_file *pf;
	int used;
	int trial;      /* left out of the rebuild being compared */
};

struct refs {
	struct ck_view *v;
	struct cand *cands;          /* sorted by pf pointer */
	size_t ncands;
	struct node_list nodes;      /* live composites with a candidate version */
	unsigned char *failed;       /* per node: cannot be built, keeps everything */
};

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	return x->pf < y->pf ? -1 : x->pf > y->pf;
}

static struct cand *cand_of(struct refs *r, struct phys_file *pf)
{
	struct cand key = { .pf = pf };

	return bsearch(&key, r->cands, r->ncands, sizeof(key), cand_cmp);
}

static int is_deleted(const struct view_ckpt *ck, const char *also)
{
	return ck->info.deleted || (also && strcmp(ck->info.name, also) == 0);
}

/* The files of the series' deleted checkpoints that are still versions. */
static int collect_cands(struct refs *r, struct view_series *s, const char *also)
{
	size_t n = 0;

	for (size_t i = 0; i < s->nckpts; i++)
		if (is_deleted(s->ckpts[i], also))
			n += s->ckpts[i]->nfiles;
	r->cands = calloc(n + 1, sizeof(*r->cands));
	if (!r->cands)
		return -ENOMEM;
	for (size_t i = 0; i < s->nckpts; i++) {
		if (!is_deleted(s->ckpts[i], also))
			continue;
		for (size_t j = 0; j < s->ckpts[i]->nfiles; j++)
			if (!s->ckpts[i]->files[j]->reclaimed)
				r->cands[r->ncands++].pf = s->ckpts[i]->files[j];
	}
	qsort(r->cands, r->ncands, sizeof(*r->cands), cand_cmp);
	return 0;
}

/* Files under n (n too) with a candidate version.  Callers hold ns_lock. */
static int collect_nodes(struct refs *r, struct ck_vnode *n)
{
	int rc = 0;

	for (size_t i = 0; i < n->nversions; i++) {
		if (cand_of(r, n->versions[i].pf)) {
			rc = node_list_add(&r->nodes, n);
			break;
		}
	}
	for (size_t i = 0; i < n->nchildren && !rc; i++)
		rc = collect_nodes(r, n->children[i]);
	return rc;
}

static void use_all(struct refs *r, const struct ck_vnode *n)
{
	for (size_t i = 0; i < n->nversions; i++) {
		struct cand *c = cand_of(r, n->versions[i].pf);

		if (c)
			c->used = 1;
	}
}

/* Step 1: what the extents of each composite read. */
static void mark_sources(struct refs *r)
{
	for (size_t i = 0; i < r->nodes.len; i++) {
		struct ck_vfile *f;

		if (view_node_vfile(r->v, r->nodes.n[i], &f)) {
			r->failed[i] = 1;
			use_all(r, r->nodes.n[i]);
			continue;
		}
		for (size_t j = 0; j < f->nsrcs; j++) {
			struct cand *c = cand_of(r, f->srcs[j]);

			if (c)
				c->used = 1;
		}
		ck_vfile_put(f);
	}
}

static int same_vfile(const struct ck_vfile *a, const struct ck_vfile *b)
{
	if (a->size != b->size || a->next != b->next)
		return 0;
	for (size_t i = 0; i < a->next; i++) {
		const struct vext *x = &a->ext[i], *y = &b->ext[i];

		if (x->off != y->off || x->len != y->len || x->pf != y->pf || x->pf_off != y->pf_off ||
		    !x->mem != !y->mem || (x->mem && memcmp(x->mem, y->mem, x->len) != 0))
			return 0;
	}
	return 1;
}

/* Whether n's composite is the same without the versions on trial. */
static int same_without_trial(struct refs *r, struct ck_vnode *n)
{
	struct ck_vnode tmp = *n;
	struct file_version *kept = calloc(n->nversions, sizeof(*kept));
	struct ck_vfile *f = NULL, *g = NULL;
	int same = 0;

	if (!kept)
		return 0;
	tmp.nversions = 0;
	for (size_t i = 0; i < n->nversions; i++) {
		struct cand *c = cand_of(r, n->versions[i].pf);

		if (!c || !c->trial)
			kept[tmp.nversions++] = n->versions[i];
	}
	tmp.versions = kept;
	tmp.vfile = NULL;
	if (tmp.nversions == n->nversions) {
		same = 1;
	} else if (tmp.nversions && !view_node_vfile(r->v, n, &f)) {
		pthread_mutex_lock(&r->v->build_lock);
		if (!composite_build(r->v, &tmp, &g)) {
			same = same_vfile(f, g);
			vfile_free(g);
		}
		pthread_mutex_unlock(&r->v->build_lock);
		ck_vfile_put(f);
	}
	free(kept);
	return same;
}

/* Puts n's unused candidate versions on trial (or takes them off). */
static void set_trial(struct refs *r, const struct ck_vnode *n, int on)
{
	for (size_t i = 0; i < n->nversions; i++) {
		struct cand *c = cand_of(r, n->versions[i].pf);

		if (c)
			c->trial = on && !c->used;
	}
}

/* Step 2 for one composite: all its unused versions dropped at once, or
 * else one by one, newest first, each kept when dropping it (with those
 * dropped before it) changes the composite.  Returns whether one was kept. */
static int keep_merge_inputs(struct refs *r, struct ck_vnode *n)
{
	int kept = 0;

	set_trial(r, n, 1);
	if (!same_without_trial(r, n)) {
		set_trial(r, n, 0);
		for (size_t j = 0; j < n->nversions; j++) {
			struct cand *c = cand_of(r, n->versions[j].pf);

			if (!c || c->used)
				continue;
			c->trial = 1;
			if (!same_without_trial(r, n)) {
				c->trial = 0;
				c->used = 1;
				kept = 1;
			}
		}
	}
	set_trial(r, n, 0);
	return kept;
}

/* Step 2, until nothing changes. */
static void mark_merge_inputs(struct refs *r)
{
	int changed;

	do {
		changed = 0;
		for (size_t i = 0; i < r->nodes.len; i++)
			if (!r->failed[i] && keep_merge_inputs(r, r->nodes.n[i]))
				changed = 1;
	} while (changed);
}

/* realpath(STORE)/data/<series>/<ckpt> when it is the checkpoint's source. */
static int owned_by_store(struct ck_view *v, const struct phys_file *pf)
{
	char *root = realpath(ck_store_path(v->store), NULL);
	const struct view_ckpt *ck = pf->ckpt;
	char dir[PATH_MAX];
	size_t n;
	int owned = 0;

	if (!root)
		return 0;
	if (snprintf(dir, sizeof(dir), "%s/%s/%s/%s", root, CK_STORE_DATA_DIR, ck->series->name, ck->info.name) <
	    (int)sizeof(dir) && !ck->info.is_file && strcmp(dir, ck->info.src_path) == 0) {
		n = strlen(dir);
		owned = strncmp(pf->info.src_path, dir, n) == 0 && pf->info.src_path[n] == '/';
	}
	free(root);
	return owned;
}

static int make_output(struct refs *r, struct view_series *s, const char *also, struct ck_version_ref **out,
		       size_t *nout)
{
	struct ck_version_ref *o = calloc(r->ncands + 1, sizeof(*o));
	size_t k = 0;

	if (!o)
		return -ENOMEM;
	/* In series order, each checkpoint's files in path order. */
	for (size_t i = 0; i < s->nckpts; i++) {
		const struct view_ckpt *ck = s->ckpts[i];

		if (!is_deleted(ck, also))
			continue;
		for (size_t j = 0; j < ck->nfiles; j++) {
			struct phys_file *pf = ck->files[j];
			struct cand *c = cand_of(r, pf);

			if (!c)
				continue;
			o[k].ckpt = strdup(ck->info.name);
			o[k].relpath = strdup(pf->info.relpath);
			o[k].src_path = strdup(pf->info.src_path);
			o[k].file_id = pf->info.id;
			o[k].size = pf->info.size;
			o[k].owned = owned_by_store(r->v, pf);
			o[k].used = c->used;
			if (!o[k].ckpt || !o[k].relpath || !o[k].src_path) {
				ck_version_refs_free(o, k + 1);
				return -ENOMEM;
			}
			k++;
		}
	}
	*out = o;
	*nout = k;
	return 0;
}

int ck_view_version_refs(struct ck_view *v, const char *series, const char *also_deleted,
			 struct ck_version_ref **out, size_t *n)
{
	struct refs r = { .v = v };
	struct view_series *s = NULL;
	int rc;

	*out = NULL;
	*n = 0;
	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; i < v->nseries && !s; i++)
		if (!strcmp(v->series[i]->name, series))
			s = v->series[i];
	rc = s ? collect_cands(&r, s, also_deleted) : -ENOENT;
	for (size_t i = 0; s && i < s->nckpts && !rc; i++)
		if (!is_deleted(s->ckpts[i], also_deleted) && s->ckpts[i]->node)
			rc = collect_nodes(&r, s->ckpts[i]->node);
	pthread_rwlock_unlock(&v->ns_lock);
	if (!rc) {
		r.failed = calloc(r.nodes.len + 1, 1);
		rc = r.failed ? 0 : -ENOMEM;
	}
	if (!rc) {
		mark_sources(&r);
		mark_merge_inputs(&r);
		rc = make_output(&r, s, also_deleted, out, n);
	}
	free(r.cands);
	node_list_free(&r.nodes);
	free(r.failed);
	return rc;
}

void ck_version_refs_free(struct ck_version_ref *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++) {
		free(r[i].ckpt);
		free(r[i].relpath);
		free(r[i].src_path);
	}
	free(r);
}
