/* Files built from composites' tensors (include/ckptfs/view.h, "Checkpoints,
 * and files built from composites' tensors"): the control directory's
 * weights, layer and recipe files.  A built file is a struct ck_vfile like
 * a composite, so reads, verification and packed versions work the same;
 * only its extents are chosen by the caller instead of by a merge. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "view_internal.h"

int ck_view_checkpoint(struct ck_view *v, const struct ck_vnode *n, struct ck_vckpt *out)
{
	(void)v;
	if (!n || !n->ckpt || n->ckpt->node != n)
		return -ENOENT;
	out->series = n->ckpt->series->name;
	out->name = n->ckpt->info.name;
	out->step = n->ckpt->info.step;
	out->is_file = n->ckpt->info.is_file;
	out->node = n;
	return 0;
}

int ck_view_series_checkpoints(struct ck_view *v, const char *series, struct ck_vckpt **out, size_t *n)
{
	struct view_series *s = NULL;
	struct ck_vckpt *c = NULL;
	size_t k = 0;
	int rc = 0;

	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; i < v->nseries && !s; i++)
		if (!strcmp(v->series[i]->name, series))
			s = v->series[i];
	if (!s) {
		rc = -ENOENT;
		goto out;
	}
	c = calloc(s->nckpts + 1, sizeof(*c));
	if (!c) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < s->nckpts; i++) {
		struct view_ckpt *ck = s->ckpts[i];

		if (ck->info.deleted || !ck->node)
			continue;
		ck_view_checkpoint(v, ck->node, &c[k++]);
	}
out:
	pthread_rwlock_unlock(&v->ns_lock);
	*out = c;
	*n = k;
	return rc;
}

const char *ck_vnode_relpath(const struct ck_vnode *n)
{
	return n->is_dir ? NULL : n->relpath;
}

int ck_view_previous_file(struct ck_view *v, const struct ck_vnode *n, const struct ck_vsource *src,
			  const struct ck_vnode **prev)
{
	const struct phys_file *pf = (const struct phys_file *)src;
	const struct view_ckpt *ck = pf->ckpt, *before;
	const struct ck_vnode *d;
	const char *p;
	int rc = -ENOENT;

	if (n->is_dir || ck->index == 0)
		return -ENOENT;
	pthread_rwlock_rdlock(&v->ns_lock);
	before = ck->series->ckpts[ck->index - 1];
	d = before->node;
	/* The path of n (not src's: a DCP .metadata's tensors are in data
	 * files), one name at a time, from the earlier checkpoint's node (a
	 * deleted checkpoint's node is out of its series directory, whole). */
	for (p = n->relpath ? n->relpath : ""; d && *p;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);
		const struct ck_vnode *next = NULL;

		for (size_t i = 0; d->is_dir && i < d->nchildren && !next; i++)
			if (!strncmp(d->children[i]->name, p, len) && !d->children[i]->name[len])
				next = d->children[i];
		d = next;
		p += len + (slash ? 1 : 0);
	}
	if (d && !d->is_dir && d->nversions) {
		*prev = d;
		rc = 0;
	}
	pthread_rwlock_unlock(&v->ns_lock);
	return rc;
}

int ck_view_file_tree(struct ck_view *v, const struct ck_vnode *cn, const struct pk_node **root)
{
	struct ck_vnode *n = (struct ck_vnode *)cn;
	struct ck_vfile *f;
	int rc;

	if (n->is_dir || !n->nversions || n->versions[0].pf->info.kind != CK_FILE_TORCH)
		return -EINVAL;
	rc = view_node_vfile(v, n, &f);
	if (rc)
		return rc;
	/* The node caches its composite for the life of the view: the tree
	 * outlives this reference. */
	*root = f->tree;
	ck_vfile_put(f);
	return *root ? 0 : -EINVAL;
}

/* First range of pf ending after off (ranges are sorted and disjoint). */
static size_t first_range_after(const struct phys_file *pf, uint64_t off)
{
	size_t lo = 0, hi = pf->nranges;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pf->ranges[mid].offset + pf->ranges[mid].length <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int ck_vsource_read(struct ck_view *v, struct ck_vsource *src, void *buf, size_t len, uint64_t off)
{
	struct phys_file *pf = (struct phys_file *)src;
	struct ck_vpacked *packed = NULL;
	int rc;

	if (len > pf->info.size || off > pf->info.size - len)
		return -EIO;
	rc = packed_get(v, pf, &packed);
	if (rc < 0)
		return rc;
	if (packed)
		return packed_read(packed, buf, len, off, 1);
	rc = phys_open_fd(v, pf);
	if (!rc && v->opts.verify != CK_VERIFY_NONE)
		rc = phys_load_ranges(v, pf);
	if (rc)
		return -EIO;
	for (size_t i = first_range_after(pf, off); v->opts.verify != CK_VERIFY_NONE && i < pf->nranges; i++) {
		struct phys_range *r = &pf->ranges[i];

		if (r->offset >= off + len)
			break;
		if (r->length && atomic_load(&r->state) != RANGE_GOOD && phys_verify_range(v, pf, r))
			return -EIO;
	}
	rc = ck_pread_full(pf->fd, buf, len, off);
	if (rc)
		ck_err("%s: read of %zu bytes at %llu failed: %s", pf->info.src_path, len, (unsigned long long)off,
		       strerror(-rc));
	return rc ? -EIO : 0;
}

int ck_vfile_new(struct ck_view *v, const char *kind, struct ck_vfile **out)
{
	struct ck_vfile *f = vfile_new(kind);

	if (!f)
		return -ENOMEM;
	f->view = v;
	f->synthesized = 1;
	*out = f;
	return 0;
}

int ck_vfile_append_bytes(struct ck_vfile *f, const void *p, size_t len)
{
	return vfile_add_mem(f, p, len);
}

/* Ready to serve extents of pf: open (or packed) with its hashed ranges. */
static int source_ready(struct ck_view *v, struct phys_file *pf)
{
	int rc = phys_open_fd(v, pf);

	if (!rc && v->opts.verify != CK_VERIFY_NONE)
		rc = phys_load_ranges(v, pf);
	return rc;
}

int ck_vfile_append_extent(struct ck_vfile *f, struct ck_vsource *src, uint64_t off, uint64_t len)
{
	struct phys_file *pf = (struct phys_file *)src;
	int rc;

	if (!pf)
		return -EINVAL;
	rc = source_ready(f->view, pf);
	return rc ? rc : vfile_add_phys(f, pf, off, len);
}

int ck_vfile_note_tensor(struct ck_vfile *f, const struct ck_vtensor *t, const char *name)
{
	int rc;

	if (!t->source)
		return -EINVAL;
	rc = vfile_add_tensor(f, name, t->dtype, t->ndim, t->shape, (struct phys_file *)t->source, t->src_offset,
			      t->nbytes);
	if (!rc)
		vfile_tensor_origin(f, t->node, t->contiguous);
	return rc;
}

int ck_vfile_append_tensor(struct ck_vfile *f, const struct ck_vtensor *t, const char *name)
{
	int rc;

	if (!t->contiguous)
		return -EINVAL;
	rc = ck_vfile_append_extent(f, t->source, t->src_offset, t->nbytes);
	return rc ? rc : ck_vfile_note_tensor(f, t, name);
}

int ck_vfile_append_file(struct ck_vfile *f, const struct ck_vfile *src)
{
	int rc = 0;

	for (size_t i = 0; i < src->next && !rc; i++) {
		const struct vext *e = &src->ext[i];

		rc = e->pf ? vfile_add_phys(f, e->pf, e->pf_off, e->len) : vfile_add_mem(f, e->mem, e->len);
	}
	for (size_t i = 0; i < src->ntensors && !rc; i++) {
		const struct vtensor_src *t = &src->tensors[i];

		rc = vfile_add_tensor(f, t->name, t->dtype, t->ndim, t->shape, t->pf, t->offset, t->nbytes);
		if (!rc)
			vfile_tensor_origin(f, t->node, t->contiguous);
	}
	return rc;
}

int ck_vfile_seal(struct ck_vfile *f)
{
	f->own_order = 1;
	return vfile_freeze(f);
}

int ck_view_compose_torch(struct ck_view *v, const struct ck_vnode *layout, const struct pk_node *root,
			  const char *what, struct ck_vfile **out)
{
	struct ck_vfile *f;
	const struct pk_node *tree;
	int rc;

	/* The layout's composite is built, so its newest version is parsed. */
	rc = ck_view_file_tree(v, layout, &tree);
	if (rc)
		return rc;
	rc = ck_vfile_new(v, "torch", &f);
	if (rc)
		return rc;
	pthread_mutex_lock(&v->build_lock);
	rc = composite_torch_file(what, layout->versions[0].pf, root, f);
	pthread_mutex_unlock(&v->build_lock);
	if (!rc)
		rc = vfile_freeze(f);
	if (rc) {
		vfile_free(f);
		return rc == -ENOMEM || rc == -EINVAL ? rc : -EIO;
	}
	*out = f;
	return 0;
}

int ck_vfile_from_bytes(struct ck_view *v, const char *kind, const void *p, size_t len, struct ck_vfile **out)
{
	struct ck_vfile *f;
	int rc = ck_vfile_new(v, kind, &f);

	if (rc)
		return rc;
	rc = ck_vfile_append_bytes(f, p, len);
	if (!rc)
		rc = ck_vfile_seal(f);
	if (rc)
		ck_vfile_put(f);
	else
		*out = f;
	return rc;
}

int ck_vfile_check(struct ck_vfile *f)
{
	for (size_t i = 0; i < f->nsrcs; i++)
		if (phys_check(f->view, f->srcs[i]))
			return -EIO;
	return 0;
}
