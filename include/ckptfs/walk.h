/* Tensor walk: the logical tensors of a parsed torch.save pickle, each with
 * its path in the state tree.
 *
 * Dict values are reached through their keys (formatted by pk_key_to_path),
 * list and tuple items through their decimal index, and segments are joined
 * with '.': {'model': {'layers.0.weight': t}} gives "model.layers.0.weight",
 * an optimizer state_dict gives "state.3.exp_avg", "param_groups.0.params"...
 * A tensor is a PK_TENSOR node or a _rebuild_parameter(_with_state) call
 * wrapping one (pk_as_tensor); a file that is a single tensor yields one
 * tensor with path "".  Other objects (custom classes, numpy arrays) are not
 * descended into.
 *
 * The walk is iterative with a bounded stack: nesting deeper than
 * CK_WALK_MAX_DEPTH fails with -ELOOP, a container that contains itself is
 * not entered again, and a DAG that would expand past CK_WALK_MAX_VISITS
 * visits (a few hundred bytes of pickle can describe 2^64 paths) fails
 * with -E2BIG.
 */
#ifndef CKPTFS_WALK_H
#define CKPTFS_WALK_H

#include <stddef.h>
#include "ckptfs/pickle.h"

#define CK_WALK_MAX_DEPTH 256
#define CK_WALK_MAX_VISITS (64u << 20)
/* Longest key segment; longer keys fail the walk with -ENAMETOOLONG. */
#define CK_WALK_MAX_KEY 4096

typedef int (*ck_walk_fn)(void *ctx, const char *path, const struct pk_node *node, const struct pk_tensor *t);

/* Calls fn for each tensor in document order (dict insertion order, list
 * order).  A shared tensor is reported once per path that reaches it.
 * Returns 0, fn's non-zero return value if fn stopped the walk, or
 * -ENOMEM / -ELOOP / -E2BIG / -ENAMETOOLONG. */
int ck_walk_tensors(const struct pk_node *root, ck_walk_fn fn, void *ctx);
/* The same with another bound than CK_WALK_MAX_VISITS on visited nodes. */
int ck_walk_tensors_max(const struct pk_node *root, size_t max_visits, ck_walk_fn fn, void *ctx);

struct ck_walk_opts {
	size_t max_visits;     /* 0: CK_WALK_MAX_VISITS */
	/* Called (if non-NULL) for each torch._utils._rebuild_tensor(_v2/_v3) or
	 * _rebuild_parameter(_with_state) call on the walk's way that
	 * pk_as_tensor cannot read: malformed arguments, a view outside its
	 * storage.  The pickle VM leaves those as plain calls; a reader that
	 * must account for every tensor refuses the file.  Non-zero stops the
	 * walk and is returned. */
	int (*unreadable)(void *ctx, const char *path, const struct pk_node *node);
};

/* ck_walk_tensors with options (opts may be NULL). */
int ck_walk_tensors_opts(const struct pk_node *root, const struct ck_walk_opts *opts, ck_walk_fn fn, void *ctx);

#endif
