/* Recipes: MergeKit passthrough configurations, with LLMTailor's additions,
 * that the control directory serves as checkpoints (recipes/NAME/) without
 * copying a byte.  docs/format.md, "Recipes", has the whole format.
 *
 *   slices:
 *     - sources:
 *         - model: run/checkpoint-20      # SERIES/CKPT of the store
 *           layer_range: [0, 2]           # blocks 0 and 1 (half-open)
 *     - sources:
 *         - model: run/checkpoint-40
 *           layer_range: [2, 4]
 *   merge_method: passthrough
 *   base_model: run/checkpoint-40         # optional: param_groups, scheduler,
 *                                         # config and the layout come from
 *                                         # it; default: the last slice's model
 *   dtype: float32                        # optional: must be the tensors' own
 *   pre_weights:                          # optional (LLMTailor): tensors
 *     - name: model.embed_tokens.weight   # outside the blocks, and the
 *       model: run/checkpoint-20          # checkpoint each comes from
 *   post_weights:                         # (default: the base)
 *     - name: lm_head.weight
 *       model: run/checkpoint-40
 *
 * Slices stack in order and their blocks are renumbered as MergeKit does:
 * output block k is the k-th block the slices select.
 *
 * The parser (src/format/recipe.c, libyaml) checks the document alone:
 * its size, alias expansion, nesting, known keys, types, passthrough; the
 * check against a store (ck_recipe_check, src/ctl/recipe_plan.c) checks the
 * rest.  Both report the line a refusal is about. */
#ifndef CKPTFS_RECIPE_H
#define CKPTFS_RECIPE_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/error.h"

#define CK_RECIPE_MAX_BYTES (1u << 20)     /* a recipe document */
#define CK_RECIPE_MAX_NODES 100000u        /* YAML nodes, aliases expanded */
#define CK_RECIPE_MAX_DEPTH 32             /* nesting */
#define CK_RECIPE_MAX_NAME 128             /* a recipe's name */

struct ck_recipe_ref {
	char *series;
	char *ckpt;
	unsigned line;
};

struct ck_recipe_slice {
	struct ck_recipe_ref model;
	int64_t start, end;         /* layer_range [start, end) */
	unsigned line;              /* of its layer_range */
};

struct ck_recipe_weight {
	char *name;
	struct ck_recipe_ref model;
	unsigned line;
};

struct ck_recipe {
	struct ck_recipe_slice *slices;
	size_t nslices;
	unsigned slices_line;
	struct ck_recipe_weight *weights;   /* pre_weights, then post_weights */
	size_t nweights;
	struct ck_recipe_ref base;          /* base_model, or the last slice's model */
	int has_base;                       /* base_model was given */
	char *dtype;                        /* NULL when not given */
	unsigned dtype_line;
};

/* Parses a recipe document.  0 with *out; -EINVAL (malformed, refused:
 * *line is the line it is about, 0 for the whole document, and err says
 * why), -E2BIG (larger than CK_RECIPE_MAX_BYTES, or more nodes once aliases
 * are expanded than CK_RECIPE_MAX_NODES), -ENOMEM. */
int ck_recipe_parse(const char *text, size_t len, struct ck_recipe **out, unsigned *line, struct ck_error *err);
void ck_recipe_free(struct ck_recipe *r);

/* Whether name can name a recipe: 1 to CK_RECIPE_MAX_NAME of [A-Za-z0-9._-],
 * not starting with '.'. */
int ck_recipe_name_ok(const char *name);

struct ck_view;
struct ck_vnode;
struct ck_catalog;
struct ck_recipe_plan;

/* Catalogs for ck_recipe_check: the catalog of a checkpoint node, owned by
 * the provider (it lives at least as long as the plan). */
struct ck_catalog_source {
	int (*get)(void *ctx, const struct ck_vnode *ckpt, struct ck_catalog **out);
	void *ctx;
};

/* Checks a parsed recipe against the checkpoints of an open view and plans
 * it: every checkpoint it names is listed; ranges lie within their
 * models' blocks and stack to exactly the base's blocks, none twice
 * (overlaps) and none left out (missing); every output tensor exists in
 * its source with the base's dtype and shape (and dtype, when given);
 * pre/post weights name tensors of the base outside the blocks, once; the
 * optimizer state of every chosen parameter can be found by name in its
 * source.  0 with *out, or -EINVAL with *line and err (why), -ENOMEM. */
int ck_recipe_check(struct ck_view *v, const struct ck_recipe *r, const struct ck_catalog_source *cats,
		    struct ck_recipe_plan **out, unsigned *line, struct ck_error *err);
void ck_recipe_plan_free(struct ck_recipe_plan *p);

#endif
