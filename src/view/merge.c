/* Newest-wins merge of state trees.
 *
 * merge(older, newer) is Python's {**older, **newer} applied recursively to
 * dicts (OrderedDicts included, and their BUILD state such as a state
 * dict's _metadata; the newer dict's type wins): keys keep the older dict's order, values come from the
 * newer dict where it has the key, and keys only the newer dict has follow
 * in its order.  Anything that is not a dict on both sides (tensors, lists,
 * tuples, scalars, objects) comes whole from the newer tree.  So a partial
 * save's missing layers and optimizer `state` entries are filled in from
 * older saves, while `param_groups`, scalars and lists are the newest.
 *
 * When nothing from the older tree survives, the newer node itself is
 * returned (no copy), so a complete newest save merges to itself.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "view_internal.h"

#define MERGE_MAX_DEPTH 512

/* An open-addressing index of a dict's keys (entry numbers + 1). */
struct keyidx {
	size_t cap;
	size_t *slot;
};

static uint64_t key_hash(const struct pk_node *k)
{
	uint64_t h = 1469598103934665603ULL ^ (uint64_t)k->kind;

	switch (k->kind) {
	case PK_STR:
	case PK_BYTES:
	case PK_LONG:
		for (size_t i = 0; i < k->v.str.len; i++)
			h = (h ^ (uint8_t)k->v.str.s[i]) * 1099511628211ULL;
		return h;
	case PK_INT:
		return (h ^ (uint64_t)k->v.i) * 0x9e3779b97f4a7c15ULL;
	case PK_BOOL:
		return (h ^ (uint64_t)k->v.b) * 0x9e3779b97f4a7c15ULL;
	default:
		return h;  /* other keys collide into one chain: compared by pk_key_equal */
	}
}

static int keyidx_build(struct keyidx *ix, const struct pk_node *dict)
{
	size_t entries = dict->n / 2;

	ix->cap = 16;
	while (ix->cap < entries * 2)
		ix->cap *= 2;
	ix->slot = calloc(ix->cap, sizeof(*ix->slot));
	if (!ix->slot)
		return -ENOMEM;
	for (size_t e = 0; e < entries; e++) {
		size_t s = key_hash(dict->items[2 * e]) & (ix->cap - 1);

		while (ix->slot[s])
			s = (s + 1) & (ix->cap - 1);
		ix->slot[s] = e + 1;
	}
	return 0;
}

/* Entry number of key in dict, or -1. */
static long keyidx_find(const struct keyidx *ix, const struct pk_node *dict, const struct pk_node *key)
{
	size_t s = key_hash(key) & (ix->cap - 1);

	while (ix->slot[s]) {
		size_t e = ix->slot[s] - 1;

		if (pk_key_equal(dict->items[2 * e], key))
			return (long)e;
		s = (s + 1) & (ix->cap - 1);
	}
	return -1;
}

struct merge_ctx {
	struct pk_doc *doc;
	struct ck_error *err;
};

static int merge_node(struct merge_ctx *m, struct pk_node *older, struct pk_node *newer,
		      int depth, struct pk_node **out);

/* The attribute state of merge(older, newer) (OrderedDict BUILD, e.g. a
 * state dict's _metadata) into *state; *changed set when it is not
 * newer's.  The newer dict's type wins, and a plain dict has no
 * attributes: a filtered save ({k: v for ...}) over a state_dict() drops
 * _metadata, as Python's merge would. */
static int merge_state(struct merge_ctx *m, struct pk_node *older, struct pk_node *newer, int depth,
		       struct pk_node **state, int *changed)
{
	int rc;

	*state = newer->state;
	if (!newer->cls) {
		*state = NULL;
	} else if (older->state && newer->state) {
		rc = merge_node(m, older->state, newer->state, depth + 1, state);
		if (rc)
			return rc;
		if (*state != newer->state)
			*changed = 1;
	} else if (older->state) {
		*state = older->state;
		*changed = 1;
	}
	return 0;
}

/* Whether older and newer have equal keys in the same order. */
static int same_keys(const struct pk_node *older, const struct pk_node *newer)
{
	if (older->n != newer->n)
		return 0;
	for (size_t e = 0; e < older->n / 2; e++)
		if (!pk_key_equal(older->items[2 * e], newer->items[2 * e]))
			return 0;
	return 1;
}

/* merge_dicts for dicts with the same keys in the same order (a full
 * save over a full save, which a series of them merges at every step):
 * no key index, and newer itself unless a value or the state changes. */
static int merge_same_keys(struct merge_ctx *m, struct pk_node *older, struct pk_node *newer, int depth,
			   struct pk_node **out)
{
	size_t n = newer->n / 2;
	struct pk_node **vals = malloc((n ? n : 1) * sizeof(*vals)), *state, *res;
	int changed = 0, rc = 0;

	if (!vals)
		return -ENOMEM;
	for (size_t e = 0; e < n && !rc; e++) {
		rc = merge_node(m, older->items[2 * e + 1], newer->items[2 * e + 1], depth + 1, &vals[e]);
		if (!rc && vals[e] != newer->items[2 * e + 1])
			changed = 1;
	}
	if (!rc)
		rc = merge_state(m, older, newer, depth, &state, &changed);
	if (rc || !changed) {
		*out = newer;
		free(vals);
		return rc;
	}
	res = pk_new(m->doc, PK_DICT);
	if (!res)
		rc = -ENOMEM;
	for (size_t e = 0; e < n && !rc; e++)
		if (!(rc = pk_append(m->doc, res, newer->items[2 * e])))
			rc = pk_append(m->doc, res, vals[e]);
	if (!rc) {
		res->cls = newer->cls;
		res->flags = newer->flags;
		res->state = state;
		*out = res;
	}
	free(vals);
	return rc;
}

static int merge_dicts(struct merge_ctx *m, struct pk_node *older, struct pk_node *newer,
		       int depth, struct pk_node **out)
{
	size_t nold = older->n / 2, nnew = newer->n / 2;
	struct keyidx ix = { 0, NULL };
	struct pk_node *res = NULL, *state;
	unsigned char *taken = NULL;
	int changed = 0, rc;

	if (same_keys(older, newer))
		return merge_same_keys(m, older, newer, depth, out);
	rc = keyidx_build(&ix, newer);
	if (rc)
		return rc;
	taken = calloc(nnew ? nnew : 1, 1);
	res = pk_new(m->doc, PK_DICT);
	if (!taken || !res) {
		rc = -ENOMEM;
		goto out;
	}
	res->cls = newer->cls;
	res->flags = newer->flags;
	/* Older keys first, in older order, with newer values where present. */
	for (size_t e = 0; e < nold; e++) {
		struct pk_node *k = older->items[2 * e], *val = older->items[2 * e + 1];
		long j = keyidx_find(&ix, newer, k);

		if (j >= 0) {
			struct pk_node *nv = newer->items[2 * j + 1];

			taken[j] = 1;
			k = newer->items[2 * j];
			rc = merge_node(m, val, nv, depth + 1, &val);
			if (rc)
				goto out;
			if (val != nv)
				changed = 1;
		} else {
			changed = 1;
		}
		if ((rc = pk_append(m->doc, res, k)) || (rc = pk_append(m->doc, res, val)))
			goto out;
	}
	for (size_t j = 0; j < nnew; j++) {
		if (taken[j])
			continue;
		if ((rc = pk_append(m->doc, res, newer->items[2 * j])) ||
		    (rc = pk_append(m->doc, res, newer->items[2 * j + 1])))
			goto out;
	}
	rc = merge_state(m, older, newer, depth, &state, &changed);
	if (rc)
		goto out;
	res->state = state;
	/* Equal content in another key order still counts as a change: the
	 * result must have {**older, **newer}'s order. */
	for (size_t e = 0; e < nnew && !changed; e++)
		if (res->items[2 * e] != newer->items[2 * e])
			changed = 1;
	*out = changed ? res : newer;
out:
	free(ix.slot);
	free(taken);
	return rc;
}

static int merge_node(struct merge_ctx *m, struct pk_node *older, struct pk_node *newer,
		      int depth, struct pk_node **out)
{
	if (depth > MERGE_MAX_DEPTH)
		return ck_fail(m->err, EINVAL, "state tree nested deeper than %d levels", MERGE_MAX_DEPTH);
	if (older && newer && older->kind == PK_DICT && newer->kind == PK_DICT && older != newer)
		return merge_dicts(m, older, newer, depth, out);
	*out = newer;
	return 0;
}

int merge_trees(struct pk_doc *doc, struct pk_node **roots, size_t n, struct pk_node **out,
		int *used_older, struct ck_error *err)
{
	struct merge_ctx m = { doc, err };
	struct pk_node *acc;
	int rc;

	if (!n)
		return -EINVAL;
	acc = roots[n - 1];
	for (size_t i = n - 1; i-- > 0;) {
		rc = merge_node(&m, acc, roots[i], 0, &acc);
		if (rc)
			return rc;
	}
	*out = acc;
	*used_older = acc != roots[0];
	return 0;
}
