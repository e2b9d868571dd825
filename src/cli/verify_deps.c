/* ckptctl verify, second pass: which composites depend on the damage.
 *
 * A composite only takes bytes from versions of the same relative path in
 * its own and earlier checkpoints of its series, so the files to look at
 * are that path in every checkpoint of the series from the damaged step on
 * (the targets).  For each, the view resolves the composite exactly as the
 * mount would and lists where every tensor's bytes come from; a tensor
 * whose bytes overlap a damaged range (or come from a file changed whole)
 * is served damaged.  A composite that cannot be built at all because a
 * version it needs changed or vanished is unservable: every read fails.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/view.h"
#include "verify.h"

static int same_file_group(const struct vfy_damage *d, const char *series, const char *relpath)
{
	return strcmp(d->series, series) == 0 && strcmp(d->relpath, relpath) == 0;
}

static int add_target(struct vfy_report *r, const char *series, const struct ck_ckpt_info *c, const char *relpath)
{
	struct vfy_target *t = realloc(r->targets, (r->ntargets + 1) * sizeof(*t));

	if (!t)
		return -ENOMEM;
	r->targets = t;
	t = &r->targets[r->ntargets++];
	t->series = strdup(series);
	t->ckpt = strdup(c->name);
	t->relpath = strdup(relpath);
	t->step = c->step;
	return t->series && t->ckpt && t->relpath ? 0 : -ENOMEM;
}

/* A checkpoint whose own version of the path was refused at import cannot
 * serve it whatever else is damaged: not a dependent. */
static int own_version_bad(struct ck_store *st, const struct ck_ckpt_info *c, const char *relpath, int *bad)
{
	struct ck_file_info *f;
	size_t n;
	int rc = ck_store_list_files(st, c->id, &f, &n);

	if (rc < 0)
		return rc;
	*bad = 0;
	for (size_t i = 0; i < n; i++)
		if (strcmp(f[i].relpath, relpath) == 0)
			*bad = f[i].kind == CK_FILE_BAD;
	ck_file_info_free(f, n);
	return 0;
}

int verify_targets(struct ck_store *st, struct vfy_report *r)
{
	int rc = 0;

	for (size_t i = 0; i < r->ndmg && rc == 0; i++) {
		const struct vfy_damage *d = &r->dmg[i];
		struct ck_ckpt_info *c;
		int64_t first = d->step;
		size_t n, j;

		for (j = 0; j < i && !same_file_group(&r->dmg[j], d->series, d->relpath); j++)
			;
		if (j < i)
			continue;  /* this series and path are done */
		for (j = i + 1; j < r->ndmg; j++)
			if (same_file_group(&r->dmg[j], d->series, d->relpath) && r->dmg[j].step < first)
				first = r->dmg[j].step;
		rc = ck_store_list_checkpoints(st, d->series, &c, &n);
		if (rc < 0)
			break;
		for (j = 0; j < n && rc == 0; j++) {
			int bad = 0;

			if (c[j].step < first)
				continue;
			rc = own_version_bad(st, &c[j], d->relpath, &bad);
			if (rc == 0 && !bad)
				rc = add_target(r, d->series, &c[j], d->relpath);
		}
		ck_ckpt_info_free(c, n);
	}
	return rc;
}

struct dep_ctx {
	struct vfy_report *r;
	const struct vfy_target *t;
	struct vfy_dependent dep;
};

/* Damage k applies to the target: same file group, not a later step. */
static int applies(const struct vfy_damage *d, const struct vfy_target *t)
{
	return same_file_group(d, t->series, t->relpath) && d->step <= t->step;
}

static int add_source(struct vfy_dependent *dep, size_t k)
{
	size_t *v;

	for (size_t i = 0; i < dep->nsources; i++)
		if (dep->sources[i] == k)
			return 0;
	v = realloc(dep->sources, (dep->nsources + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	dep->sources = v;
	v[dep->nsources++] = k;
	return 0;
}

static int on_tensor(void *ctx, const struct ck_vtensor *vt)
{
	struct dep_ctx *dc = ctx;
	struct vfy_dependent *dep = &dc->dep;

	for (size_t k = 0; k < dc->r->ndmg; k++) {
		const struct vfy_damage *d = &dc->r->dmg[k];
		struct vfy_dep_tensor *v;

		if (!applies(d, dc->t) || !vt->src_path || strcmp(vt->src_path, d->src_path) != 0)
			continue;
		if (d->storage && (vt->nbytes == 0 || vt->src_offset >= d->offset + d->length ||
				   vt->src_offset + vt->nbytes <= d->offset))
			continue;
		v = realloc(dep->tensors, (dep->ntensors + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		dep->tensors = v;
		v[dep->ntensors].name = strdup(vt->name);
		if (!v[dep->ntensors].name)
			return -ENOMEM;
		v[dep->ntensors++].damage = k;
		return add_source(dep, k);
	}
	return 0;
}

/* The composite could not be built: a dependent if a file it needs was
 * changed or removed (damage within ranges never stops a build). */
static int unservable(struct dep_ctx *dc, int err)
{
	for (size_t k = 0; k < dc->r->ndmg; k++) {
		const struct vfy_damage *d = &dc->r->dmg[k];

		if (applies(d, dc->t) && !d->storage && add_source(&dc->dep, k) < 0)
			return -ENOMEM;
	}
	if (!dc->dep.nsources)
		return 0;
	dc->dep.unservable = 1;
	dc->dep.why = strdup(strerror(-err));
	return dc->dep.why ? 0 : -ENOMEM;
}

static int keep_dependent(struct vfy_report *r, struct dep_ctx *dc)
{
	struct vfy_dependent *v = realloc(r->deps, (r->ndeps + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	r->deps = v;
	v = &r->deps[r->ndeps++];
	*v = dc->dep;
	memset(&dc->dep, 0, sizeof(dc->dep));
	v->series = strdup(dc->t->series);
	v->ckpt = strdup(dc->t->ckpt);
	v->relpath = strdup(dc->t->relpath);
	return v->series && v->ckpt && v->relpath ? 0 : -ENOMEM;
}

static void drop_dependent(struct vfy_dependent *dep)
{
	for (size_t i = 0; i < dep->ntensors; i++)
		free(dep->tensors[i].name);
	free(dep->tensors);
	free(dep->sources);
	free(dep->why);
	memset(dep, 0, sizeof(*dep));
}

static int check_target(struct ck_view *v, struct vfy_report *r, const struct vfy_target *t)
{
	struct dep_ctx dc = { .r = r, .t = t };
	const struct ck_vnode *node;
	char *path = vfy_path(t->series, t->ckpt, t->relpath);
	int rc;

	if (!path)
		return -ENOMEM;
	rc = ck_view_resolve(v, path, &node);
	free(path);
	if (rc < 0)
		return rc == -ENOMEM ? rc : 0;   /* not in this checkpoint's namespace */
	rc = ck_view_tensors(v, node, on_tensor, &dc);
	if (rc < 0 && rc != -ENOMEM && rc != -EISDIR) {
		drop_dependent(&dc.dep);
		rc = unservable(&dc, rc);
	}
	if (rc == 0 && (dc.dep.ntensors || dc.dep.unservable))
		rc = keep_dependent(r, &dc);
	drop_dependent(&dc.dep);
	return rc == -EISDIR ? 0 : rc;
}

int verify_deps(const char *store_dir, struct vfy_report *r, struct ck_error *err)
{
	/* Tensors are located, not read: no first-read hashing needed. */
	struct ck_view_opts opts = { .verify = CK_VERIFY_NONE };
	struct ck_view *v;
	int rc;

	if (!r->ntargets)
		return 0;
	rc = ck_view_open(store_dir, &opts, &v, err);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < r->ntargets && rc == 0; i++)
		rc = check_target(v, r, &r->targets[i]);
	ck_view_close(v);
	if (rc < 0 && !err->msg[0])
		ck_fail(err, -rc, "cannot resolve the composites: %s", strerror(-rc));
	return rc;
}
