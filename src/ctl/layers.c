/* layers/ and history/: a checkpoint by layer, and a layer through its
 * series.
 *
 *   layers/SERIES/CKPT/LAYER.safetensors   the layer's weights (model names)
 *                                          and optimizer moments
 *                                          ("optimizer.<param>.<moment>")
 *   layers/SERIES/CKPT/LAYER.json          per tensor: role, dtype, shape,
 *                                          the checkpoint and step that saved
 *                                          it, the step of the save before
 *                                          that one that stored it, and the
 *                                          relative L2 change between the two
 *   history/SERIES/LAYER/CKPT.safetensors  LAYER.safetensors of every
 *                                          checkpoint whose composite has it
 *
 * LAYER.json's size must be known at stat, before any tensor is read: each
 * relative L2 is written in a field of fixed width (jw_fixed: a number as
 * %-13.6e, or null padded with spaces), the document laid out once with
 * every field null, then filled in at the first open.  Layers are those of the store's
 * layer rules (ckptctl layers); optimizer state whose parameters cannot be
 * named is layer "optimizer". */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/json.h"
#include "ckptfs/log.h"
#include "ckptfs/str.h"
#include "ctl_int.h"

#define L2_WIDTH 13
#define READ_CHUNK (1u << 20)

static const char *role_name(enum ck_cat_role r)
{
	return r == CK_CAT_WEIGHT ? "weight" : "optimizer";
}

/* The entries of cat in layer, weights then moments. */
static int layer_picks(const struct ck_catalog *cat, const char *layer, struct st_pick **out, size_t *n)
{
	struct st_pick *p = calloc(cat->nweights + cat->nmoments + 1, sizeof(*p));
	size_t k = 0;

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < cat->nweights; i++)
		if (!strcmp(cat->weights[i].layer, layer)) {
			p[k].name = cat->weights[i].name;
			p[k++].e = &cat->weights[i];
		}
	for (size_t i = 0; i < cat->nmoments; i++)
		if (!strcmp(cat->moments[i].layer, layer)) {
			p[k].name = cat->moments[i].name;
			p[k++].e = &cat->moments[i];
		}
	*out = p;
	*n = k;
	return 0;
}

/* The distinct layer names of cat, sorted (pointers into cat). */
static int catalog_layers(const struct ck_catalog *cat, const char ***out, size_t *n)
{
	const char **v = malloc((cat->nweights + cat->nmoments + 1) * sizeof(*v));
	size_t k = 0, m = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < cat->nweights; i++)
		v[k++] = cat->weights[i].layer;
	for (size_t i = 0; i < cat->nmoments; i++)
		v[k++] = cat->moments[i].layer;
	qsort(v, k, sizeof(*v), ck_strp_cmp);
	for (size_t i = 0; i < k; i++)
		if (!m || strcmp(v[m - 1], v[i]))
			v[m++] = v[i];
	*out = v;
	*n = m;
	return 0;
}

/* --- the files --------------------------------------------------------------------- */

static int layer_label(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step)
{
	const struct ck_catalog *cat = n->ptr;

	(void)c;
	*step = cat->ckpt.step;
	return ck_buf_printf(label, "%s/%s", cat->ckpt.series, cat->ckpt.name);
}

static int layer_st_size(struct ck_ctl *c, struct ctl_node *n, uint64_t *size)
{
	struct st_pick *p;
	size_t np;
	int rc = layer_picks(n->ptr, n->arg[0], &p, &np);

	(void)c;
	if (!rc)
		rc = ctl_safetensors_size(p, np, size);
	free(p);
	return rc;
}

static int layer_st_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	const struct ck_catalog *cat = n->ptr;
	struct st_pick *p;
	size_t np;
	char what[1024];
	int rc = layer_picks(cat, n->arg[0], &p, &np);

	snprintf(what, sizeof(what), "%s/%s: layer %s", cat->ckpt.series, cat->ckpt.name, n->arg[0]);
	if (!rc)
		rc = ctl_safetensors(c->view, p, np, what, out);
	free(p);
	return rc;
}

static int layer_st_sources(struct ck_ctl *c, struct ctl_node *n, struct ctl_srcs *out)
{
	struct st_pick *p;
	size_t np;
	int rc = layer_picks(n->ptr, n->arg[0], &p, &np);

	(void)c;
	if (!rc)
		rc = ctl_picks_sources(p, np, out);
	free(p);
	return rc;
}

static const struct ctl_type layer_st = {
	.kind = "layer",
	.size = layer_st_size,
	.build = layer_st_build,
	.sources = layer_st_sources,
	.ckpt = layer_label,
};

static const struct ctl_type history_st = {
	.kind = "history",
	.size = layer_st_size,
	.build = layer_st_build,
	.sources = layer_st_sources,
	.ckpt = layer_label,
};

/* Where e's previous saved value is: the same tensor in the composite of
 * its file as of the checkpoint before the one that saved e.  0 with *prev
 * (an entry of a cached file index), -ENOENT when there was none. */
static int previous_value(struct ck_ctl *c, const struct ck_cat_tensor *e, const struct ck_cat_tensor **prev)
{
	const struct ck_vnode *pf;
	const struct ck_cat_tensor *hit;
	int rc = ck_view_previous_file(c->view, e->file, e->source, &pf);

	if (rc)
		return rc;
	rc = ctl_file_tensor(c, pf, e->path, &hit);
	if (!rc)
		*prev = hit;
	return rc;
}

/* LAYER.json; with values, the relative L2 of every tensor against its
 * previous saved value (read now), else every such field null, at the
 * same length (jw_fixed). */
static int layer_json(struct ck_ctl *c, const struct ck_catalog *cat, const char *layer, int values,
		      struct ck_buf *out)
{
	struct jw w = { .b = CK_BUF_INIT, .spaced = 1 };
	struct st_pick *p;
	size_t np;
	char label[1024];
	int rc = layer_picks(cat, layer, &p, &np);

	if (rc)
		return rc;
	snprintf(label, sizeof(label), "%s/%s", cat->ckpt.series, cat->ckpt.name);
	jw_begin_obj(&w);
	jw_key(&w, "checkpoint");
	jw_str(&w, label);
	jw_key(&w, "step");
	jw_int(&w, cat->ckpt.step);
	jw_key(&w, "layer");
	jw_str(&w, layer);
	jw_key(&w, "tensors");
	jw_begin_arr(&w);
	for (size_t i = 0; i < np && !rc; i++) {
		const struct ck_cat_tensor *e = p[i].e, *prev = NULL;
		int has_prev = previous_value(c, e, &prev) == 0, known = 0;
		double l2 = 0;

		if (values && has_prev) {
			struct ck_diff_tensor d;

			rc = ck_diff_pair(c->view, prev, e, READ_CHUNK, &d);
			if (rc)
				break;
			known = d.status == CK_DIFF_IDENTICAL || d.measured;
			l2 = d.status == CK_DIFF_IDENTICAL ? 0 : ck_l2_relative(&d.l2);
		}
		jw_begin_obj(&w);
		jw_key(&w, "name");
		jw_str(&w, e->name);
		jw_key(&w, "role");
		jw_str(&w, role_name(e->role));
		jw_key(&w, "dtype");
		jw_str(&w, ck_dtype_safetensors(e->dtype));
		jw_key(&w, "shape");
		jw_begin_arr(&w);
		for (int d = 0; d < e->ndim; d++)
			jw_uint(&w, e->shape[d]);
		jw_end_arr(&w);
		jw_key(&w, "source_checkpoint");
		jw_str(&w, e->src_ckpt);
		jw_key(&w, "source_step");
		jw_int(&w, e->src_step);
		jw_key(&w, "previous_step");
		if (has_prev)
			jw_int(&w, prev->src_step);
		else
			jw_null(&w);
		jw_key(&w, "rel_l2");
		jw_fixed(&w, known, l2, L2_WIDTH);
		jw_end_obj(&w);
	}
	jw_end_arr(&w);
	jw_end_obj(&w);
	if (!rc)
		rc = jw_error(&w);
	if (!rc)
		rc = ck_buf_put(out, w.b.data, w.b.len);
	if (!rc)
		rc = ck_buf_putc(out, '\n');
	jw_free(&w);
	free(p);
	return rc;
}

static int layer_json_size(struct ck_ctl *c, struct ctl_node *n, uint64_t *size)
{
	struct ck_buf b = CK_BUF_INIT;
	int rc = layer_json(c, n->ptr, n->arg[0], 0, &b);

	*size = b.len;
	ck_buf_free(&b);
	return rc;
}

static int layer_json_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	struct ck_buf b = CK_BUF_INIT;
	uint64_t size = 0;
	int rc = layer_json_size(c, n, &size);

	if (!rc)
		rc = layer_json(c, n->ptr, n->arg[0], 1, &b);
	if (!rc && b.len != size) {
		ck_err("%s: LAYER.json changed size when filled in (%zu, %llu bytes)", n->name, b.len,
		       (unsigned long long)size);
		rc = -EIO;
	}
	if (!rc)
		rc = ck_vfile_from_bytes(c->view, "json", b.data, b.len, out);
	ck_buf_free(&b);
	return rc;
}

/* LAYER.json's numbers come from the layer's tensors and their previous
 * saved values. */
static int layer_json_sources(struct ck_ctl *c, struct ctl_node *n, struct ctl_srcs *out)
{
	struct st_pick *p;
	size_t np;
	int rc = layer_picks(n->ptr, n->arg[0], &p, &np);

	if (rc)
		return rc;
	for (size_t i = 0; i < np && !rc; i++) {
		const struct ck_cat_tensor *prev;

		rc = ctl_srcs_add_entry(out, p[i].e);
		if (!rc && previous_value(c, p[i].e, &prev) == 0)
			rc = ctl_srcs_add_entry(out, prev);
	}
	free(p);
	return rc;
}

static const struct ctl_type layer_js = {
	.kind = "layer-json",
	.size = layer_json_size,
	.build = layer_json_build,
	.sources = layer_json_sources,
	.ckpt = layer_label,
};

/* --- layers/ ------------------------------------------------------------------------ */

static int layers_ckpt_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	struct ck_catalog *cat;
	const char **layers;
	size_t n;
	char name[1024];
	int rc = ctl_catalog(c, dir->ptr, 0, &cat);

	if (!rc)
		rc = catalog_layers(cat, &layers, &n);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && !rc; i++) {
		snprintf(name, sizeof(name), "%s.safetensors", layers[i]);
		rc = ctl_spec_add(out, name, NULL, 0, &layer_st, layers[i], NULL, NULL, cat);
		snprintf(name, sizeof(name), "%s.json", layers[i]);
		if (!rc)
			rc = ctl_spec_add(out, name, NULL, 0, &layer_js, layers[i], NULL, NULL, cat);
	}
	free(layers);
	return rc;
}

static int dir_ckpt_label(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step)
{
	struct ck_vckpt ck;

	if (ck_view_checkpoint(c->view, n->ptr, &ck))
		return -ENODATA;
	*step = ck.step;
	return ck_buf_printf(label, "%s/%s", ck.series, ck.name);
}

static const struct ctl_type layers_ckpt = {
	.kind = "layers",
	.list = layers_ckpt_list,
	.ckpt = dir_ckpt_label,
};

static int layers_series_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	return ctl_list_checkpoints(c, dir->arg[0], &layers_ckpt, out);
}

static const struct ctl_type layers_series = {
	.kind = "layers",
	.list = layers_series_list,
	.stamp = ctl_namespace_stamp,
};

static int layers_root_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	(void)dir;
	return ctl_list_series(c, &layers_series, out);
}

const struct ctl_type ctl_layers_root = {
	.kind = "layers",
	.list = layers_root_list,
	.stamp = ctl_namespace_stamp,
};

/* --- history/ ----------------------------------------------------------------------- */

static int history_layer_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	struct ck_vckpt *ck = NULL;
	size_t n = 0;
	char name[1024];
	int rc = ck_view_series_checkpoints(c->view, dir->arg[0], &ck, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ck_catalog *cat;
		const char **layers;
		size_t nl, k;

		if (ctl_catalog(c, ck[i].node, 0, &cat))
			continue;   /* a checkpoint that cannot be read has none of its layers */
		rc = catalog_layers(cat, &layers, &nl);
		if (rc)
			break;
		for (k = 0; k < nl && strcmp(layers[k], dir->arg[1]); k++)
			;
		if (k < nl) {
			snprintf(name, sizeof(name), "%s.safetensors", ck[i].name);
			rc = ctl_spec_add(out, name, NULL, 0, &history_st, dir->arg[1], NULL, NULL, cat);
		}
		free(layers);
	}
	free(ck);
	return rc;
}

static const struct ctl_type history_layer = {
	.kind = "history",
	.list = history_layer_list,
	.stamp = ctl_namespace_stamp,
};

static int history_series_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	struct ck_vckpt *ck = NULL;
	const char **all = NULL;
	size_t n = 0, nall = 0, cap = 0;
	int rc = ck_view_series_checkpoints(c->view, dir->arg[0], &ck, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ck_catalog *cat;
		const char **layers;
		size_t nl;

		if (ctl_catalog(c, ck[i].node, 0, &cat))
			continue;
		rc = catalog_layers(cat, &layers, &nl);
		if (rc)
			break;
		for (size_t k = 0; !rc && k < nl; k++) {
			if (nall == cap) {
				const char **p = ck_grow(all, &cap, sizeof(*p), 64);

				if (!p) {
					rc = -ENOMEM;
					break;
				}
				all = p;
			}
			all[nall++] = layers[k];
		}
		free(layers);
	}
	if (!rc && nall)
		qsort(all, nall, sizeof(*all), ck_strp_cmp);
	for (size_t i = 0; i < nall && !rc; i++)
		if (!i || strcmp(all[i - 1], all[i]))
			rc = ctl_spec_add(out, all[i], NULL, 1, &history_layer, dir->arg[0], all[i], NULL, NULL);
	free(all);
	free(ck);
	return rc;
}

static const struct ctl_type history_series = {
	.kind = "history",
	.list = history_series_list,
	.stamp = ctl_namespace_stamp,
};

static int history_root_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	(void)dir;
	return ctl_list_series(c, &history_series, out);
}

const struct ctl_type ctl_history_root = {
	.kind = "history",
	.list = history_root_list,
	.stamp = ctl_namespace_stamp,
};
