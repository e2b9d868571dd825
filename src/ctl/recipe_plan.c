/* Checking a recipe against the store and planning its checkpoint
 * (include/ckptfs/recipe.h, ck_recipe_check).
 *
 * The base checkpoint (base_model, or the last slice's model) gives the
 * output its architecture: its tensor names, order, dtypes and shapes,
 * its files and their layout, its param_groups, scheduler and config.
 * Each output tensor then has one source:
 *   - in block K: the slice that selects output block K, from its model's
 *     block J (the name renumbered from K to J);
 *   - outside the blocks: the pre/post weight naming it, else the base.
 * Its optimizer moments come from the same checkpoint as its weights. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/log.h"
#include "ctl_int.h"

struct planner {
	struct ck_view *v;
	const struct ck_recipe *r;
	const struct ck_catalog_source *cats;
	unsigned *line;
	struct ck_error *err;
	struct ck_recipe_plan *plan;
	/* output block k -> slice and source block */
	size_t *blk_slice;
	long *blk_src;
	const struct ck_catalog **slice_cat;
	const struct ck_catalog **weight_cat;
};

static int refuse(struct planner *p, unsigned line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(struct planner *p, unsigned line, const char *fmt, ...)
{
	va_list ap;

	*p->line = line;
	if (p->err) {
		va_start(ap, fmt);
		vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

static int resolve(struct planner *p, const struct ck_recipe_ref *ref, const struct ck_catalog **out)
{
	struct ck_vckpt *ck = NULL;
	struct ck_catalog *cat;
	size_t n = 0;
	int rc = ck_view_series_checkpoints(p->v, ref->series, &ck, &n), found = -1;

	if (rc == -ENOENT)
		return refuse(p, ref->line, "unknown checkpoint '%s/%s': the store has no series '%s'", ref->series,
			      ref->ckpt, ref->series);
	if (rc)
		return rc;
	for (size_t i = 0; i < n && found < 0; i++)
		if (!strcmp(ck[i].name, ref->ckpt))
			found = (int)i;
	if (found < 0) {
		free(ck);
		return refuse(p, ref->line, "unknown checkpoint '%s/%s': series '%s' has no checkpoint '%s'",
			      ref->series, ref->ckpt, ref->series, ref->ckpt);
	}
	rc = p->cats->get(p->cats->ctx, ck[found].node, &cat);
	free(ck);
	if (rc)
		return refuse(p, ref->line, "checkpoint '%s/%s' cannot be read: %s", ref->series, ref->ckpt,
			      strerror(-rc));
	*out = cat;
	return 0;
}

static const char *type_text(const struct ck_cat_tensor *t, char *buf, size_t size)
{
	size_t at = (size_t)snprintf(buf, size, "%s [", ck_dtype_name(t->dtype));

	for (int d = 0; d < t->ndim && at < size; d++)
		at += (size_t)snprintf(buf + at, size - at, d ? ", %llu" : "%llu", (unsigned long long)t->shape[d]);
	if (at < size)
		snprintf(buf + at, size - at, "]");
	return buf;
}

static int same_type(const struct ck_cat_tensor *a, const struct ck_cat_tensor *b)
{
	return a->dtype == b->dtype && a->ndim == b->ndim &&
	       !memcmp(a->shape, b->shape, (size_t)(a->ndim > 0 ? a->ndim : 0) * sizeof(a->shape[0]));
}

static const char *ref_text(const struct ck_catalog *c, char *buf, size_t size)
{
	snprintf(buf, size, "%s/%s", c->ckpt.series, c->ckpt.name);
	return buf;
}

/* The slices: ranges inside their models, stacking to the base's blocks
 * exactly once each. */
static int plan_blocks(struct planner *p)
{
	const struct ck_recipe *r = p->r;
	const struct ck_catalog *base = p->plan->base;
	size_t nb = base->nblocks, k = 0;
	char name[600];
	int rc = 0;

	if (!nb)
		return refuse(p, r->base.line, "the base '%s' has no numbered blocks (layers.N) to take slices of",
			      ref_text(base, name, sizeof(name)));
	p->blk_slice = calloc(nb, sizeof(*p->blk_slice));
	p->blk_src = calloc(nb, sizeof(*p->blk_src));
	p->slice_cat = calloc(r->nslices, sizeof(*p->slice_cat));
	if (!p->blk_slice || !p->blk_src || !p->slice_cat)
		return -ENOMEM;
	for (size_t s = 0; s < r->nslices && !rc; s++) {
		const struct ck_recipe_slice *sl = &r->slices[s];

		rc = resolve(p, &sl->model, &p->slice_cat[s]);
		if (rc)
			return rc;
		if (sl->start < 0 || sl->end <= sl->start || (uint64_t)sl->end > p->slice_cat[s]->nblocks)
			return refuse(p, sl->line, "layer_range [%lld, %lld] out of range: %s has blocks 0 to %zu",
				      (long long)sl->start, (long long)sl->end,
				      ref_text(p->slice_cat[s], name, sizeof(name)), p->slice_cat[s]->nblocks - 1);
		/* Overlap: a block index another slice takes too. */
		for (size_t o = 0; o < s; o++) {
			const struct ck_recipe_slice *ol = &r->slices[o];

			if (sl->start < ol->end && ol->start < sl->end)
				return refuse(p, sl->line,
					      "layer_range [%lld, %lld] overlaps [%lld, %lld] (line %u): block %lld would "
					      "be taken twice",
					      (long long)sl->start, (long long)sl->end, (long long)ol->start,
					      (long long)ol->end, ol->line,
					      (long long)(sl->start > ol->start ? sl->start : ol->start));
		}
		for (int64_t j = sl->start; j < sl->end; j++, k++) {
			if (k >= nb)
				return refuse(p, sl->line,
					      "the slices take more blocks than the base '%s' has (%zu): its optimizer "
					      "state and config describe %zu",
					      ref_text(base, name, sizeof(name)), nb, nb);
			p->blk_slice[k] = s;
			p->blk_src[k] = (long)j;
		}
	}
	if (k < nb) {
		/* Missing: the lowest block index no slice takes. */
		int64_t miss = 0;

		for (int again = 1; again;) {
			again = 0;
			for (size_t s = 0; s < r->nslices; s++)
				if (r->slices[s].start <= miss && miss < r->slices[s].end) {
					miss = r->slices[s].end;
					again = 1;
				}
		}
		return refuse(p, r->slices_line, "missing layers: no slice takes block %lld (the base '%s' has %zu)",
			      (long long)miss, ref_text(base, name, sizeof(name)), nb);
	}
	return 0;
}

/* The source of output tensor (or parameter) name of layer: catalog, name
 * there, and the recipe line that chose it (0: the base by default). */
static int source_of(struct planner *p, const char *name, const char *layer, const struct ck_catalog **cat,
		     char *src, size_t size, unsigned *line)
{
	long blk = ck_layer_block(layer);

	if (blk >= 0 && (size_t)blk < p->plan->base->nblocks) {
		size_t s = p->blk_slice[blk];

		*cat = p->slice_cat[s];
		*line = p->r->slices[s].line;
		if (ck_block_rename(name, blk, p->blk_src[blk], src, size))
			return refuse(p, *line, "'%s' is in block %ld but its name has no such block number", name, blk);
		return 0;
	}
	for (size_t i = 0; i < p->r->nweights; i++)
		if (!strcmp(p->r->weights[i].name, name)) {
			*cat = p->weight_cat[i];
			*line = p->r->weights[i].line;
			snprintf(src, size, "%s", name);
			return 0;
		}
	*cat = p->plan->base;
	*line = p->r->base.line;
	snprintf(src, size, "%s", name);
	return 0;
}

static int plan_weights_list(struct planner *p, const struct ck_cat_tensor *out, size_t n, int torch,
			     struct plan_weight **res)
{
	struct plan_weight *w = calloc(n + 1, sizeof(*w));
	char src[1024], a[200], b[200], ref[600];
	int rc = 0;

	if (!w)
		return -ENOMEM;
	*res = w;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct ck_catalog *cat;
		const struct ck_cat_tensor *t;
		unsigned line;

		rc = source_of(p, out[i].name, out[i].layer, &cat, src, sizeof(src), &line);
		if (rc)
			break;
		t = torch ? ck_catalog_find_pt(cat, src) : ck_catalog_find(cat, src);
		if (!t || t->role != CK_CAT_WEIGHT) {
			if (torch && ck_catalog_find(cat, src))
				return refuse(p, line,
					      "%s has no torch.save model file holding '%s' for the base's %s: the "
					      "sources must save the formats the base has",
					      ref_text(cat, ref, sizeof(ref)), src, ck_vnode_relpath(p->plan->base->torch_model));
			return refuse(p, line, "%s has no tensor '%s' (for the output's '%s')", ref_text(cat, ref, sizeof(ref)),
				      src, out[i].name);
		}
		if (!same_type(t, &out[i]))
			return refuse(p, line, "'%s' of %s is %s where the base has %s", src, ref_text(cat, ref, sizeof(ref)),
				      type_text(t, a, sizeof(a)), type_text(&out[i], b, sizeof(b)));
		if (p->r->dtype && strcmp(p->r->dtype, ck_dtype_name(t->dtype)))
			return refuse(p, p->r->dtype_line,
				      "dtype %s, but '%s' of %s is %s: converting would compute new bytes, which "
				      "recipes do not",
				      p->r->dtype, src, ref_text(cat, ref, sizeof(ref)), ck_dtype_name(t->dtype));
		w[i].out = &out[i];
		w[i].src = cat;
		w[i].t = t;
	}
	return rc;
}

/* pre/post weights: tensors of the base outside the blocks, once each. */
static int plan_named_weights(struct planner *p)
{
	const struct ck_recipe *r = p->r;
	char ref[600];
	int rc = 0;

	p->weight_cat = calloc(r->nweights + 1, sizeof(*p->weight_cat));
	if (!p->weight_cat)
		return -ENOMEM;
	for (size_t i = 0; i < r->nweights && !rc; i++) {
		const struct ck_recipe_weight *w = &r->weights[i];
		const struct ck_cat_tensor *bt = ck_catalog_find(p->plan->base, w->name);

		for (size_t o = 0; o < i; o++)
			if (!strcmp(r->weights[o].name, w->name))
				return refuse(p, w->line, "'%s' is listed twice (line %u)", w->name, r->weights[o].line);
		if (!bt || bt->role != CK_CAT_WEIGHT)
			return refuse(p, w->line, "'%s' is not a tensor of the base model %s", w->name,
				      ref_text(p->plan->base, ref, sizeof(ref)));
		if (ck_layer_block(bt->layer) >= 0)
			return refuse(p, w->line, "'%s' is in block %s: blocks are taken with slices", w->name,
				      bt->layer + 7);
		rc = resolve(p, &w->model, &p->weight_cat[i]);
	}
	return rc;
}

static int plan_states(struct planner *p)
{
	struct ck_recipe_plan *pl = p->plan;
	const struct ck_catalog *base = pl->base;
	char src[1024], ref[600];

	if (!base->optim_file)
		return 0;
	if (!base->moments_named)
		return refuse(p, p->r->base.line,
			      "the optimizer state of the base %s cannot be assigned to parameters (param_groups "
			      "without param_names, and the parameters do not match the model's by order and shape)",
			      ref_text(base, ref, sizeof(ref)));
	pl->s = calloc(base->nstates + 1, sizeof(*pl->s));
	if (!pl->s)
		return -ENOMEM;
	for (size_t i = 0; i < base->nstates; i++) {
		const struct ck_cat_state *bs = &base->states[i], *ss;
		const struct ck_catalog *cat;
		unsigned line;
		int rc = source_of(p, bs->param, bs->layer, &cat, src, sizeof(src), &line);

		if (rc)
			return rc;
		if (cat != base && !cat->moments_named)
			return refuse(p, line, "the optimizer state of %s cannot be assigned to parameters",
				      ref_text(cat, ref, sizeof(ref)));
		ss = ck_catalog_find_state(cat, src);
		if (!ss)
			return refuse(p, line, "%s has no optimizer state for '%s'", ref_text(cat, ref, sizeof(ref)), src);
		pl->s[pl->ns].base = bs;
		pl->s[pl->ns++].src = ss;
	}
	return 0;
}

int ck_recipe_check(struct ck_view *v, const struct ck_recipe *r, const struct ck_catalog_source *cats,
		    struct ck_recipe_plan **out, unsigned *line, struct ck_error *err)
{
	struct planner p = { v, r, cats, line, err, NULL, NULL, NULL, NULL, NULL };
	const struct ck_catalog *base;
	char ref[600];
	int rc;

	*line = 0;
	p.plan = calloc(1, sizeof(*p.plan));
	if (!p.plan)
		return -ENOMEM;
	rc = resolve(&p, &r->base, &base);
	if (!rc) {
		p.plan->base = base;
		if (base->model == CK_CAT_MODEL_NONE)
			rc = refuse(&p, r->base.line, "the base %s has no model weights (safetensors or torch.save)",
				    ref_text(base, ref, sizeof(ref)));
		else if (base->model == CK_CAT_MODEL_DCP)
			rc = refuse(&p, r->base.line,
				    "the base %s is a DCP save: recipes compose safetensors and torch.save "
				    "checkpoints (a DCP checkpoint may be a source)",
				    ref_text(base, ref, sizeof(ref)));
	}
	if (!rc)
		rc = plan_named_weights(&p);
	if (!rc)
		rc = plan_blocks(&p);
	if (!rc) {
		p.plan->nw = base->nweights;
		rc = plan_weights_list(&p, base->weights, base->nweights, 0, &p.plan->w);
	}
	if (!rc && base->torch_model) {
		p.plan->npt = base->npt_weights;
		rc = plan_weights_list(&p, base->pt_weights, base->npt_weights, 1, &p.plan->pt);
	}
	if (!rc)
		rc = plan_states(&p);
	free(p.blk_slice);
	free(p.blk_src);
	free(p.slice_cat);
	free(p.weight_cat);
	if (rc) {
		ck_recipe_plan_free(p.plan);
		return rc;
	}
	*out = p.plan;
	return 0;
}

void ck_recipe_plan_free(struct ck_recipe_plan *p)
{
	if (!p)
		return;
	free(p->w);
	free(p->pt);
	free(p->s);
	free(p);
}
