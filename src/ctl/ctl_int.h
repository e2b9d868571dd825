/* Internal structures of the control directory (src/ctl/).  Not a public
 * header: include/ckptfs/ctldir.h is the daemon's interface, and
 * include/ckptfs/catalog.h what ckptctl uses. */
#ifndef CKPTFS_CTL_INT_H
#define CKPTFS_CTL_INT_H

#include <pthread.h>
#include <stdint.h>

#include "ckptfs/catalog.h"
#include "ckptfs/dcp.h"
#include "ckptfs/ctldir.h"
#include "ckptfs/pickle.h"
#include "ckptfs/recipe.h"
#include "ckptfs/view.h"

/* ---- catalog.c ---- */

/* A ck_vtensor of an entry, for ck_vfile_append_tensor. */
void cat_vtensor(const struct ck_cat_tensor *e, struct ck_vtensor *out);
/* Every tensor of one composite file (name and path: its name in the file),
 * sorted by path.  0 or -ENOMEM (a file that cannot be served has none). */
int cat_file_entries(struct ck_view *v, const struct ck_vnode *file, struct ck_cat_tensor **out, size_t *n);
void cat_entries_free(struct ck_cat_tensor *v, size_t n);

/* A copy of an entry (its strings duplicated): 0 or -ENOMEM. */
int cat_entry_copy(const struct ck_cat_tensor *src, struct ck_cat_tensor *dst);

/* A run of a DCP tensor's bytes in C order: elements [at, at + len) of the
 * whole tensor are elements [from, from + len) of the storage of its k-th
 * chunk. */
struct ctl_run {
	uint64_t at, from, len;
	size_t k;
};
/* The runs of e's chunks, order[k] being the k-th chunk's index in
 * m->chunks, sorted by at, when the chunks tile the tensor exactly: 0 with
 * *out (malloc'ed) and *n; -1 when they do not (a gap, an overlap, a chunk
 * out of bounds, more than 4 Mi runs); -ENOMEM.  A chunk that splits the
 * tensor by rows is one run, one split by columns a run per row. */
int ctl_dcp_runs(const struct ck_dcp_meta *m, const struct ck_dcp_entry *e, const size_t *order,
		 struct ctl_run **out, size_t *n);

/* ---- recipe_plan.c: a recipe's checkpoint, tensor by tensor ---- */

struct plan_weight {
	const struct ck_cat_tensor *out;   /* the base's: the output's name, layer and type */
	const struct ck_catalog *src;
	const struct ck_cat_tensor *t;     /* the source's tensor (torch lists: with its node) */
};

struct plan_state {
	const struct ck_cat_state *base;   /* the base's entry (its key stays) */
	const struct ck_cat_state *src;    /* the value: the source's moments */
};

struct ck_recipe_plan {
	const struct ck_catalog *base;
	struct plan_weight *w;             /* base->weights, in order */
	size_t nw;
	struct plan_weight *pt;            /* base->pt_weights, in order (a torch.save base) */
	size_t npt;
	struct plan_state *s;              /* base->states, in order */
	size_t ns;
};

/* ---- optim_match.c: optimizer state keyed by index -> parameter names ----
 *
 * torch optimizers key their state by the parameter's position in the
 * param_groups, and record names only when built from named_parameters()
 * (torch 2.x 'param_names').  Without them, each group's parameters are
 * matched to the model's tensors in state-dict order: a group's
 * parameters are the model's in order, a subsequence of the state dict
 * (buffers and the second name of a tied weight are skipped), and a
 * parameter with state has the shape of its moments.  A parameter is named
 * only when that is forced: the earliest and the latest embedding of the
 * group's shape sequence agree on it, and no tensor is claimed twice. */
struct optim_shape {
	int ndim;                  /* -1: unknown (no moment with a shape) */
	uint64_t shape[CK_MAX_DIMS];
};

/* model[0..nmodel) in state-dict order; groups[g] holds group_len[g]
 * parameters' shapes.  Fills match[] (one per parameter, groups in order)
 * with the model tensor index.  0, -ENOENT (not forced), -ENOMEM. */
int optim_match(const struct optim_shape *model, size_t nmodel, const struct optim_shape *const *groups,
		const size_t *group_len, size_t ngroups, size_t *match);

/* ---- safetensors of chosen tensors (weights.c) ---- */

/* One tensor of a generated safetensors file: its name in the file and
 * where its bytes are. */
struct st_pick {
	const char *name;
	const struct ck_cat_tensor *e;
};

/* A safetensors file of the picks (the reference writer's layout, every
 * name with its own bytes: tied weights appear under each name), with
 * __metadata__ {"format": "pt"}.  0, -EINVAL (a tensor that is not
 * contiguous, logged), -ENOMEM. */
int ctl_safetensors(struct ck_view *v, const struct st_pick *p, size_t n, const char *what, struct ck_vfile **out);
/* Its size without building it. */
int ctl_safetensors_size(const struct st_pick *p, size_t n, uint64_t *size);

/* The physical file versions a file reads, for its owner and mode. */
struct ctl_srcs {
	struct ck_vsource **v;
	size_t n, cap;
};
/* Adds src (once however often it is added): 0 or -ENOMEM. */
int ctl_srcs_add(struct ctl_srcs *s, struct ck_vsource *src);
/* Adds the sources of e's bytes (each of its pieces'): 0 or -ENOMEM. */
int ctl_srcs_add_entry(struct ctl_srcs *s, const struct ck_cat_tensor *e);
/* The sources of the picks' bytes: 0 or -ENOMEM. */
int ctl_picks_sources(const struct st_pick *p, size_t n, struct ctl_srcs *out);
void ctl_srcs_free(struct ctl_srcs *s);

/* ---- the node model (ctldir.c) ---- */

struct ck_ctl;
struct ctl_node;

/* One child of a directory as its type lists it.  key tells two versions
 * of a name apart (a recipe replaced): a new key makes a new node. */
struct ctl_spec {
	char *name;
	char *key;
	int is_dir;
	const struct ctl_type *type;
	char *arg[3];              /* what the type needs to make it (series, checkpoint, layer...) */
	void *ptr;                 /* the same, a pointer that lives as long as the control dir */
	const struct ck_vnode *anchor;  /* directories: the view node whose owner it shows (or NULL) */
	size_t order;              /* its place in the list (of two equal names the first wins) */
};

struct ctl_specs {
	struct ctl_spec *v;
	size_t n, cap;
};

/* Appends a spec (strings copied; NULL args allowed): 0 or -ENOMEM.
 * A directory shows the owner and group of its anchor, and of its mode
 * only the read and search bits (a file anchor's read bits give both);
 * without one, its parent's (see ctl_spec_anchor). */
int ctl_spec_add(struct ctl_specs *s, const char *name, const char *key, int is_dir, const struct ctl_type *type,
		 const char *a0, const char *a1, const char *a2, void *ptr);
void ctl_specs_free(struct ctl_specs *s);
/* Sets the anchor of the spec added last. */
void ctl_spec_anchor(struct ctl_specs *s, const struct ck_vnode *anchor);

struct ctl_type {
	const char *kind;          /* user.ckptfs.kind */
	/* Directories: the children, and a stamp that changes when they may
	 * (the listing is taken again then). */
	int (*list)(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out);
	uint64_t (*stamp)(struct ck_ctl *c, struct ctl_node *dir);
	/* Files: the size (cheap when possible) and the contents. */
	int (*size)(struct ck_ctl *c, struct ctl_node *f, uint64_t *size);
	int (*build)(struct ck_ctl *c, struct ctl_node *f, struct ck_vfile **out);
	/* Files: the physical file versions its bytes (or numbers) come from,
	 * without building it, for its owner, mode and who may read it.
	 * NULL: those of the file built.  None: the directory's owner, read
	 * bits only. */
	int (*sources)(struct ck_ctl *c, struct ctl_node *f, struct ctl_srcs *out);
	/* user.ckptfs.checkpoint / step of the node, when it has them (step
	 * -1: none): 0, or -ENODATA. */
	int (*ckpt)(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step);
	int is_volatile;           /* files: built on every open, never cached */
	int renamable;             /* the name may come to mean another node */
};

struct ctl_node {
	uint64_t ino;
	char *name;
	char *key;
	struct ctl_node *parent;
	int is_dir;
	const struct ctl_type *type;
	char *arg[3];
	void *ptr;
	const struct ck_vnode *anchor;
	/* directories (under c->lock) */
	struct ctl_node **children;   /* sorted by name */
	size_t nchildren;
	int listed;
	uint64_t stamp;
	/* files (under c->build_lock) */
	struct ck_vfile *vfile;
	int64_t mtime_ns;
};

struct ctl_entry {              /* the registry of top-level entries */
	char *name;
	int is_dir;
	const struct ctl_type *type;
	ck_ctl_file_fn fn;          /* registered files */
	void *ctx;
};

/* A registered series file, and the nodes made for it (one per series
 * looked up, never freed before the control directory). */
struct ctl_series_file {
	char *name;
	ck_ctl_series_fn fn;
	void *ctx;
	struct ctl_node **nodes;
	size_t nnodes;
};

struct recipe_cache;

struct file_index {
	const struct ck_vnode *file;
	struct ck_cat_tensor *v;     /* sorted by path */
	size_t n;
};

struct ck_ctl {
	struct ck_view *view;
	char *store;
	struct ck_ctl_opts opts;
	int64_t open_time_ns;
	pthread_mutex_t lock;        /* nodes and listings (short sections) */
	pthread_mutex_t build_lock;  /* catalogs, built files, recipes (recursive) */
	struct ctl_node **nodes;     /* by (ino & ~CK_CTL_INO_BIT) - 1 */
	size_t nnodes, capnodes;
	struct ctl_entry *entries;
	size_t nentries;
	struct ctl_series_file *series_files;   /* under lock */
	size_t nseries_files;
	struct ck_catalog **cats;    /* built catalogs, by checkpoint node */
	size_t ncats, capcats;
	struct file_index *findex;   /* files' tensors by path (ctl_file_tensor) */
	size_t nfindex;
	struct recipe_cache *recipes;
};

/* The catalog of a checkpoint node, built once (under build_lock) for
 * each flags of ck_catalog_build: with CK_CAT_WEIGHTS, a whole catalog
 * built already serves too.  It lives as long as the control directory.
 * 0 or -errno. */
int ctl_catalog(struct ck_ctl *c, const struct ck_vnode *ckpt, unsigned flags, struct ck_catalog **out);
/* The tensor called path in composite file, from a cached index of the
 * file: 0 with *out, or -ENOENT. */
int ctl_file_tensor(struct ck_ctl *c, const struct ck_vnode *file, const char *path, const struct ck_cat_tensor **out);
/* The checkpoint node of SERIES/CKPT as listed now: 0 or -ENOENT. */
int ctl_find_checkpoint(struct ck_ctl *c, const char *series, const char *name, const struct ck_vnode **out);

/* Types of the generated trees. */
extern const struct ctl_type ctl_weights_root, ctl_layers_root, ctl_history_root, ctl_recipes_root;

/* weights.c: the weights-only directory of a catalog (a checkpoint's or a
 * recipe's) as specs; and its files. */
int weights_list(struct ck_ctl *c, const struct ck_catalog *cat, struct ctl_specs *out);
/* Series of the view as directories of type t (arg[0] the series). */
int ctl_list_series(struct ck_ctl *c, const struct ctl_type *t, struct ctl_specs *out);
/* Listed checkpoints of a series as directories of type t (arg[0] the
 * series, arg[1] the checkpoint, ptr its view node), ascending step. */
int ctl_list_checkpoints(struct ck_ctl *c, const char *series, const struct ctl_type *t, struct ctl_specs *out);
/* A stamp for listings that follow the view's namespace. */
uint64_t ctl_namespace_stamp(struct ck_ctl *c, struct ctl_node *dir);

/* recipes.c */
void recipes_free(struct ck_ctl *c);
/* The weights catalog of recipe name (for weights/@recipes/NAME/). */
int recipe_weights_catalog(struct ck_ctl *c, const char *name, const char *key, struct ck_catalog **out);
/* The recipes as directories of type t (arg[0] the name, key its version). */
int recipes_list_names(struct ck_ctl *c, struct ctl_specs *out, const struct ctl_type *type);
/* Changes when a recipe is added or removed, or the namespace changes. */
uint64_t ctl_recipes_stamp(struct ck_ctl *c, struct ctl_node *dir);
extern const struct ctl_type ctl_recipe_weights_dir;

#endif
