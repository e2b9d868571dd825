/* Iterative depth-first walk over dicts, lists and tuples of a pickle tree,
 * reporting every tensor leaf with its dotted path. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/walk.h"

struct frame {
	const struct pk_node *node;  /* a dict, list or tuple */
	size_t next;                 /* next item index (dicts step by 2) */
	size_t pathlen;              /* length of this container's path */
};

struct walker {
	struct frame stack[CK_WALK_MAX_DEPTH];
	size_t depth;
	size_t visits, max_visits;
	struct ck_buf path;          /* NUL-terminated after every change */
	char seg[CK_WALK_MAX_KEY];
	ck_walk_fn fn;
	int (*unreadable)(void *ctx, const char *path, const struct pk_node *node);
	void *ctx;
};

static int is_container(const struct pk_node *n)
{
	return n->kind == PK_DICT || n->kind == PK_LIST || n->kind == PK_TUPLE;
}

/* A call of one of torch's tensor rebuild functions (docs/formats.md §2.2). */
static int is_tensor_call(const struct pk_node *n)
{
	static const char *const names[] = {
		"_rebuild_tensor", "_rebuild_tensor_v2", "_rebuild_tensor_v3",
		"_rebuild_parameter", "_rebuild_parameter_with_state",
	};
	const struct pk_node *g = n->cls;
	size_t i;

	if (n->kind != PK_CALL || !g || g->kind != PK_GLOBAL || strcmp(g->v.global.module, "torch._utils"))
		return 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(g->v.global.name, names[i]))
			return 1;
	}
	return 0;
}

static int on_stack(const struct walker *w, const struct pk_node *n)
{
	size_t i;

	for (i = 0; i < w->depth; i++) {
		if (w->stack[i].node == n)
			return 1;
	}
	return 0;
}

/* Sets the path to the first len bytes plus ".seg" (or "seg" at the root). */
static int path_set(struct walker *w, size_t len, const char *seg)
{
	size_t n = strlen(seg);

	w->path.len = len;
	if (len && ck_buf_putc(&w->path, '.') < 0)
		return -ENOMEM;
	if (ck_buf_put(&w->path, seg, n + 1) < 0)   /* with the NUL */
		return -ENOMEM;
	w->path.len--;
	return 0;
}

/* Handles one node whose path is in w->path: reports it, descends into it
 * (pushes a frame) or ignores it. */
static int visit(struct walker *w, const struct pk_node *n)
{
	const struct pk_tensor *t;

	if (!n)
		return 0;
	if (++w->visits > w->max_visits)
		return -E2BIG;
	t = pk_as_tensor(n);
	if (t)
		return w->fn(w->ctx, (const char *)w->path.data, n, t);
	if (w->unreadable && is_tensor_call(n))
		return w->unreadable(w->ctx, (const char *)w->path.data, n);
	if (!is_container(n) || on_stack(w, n))
		return 0;
	if (w->depth == CK_WALK_MAX_DEPTH)
		return -ELOOP;
	w->stack[w->depth].node = n;
	w->stack[w->depth].next = 0;
	w->stack[w->depth].pathlen = w->path.len;
	w->depth++;
	return 0;
}

/* Moves to the next child of the top frame: sets its path and returns it,
 * or pops the frame and returns NULL when it has no more children. */
static const struct pk_node *next_child(struct walker *w, int *rc)
{
	struct frame *f = &w->stack[w->depth - 1];
	const struct pk_node *n = f->node;
	const struct pk_node *child;

	*rc = 0;
	if (n->kind == PK_DICT) {
		if (f->next + 1 >= n->n) {
			w->depth--;
			return NULL;
		}
		if (pk_key_to_path(n->items[f->next], w->seg, sizeof(w->seg)) < 0) {
			*rc = -ENAMETOOLONG;
			return NULL;
		}
		child = n->items[f->next + 1];
		f->next += 2;
	} else {
		if (f->next >= n->n) {
			w->depth--;
			return NULL;
		}
		snprintf(w->seg, sizeof(w->seg), "%zu", f->next);
		child = n->items[f->next];
		f->next++;
	}
	*rc = path_set(w, f->pathlen, w->seg);
	return *rc < 0 ? NULL : child;
}

int ck_walk_tensors(const struct pk_node *root, ck_walk_fn fn, void *ctx)
{
	return ck_walk_tensors_opts(root, NULL, fn, ctx);
}

int ck_walk_tensors_max(const struct pk_node *root, size_t max_visits, ck_walk_fn fn, void *ctx)
{
	struct ck_walk_opts opts = { .max_visits = max_visits };

	return ck_walk_tensors_opts(root, &opts, fn, ctx);
}

int ck_walk_tensors_opts(const struct pk_node *root, const struct ck_walk_opts *opts, ck_walk_fn fn, void *ctx)
{
	struct walker *w;
	int rc;

	if (!root)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->max_visits = opts && opts->max_visits ? opts->max_visits : CK_WALK_MAX_VISITS;
	w->unreadable = opts ? opts->unreadable : NULL;
	w->fn = fn;
	w->ctx = ctx;
	rc = path_set(w, 0, "");
	if (rc == 0)
		rc = visit(w, root);
	while (rc == 0 && w->depth) {
		const struct pk_node *child = next_child(w, &rc);

		if (child)
			rc = visit(w, child);
	}
	ck_buf_free(&w->path);
	free(w);
	return rc;
}
