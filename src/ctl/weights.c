/* weights/: each checkpoint as an evaluation tool loads a model: its side
 * files (config.json, tokenizer...) and its model weights as safetensors,
 * one file or shards with an index above the shard size, whatever format
 * the checkpoint saved them in.  Optimizer state never appears here.
 *
 *   weights/                    series, and @recipes
 *   weights/SERIES/             checkpoints
 *   weights/SERIES/CKPT/        side files, model.safetensors or
 *                               model-0000i-of-0000N.safetensors +
 *                               model.safetensors.index.json
 *   weights/@recipes/NAME/      the same for a recipe
 *
 * Shards are filled in the state dict's order and a new one starts when the
 * next tensor would take the current one past the shard size (a tensor
 * larger than that gets a shard of its own), as transformers'
 * save_pretrained splits.  The index is written as transformers writes it
 * (sorted keys, two-space indent). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/log.h"
#include "ckptfs/safetensors.h"
#include "ctl_int.h"

#define RECIPES_DIR "@recipes"

/* --- safetensors of chosen tensors ------------------------------------------ */

static int pick_cmp(const void *a, const void *b)
{
	return strcmp(((const struct st_pick *)a)->name, ((const struct st_pick *)b)->name);
}

static const struct st_meta format_pt = { "format", "pt" };

/* The header (st_layout's) of picks; tensors[] in file order after it. */
static int layout(const struct st_pick *p, size_t n, struct st_tensor **tensors, struct ck_buf *hdr,
		  struct ck_error *err)
{
	struct st_tensor *t = calloc(n + 1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		t[i].name = (char *)p[i].name;
		t[i].dtype = p[i].e->dtype;
		t[i].ndim = p[i].e->ndim;
		memcpy(t[i].shape, p[i].e->shape, sizeof(t[i].shape));
	}
	rc = st_layout(t, n, &format_pt, 1, hdr, err);
	if (rc) {
		free(t);
		return rc;
	}
	*tensors = t;
	return 0;
}

int ctl_safetensors_size(const struct st_pick *p, size_t n, uint64_t *size)
{
	struct ck_buf hdr = CK_BUF_INIT;
	struct st_tensor *t = NULL;
	struct ck_error err = { "" };
	int rc = layout(p, n, &t, &hdr, &err);

	if (!rc)
		*size = hdr.len + (n ? t[n - 1].end : 0);
	free(t);
	ck_buf_free(&hdr);
	return rc;
}

/* A tensor stored in pieces (include/ckptfs/catalog.h): each piece one
 * extent, each item recorded as "NAME[slice]" with its own shape. */
static int append_pieces(struct ck_vfile *f, const struct ck_cat_tensor *e, struct ck_vtensor *vt, const char *name)
{
	int rc = 0;

	for (size_t i = 0; i < e->npieces && !rc; i++) {
		const struct ck_cat_piece *p = &e->pieces[i];
		const char *slice;
		char label[1024];

		rc = ck_vfile_append_extent(f, p->source, p->offset, p->nbytes);
		if (rc || !p->item)
			continue;
		slice = strrchr(p->item->name, '[');
		snprintf(label, sizeof(label), "%s%s", name, slice ? slice : "");
		vt->shape = p->item->shape;
		vt->source = p->source;
		vt->src_offset = p->offset;
		vt->nbytes = p->item->nbytes;
		rc = ck_vfile_note_tensor(f, vt, label);
	}
	return rc;
}

int ctl_safetensors(struct ck_view *v, const struct st_pick *p, size_t n, const char *what, struct ck_vfile **out)
{
	struct ck_buf hdr = CK_BUF_INIT;
	struct st_tensor *t = NULL;
	struct st_pick *sorted = NULL;
	struct ck_error err = { "" };
	struct ck_vfile *f = NULL;
	int rc;

	for (size_t i = 0; i < n; i++)
		if (!p[i].e->contiguous) {
			ck_err("%s: tensor '%s' is not contiguous in its file (%s): it cannot be served without a copy",
			       what, p[i].name, p[i].e->src_ckpt);
			return -EINVAL;
		}
	rc = layout(p, n, &t, &hdr, &err);
	if (rc) {
		ck_err("%s: %s", what, ck_error_text(&err, rc));
		goto out;
	}
	sorted = malloc((n + 1) * sizeof(*sorted));
	rc = sorted ? ck_vfile_new(v, "safetensors", &f) : -ENOMEM;
	if (rc)
		goto out;
	memcpy(sorted, p, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), pick_cmp);
	rc = ck_vfile_append_bytes(f, hdr.data, hdr.len);
	for (size_t i = 0; i < n && !rc; i++) {
		struct st_pick key = { t[i].name, NULL }, *hit = bsearch(&key, sorted, n, sizeof(*sorted), pick_cmp);
		struct ck_vtensor vt;

		cat_vtensor(hit->e, &vt);
		if (hit->e->npieces)
			rc = append_pieces(f, hit->e, &vt, hit->name);
		else
			rc = ck_vfile_append_tensor(f, &vt, hit->name);
	}
	if (!rc)
		rc = ck_vfile_seal(f);
out:
	if (rc)
		ck_vfile_put(f);
	else
		*out = f;
	free(sorted);
	free(t);
	ck_buf_free(&hdr);
	return rc;
}

int ctl_picks_sources(const struct st_pick *p, size_t n, struct ctl_srcs *out)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++)
		rc = ctl_srcs_add_entry(out, p[i].e);
	return rc;
}

/* --- shards ---------------------------------------------------------------------- */

/* shard[i] (from 0) of each weight of cat; the number of shards. */
static int shard_plan(const struct ck_catalog *cat, uint64_t max, size_t **shard, size_t *nshards)
{
	size_t *s = calloc(cat->nweights + 1, sizeof(*s)), k = 0;
	uint64_t used = 0;

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < cat->nweights; i++) {
		uint64_t b = cat->weights[i].nbytes;

		if (used && used + b > max) {
			k++;
			used = 0;
		}
		s[i] = k;
		used += b;
	}
	*shard = s;
	*nshards = cat->nweights ? k + 1 : 1;
	return 0;
}

static void shard_name(char *out, size_t size, size_t i, size_t n)
{
	if (n <= 1)
		snprintf(out, size, "model.safetensors");
	else
		snprintf(out, size, "model-%05zu-of-%05zu.safetensors", i + 1, n);
}

/* The picks of shard k (all weights when there is one shard). */
static int shard_picks(struct ck_ctl *c, const struct ck_catalog *cat, size_t k, struct st_pick **out, size_t *n)
{
	size_t *plan, nshards, m = 0;
	struct st_pick *p;
	int rc = shard_plan(cat, c->opts.shard_bytes, &plan, &nshards);

	if (rc)
		return rc;
	p = calloc(cat->nweights + 1, sizeof(*p));
	if (!p) {
		free(plan);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cat->nweights; i++)
		if (plan[i] == k) {
			p[m].name = cat->weights[i].name;
			p[m++].e = &cat->weights[i];
		}
	free(plan);
	*out = p;
	*n = m;
	return 0;
}

/* Node arguments of a weights file: arg[0] the shard (from 0) */
static int model_size(struct ck_ctl *c, struct ctl_node *n, uint64_t *size)
{
	const struct ck_catalog *cat = n->ptr;
	struct st_pick *p;
	size_t np;
	int rc = shard_picks(c, cat, strtoul(n->arg[0], NULL, 10), &p, &np);

	if (!rc)
		rc = ctl_safetensors_size(p, np, size);
	free(p);
	return rc;
}

static int weights_label(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step)
{
	const struct ck_catalog *cat = n->ptr;

	(void)c;
	if (!cat)
		return -ENODATA;
	*step = cat->ckpt.series ? cat->ckpt.step : -1;
	if (cat->ckpt.series)
		return ck_buf_printf(label, "%s/%s", cat->ckpt.series, cat->ckpt.name);
	return ck_buf_printf(label, "recipe %s", cat->ckpt.name);
}

static int model_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	const struct ck_catalog *cat = n->ptr;
	struct ck_buf what = CK_BUF_INIT;
	struct st_pick *p;
	size_t np;
	int rc = shard_picks(c, cat, strtoul(n->arg[0], NULL, 10), &p, &np);

	weights_label(c, n, &what, &(int64_t){ 0 });
	ck_buf_printf(&what, ": %s", n->name);
	ck_buf_putc(&what, 0);
	if (!rc)
		rc = ctl_safetensors(c->view, p, np, what.data ? (const char *)what.data : n->name, out);
	free(p);
	ck_buf_free(&what);
	return rc;
}

static int model_sources(struct ck_ctl *c, struct ctl_node *n, struct ctl_srcs *out)
{
	struct st_pick *p;
	size_t np;
	int rc = shard_picks(c, n->ptr, strtoul(n->arg[0], NULL, 10), &p, &np);

	if (!rc)
		rc = ctl_picks_sources(p, np, out);
	free(p);
	return rc;
}

static const struct ctl_type weights_model = {
	.kind = "weights",
	.size = model_size,
	.build = model_build,
	.sources = model_sources,
	.ckpt = weights_label,
};

static int index_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	const struct ck_catalog *cat = n->ptr;
	struct st_index idx = { 0 };
	struct ck_buf text = CK_BUF_INIT;
	size_t *plan, nshards;
	char name[64];
	int rc = shard_plan(cat, c->opts.shard_bytes, &plan, &nshards);

	if (rc)
		return rc;
	idx.has_metadata = 1;
	idx.has_total_size = 1;
	idx.weights = calloc(cat->nweights + 1, sizeof(*idx.weights));
	if (!idx.weights) {
		free(plan);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cat->nweights && !rc; i++) {
		shard_name(name, sizeof(name), plan[i], nshards);
		idx.total_size += cat->weights[i].nbytes;
		idx.weights[i].name = strdup(cat->weights[i].name);
		idx.weights[i].file = strdup(name);
		idx.n++;
		if (!idx.weights[i].name || !idx.weights[i].file)
			rc = -ENOMEM;
	}
	if (!rc)
		rc = st_index_write(&idx, &text);
	if (!rc)
		rc = ck_vfile_from_bytes(c->view, "json", text.data, text.len, out);
	st_index_free(&idx);
	ck_buf_free(&text);
	free(plan);
	return rc;
}

/* The index names every weight: it shows as the weights do. */
static int index_sources(struct ck_ctl *c, struct ctl_node *n, struct ctl_srcs *out)
{
	const struct ck_catalog *cat = n->ptr;
	int rc = 0;

	(void)c;
	for (size_t i = 0; i < cat->nweights && !rc; i++)
		rc = ctl_srcs_add_entry(out, &cat->weights[i]);
	return rc;
}

static const struct ctl_type weights_index = {
	.kind = "weights",
	.build = index_build,
	.sources = index_sources,
	.ckpt = weights_label,
};

/* A side file: the checkpoint's composite of it, as it is. */
static int side_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	const struct ck_catalog *cat = n->ptr;

	for (size_t i = 0; i < cat->nside; i++)
		if (!strcmp(cat->side_names[i], n->arg[0]))
			return ck_view_open_file(c->view, cat->side_files[i], out);
	return -ENOENT;
}

static const struct ctl_type weights_side = {
	.kind = "weights",
	.build = side_build,
	.ckpt = weights_label,
};

int weights_list(struct ck_ctl *c, const struct ck_catalog *cat, struct ctl_specs *out)
{
	size_t *plan, nshards;
	char name[64], num[32];
	int rc;

	for (size_t i = 0; i < cat->nside; i++) {
		rc = ctl_spec_add(out, cat->side_names[i], NULL, 0, &weights_side, cat->side_names[i], NULL, NULL,
				  (void *)cat);
		if (rc)
			return rc;
	}
	if (!cat->nweights)
		return 0;
	rc = shard_plan(cat, c->opts.shard_bytes, &plan, &nshards);
	for (size_t k = 0; k < nshards && !rc; k++) {
		shard_name(name, sizeof(name), k, nshards);
		snprintf(num, sizeof(num), "%zu", k);
		rc = ctl_spec_add(out, name, NULL, 0, &weights_model, num, NULL, NULL, (void *)cat);
	}
	if (!rc && nshards > 1)
		rc = ctl_spec_add(out, "model.safetensors.index.json", NULL, 0, &weights_index, NULL, NULL, NULL,
				  (void *)cat);
	free(plan);
	return rc;
}

/* --- the directories --------------------------------------------------------------- */

uint64_t ctl_namespace_stamp(struct ck_ctl *c, struct ctl_node *dir)
{
	(void)dir;
	return ck_view_namespace_changes(c->view);
}

static int ckpt_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	struct ck_catalog *cat;
	int rc = ctl_catalog(c, dir->ptr, CK_CAT_WEIGHTS, &cat);

	if (rc) {
		ck_err("%s/%s: no weights view: %s", dir->arg[0], dir->arg[1], strerror(-rc));
		return rc;
	}
	return weights_list(c, cat, out);
}

static int ckpt_label(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step)
{
	struct ck_vckpt ck;

	if (ck_view_checkpoint(c->view, n->ptr, &ck))
		return -ENODATA;
	*step = ck.step;
	return ck_buf_printf(label, "%s/%s", ck.series, ck.name);
}

static const struct ctl_type weights_ckpt = {
	.kind = "weights",
	.list = ckpt_list,
	.ckpt = ckpt_label,
};

/* The checkpoints of series arg[0] as directories of type t. */
int ctl_list_checkpoints(struct ck_ctl *c, const char *series, const struct ctl_type *t, struct ctl_specs *out)
{
	struct ck_vckpt *ck = NULL;
	size_t n = 0;
	int rc = ck_view_series_checkpoints(c->view, series, &ck, &n);

	for (size_t i = 0; i < n && !rc; i++)
	{
		rc = ctl_spec_add(out, ck[i].name, NULL, 1, t, series, ck[i].name, NULL, (void *)ck[i].node);
		ctl_spec_anchor(out, ck[i].node);
	}
	free(ck);
	return rc;
}

static int series_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	return ctl_list_checkpoints(c, dir->arg[0], &weights_ckpt, out);
}

static const struct ctl_type weights_series = {
	.kind = "weights",
	.list = series_list,
	.stamp = ctl_namespace_stamp,
};

int ctl_list_series(struct ck_ctl *c, const struct ctl_type *t, struct ctl_specs *out)
{
	const struct ck_vnode *root = ck_view_root(c->view), **kids = NULL;
	size_t n = 0;
	uint64_t changes;
	int rc = ck_view_children(c->view, root, &kids, &n, &changes);

	for (size_t i = 0; i < n && !rc; i++)
		if (ck_vnode_is_series_dir(c->view, kids[i])) {
			rc = ctl_spec_add(out, ck_vnode_name(kids[i]), NULL, 1, t, ck_vnode_name(kids[i]), NULL, NULL,
					  NULL);
			ctl_spec_anchor(out, kids[i]);
		}
	free(kids);
	return rc;
}

static int recipe_dir_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	struct ck_catalog *cat;
	int rc = recipe_weights_catalog(c, dir->arg[0], dir->key, &cat);

	return rc ? rc : weights_list(c, cat, out);
}

static int recipe_dir_label(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step)
{
	(void)c;
	*step = -1;
	return ck_buf_printf(label, "recipe %s", n->arg[0]);
}

const struct ctl_type ctl_recipe_weights_dir = {
	.kind = "weights",
	.renamable = 1,
	.list = recipe_dir_list,
	.ckpt = recipe_dir_label,
};

static int recipes_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	(void)dir;
	return recipes_list_names(c, out, &ctl_recipe_weights_dir);
}

static const struct ctl_type weights_recipes = {
	.kind = "weights",
	.list = recipes_list,
	.stamp = ctl_recipes_stamp,
};

static int root_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	int rc = ctl_spec_add(out, RECIPES_DIR, NULL, 1, &weights_recipes, NULL, NULL, NULL, NULL);

	(void)dir;
	if (!rc)
		rc = ctl_list_series(c, &weights_series, out);
	/* The recipes come first: a series of that name is not shown here
	 * (the listing keeps the first of two equal names). */
	for (size_t i = 1; !rc && i < out->n; i++)
		if (!strcmp(out->v[i].name, RECIPES_DIR))
			ck_warn("weights/: series '%s' is not shown: the name is taken by the recipes", RECIPES_DIR);
	return rc;
}

const struct ctl_type ctl_weights_root = {
	.kind = "weights",
	.list = root_list,
	.stamp = ctl_namespace_stamp,
};
