/* What a checkpoint holds for evaluation: its model weights under their
 * model names, and its optimizer's moments by parameter, each with its
 * layer (the store's layer rules) and where its bytes are.  Built from the
 * view's composites (include/ckptfs/view.h), so a partial save's
 * catalog has every tensor its composite serves.  The control directory's
 * weights, layers, history and recipes views and `ckptctl diff` read it.
 *
 * Model weights, first rule that applies (top-level files of the
 * checkpoint):
 *   1. safetensors: model.safetensors and model-*-of-*.safetensors;
 *   2. torch.save state dicts: pytorch_model.bin, pytorch_model-*-of-*.bin,
 *      model.pt, model.pth, model.bin, or a single-file checkpoint whose
 *      root is a dict of tensors;
 *   3. a torch.save file (or single-file checkpoint) whose root dict has a
 *      dict entry 'model', 'state_dict', 'module' or 'model_state_dict'
 *      (first in that order): its tensors, that prefix stripped.
 *   4. a torch DCP save (its .metadata at the top of the checkpoint, as
 *      the mount serves it: a partial save merged with the older saves):
 *      the tensor items whose FQN starts with "model.", that prefix
 *      stripped ("model.model.layers.0.q_proj.weight" ->
 *      "model.layers.0.q_proj.weight", as dcp_to_torch_save of a
 *      {"model": state_dict} save and then transformers name them), in
 *      the .metadata's order.  Items of other FQNs are no weights.
 * When both 1 and 2 are there, the safetensors files give the bytes and
 * the torch file the state-dict order (and the nodes recipes compose
 * torch.save files from).  Tensors of several files of one rule: by file
 * name, a name met twice keeps its first file.
 *
 * Optimizer: optimizer.pt, optimizer.bin or optimizer.pth, else the
 * 'optimizer' or 'optimizer_state_dict' entry of the combined file of rule
 * 3: a torch optimizer state_dict, {'state': {key: {moment: tensor}},
 * 'param_groups': [...]}.  A key names its parameter when it is a string
 * (FQN-keyed state), through the group's 'param_names', or by matching the
 * groups to the model's parameters by order and shape (src/ctl/ctl_int.h,
 * optim_match); otherwise the moments are "state.<key>.<moment>" in layer
 * "optimizer".  Moments are named "optimizer.<parameter>.<moment>".
 * A DCP save's optimizer is its tensor items "optim.state.<P>.<moment>"
 * (or "optimizer.state.<P>.<moment>"): P is the longest weight name that
 * leaves one dotted component for the moment; an item no weight name fits
 * is "state.<P>.<moment>" in layer "optimizer".  Its other items
 * (param_groups, bytes items) are not in the catalog.
 *
 * A DCP tensor is served from its items' bytes as the data files hold
 * them: the storage of the torch.save blob DCP wrote for it, which must be
 * exactly the chunk's elements (contiguous is 0 otherwise: an item whose
 * blob is not a torch.save archive, e.g. with transform_descriptors, or a
 * storage larger than the chunk).  The index keeps no strides for DCP
 * items: torch's writers save each chunk's storage whole, cloning a view
 * that does not own all of it, so a storage of exactly the chunk's
 * elements is taken to hold them in C order.  A tensor of several chunks
 * (a ShardedTensor, a DTensor) is served when its chunks tile it exactly,
 * split along any dimensions: its bytes in C order are runs of the
 * chunks' storages (ck_cat_tensor.pieces), one per chunk when they split
 * it by rows, one per row of a chunk otherwise (a split by columns, as
 * tensor parallelism shards a row-parallel layer's weight, costs an
 * extent per row and shard in every file built from it); chunks with a
 * gap or an overlap between them make contiguous 0.  A weights or layer
 * file that would need a tensor with contiguous 0 is refused (-EINVAL,
 * logged), as a torch.save tensor in another layout is.
 *
 * Side files (config.json, generation_config.json, tokenizer*,
 * special_tokens_map.json, added_tokens.json, vocab.json, vocab.txt,
 * merges.txt, spiece.model, preprocessor_config.json, chat_template.*)
 * are what the weights view serves beside the weights.
 *
 * Thread rules: a catalog is immutable once built and lives as long as the
 * view it was built from (or the control directory that caches it).
 */
#ifndef CKPTFS_CATALOG_H
#define CKPTFS_CATALOG_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/dtype.h"
#include "ckptfs/tensor_math.h"
#include "ckptfs/view.h"

enum ck_cat_role {
	CK_CAT_WEIGHT,
	CK_CAT_MOMENT,
};

/* Where a catalog's model weights come from. */
enum ck_cat_model {
	CK_CAT_MODEL_NONE,
	CK_CAT_MODEL_SAFETENSORS,
	CK_CAT_MODEL_TORCH,
	CK_CAT_MODEL_COMBINED,
	CK_CAT_MODEL_DCP,
};

/* A DCP item, one chunk of a tensor: its name in its file
 * ("model.w[0:8, 0:16]"), its bytes and its shape. */
struct ck_cat_item {
	char *name;
	uint64_t nbytes;
	uint64_t shape[CK_MAX_DIMS];
};

/* One extent of a tensor stored in pieces (a DCP tensor's chunks): a run
 * of its bytes in C order, all of a chunk split by rows, one row of a
 * chunk split by columns.  The first run of each item carries it (its
 * bytes start at that run's offset); its other runs NULL. */
struct ck_cat_piece {
	struct ck_vsource *source;
	uint64_t offset, nbytes;
	struct ck_cat_item *item;
};

struct ck_cat_tensor {
	char *name;                 /* weight: its model name; moment: "optimizer.<param>.<moment>" */
	char *path;                 /* its name in its file ("model.embed.weight", "state.3.exp_avg") */
	char *param;                /* the parameter: a weight's name, or "state.<key>" when unknown */
	char *moment;               /* "exp_avg", ...; NULL for weights */
	char *layer;
	enum ck_cat_role role;
	enum ck_dtype dtype;
	int ndim;
	uint64_t shape[CK_MAX_DIMS];
	struct ck_vsource *source;  /* bytes: nbytes at offset of that file version */
	uint64_t offset, nbytes;
	int contiguous;
	const struct pk_node *node; /* torch.save: its node in the composite's tree */
	const char *src_ckpt;       /* the checkpoint that saved these bytes (view's string) */
	const char *src_series;
	int64_t src_step;
	const struct ck_vnode *file;    /* the composite file it is read from */
	/* Stored in several extents: their bytes in this order are the tensor
	 * (source, offset are the first's, nbytes the sum).  NULL, 0 for one. */
	struct ck_cat_piece *pieces;
	size_t npieces;
};

/* One optimizer state entry: a parameter's moments as one subtree. */
struct ck_cat_state {
	const struct pk_node *key;      /* the key in 'state' */
	const struct pk_node *value;    /* {moment: tensor, ...} */
	char *param;                    /* as in ck_cat_tensor.param */
	char *layer;
};

/* ck_catalog_build flags. */
#define CK_CAT_WEIGHTS 1u   /* the model weights and side files only (what weights/
			     * serves): the optimizer file is not parsed, so moments,
			     * states and optim_file stay empty */

struct ck_catalog {
	struct ck_vckpt ckpt;       /* for a recipe: series NULL, name the recipe's */
	unsigned flags;             /* as built: CK_CAT_WEIGHTS or 0 */
	enum ck_cat_model model;
	struct ck_cat_tensor *weights;  /* in state-dict order where a torch file gives it */
	size_t nweights;
	struct ck_cat_tensor *moments;
	size_t nmoments;
	int moments_named;          /* every state key has its parameter's name */
	/* torch.save model weights (rule 2 or 3), for composing: the file and,
	 * for rule 3, the entry's key; pt_weights their tensors with nodes. */
	const struct ck_vnode *torch_model;
	const char *torch_entry;
	struct ck_cat_tensor *pt_weights;
	size_t npt_weights;
	const struct ck_vnode **st_files;   /* safetensors model files, by name */
	const struct ck_vnode *dcp_save;    /* rule 4: the save's .metadata */
	size_t nst_files;
	/* The optimizer state_dict: file, entry (NULL at the root), and its
	 * 'state' entries in order. */
	const struct ck_vnode *optim_file;
	const char *optim_entry;
	struct ck_cat_state *states;
	size_t nstates;
	/* Side files of the weights view: name -> composite file node. */
	char **side_names;
	const struct ck_vnode **side_files;
	size_t nside;
	/* Every file of the checkpoint (relative path -> node), in listing order. */
	char **paths;
	const struct ck_vnode **files;
	size_t nfiles;
	/* Numbered blocks: layers "layers.0" .. "layers.<nblocks-1>" (0 when none). */
	size_t nblocks;
	/* Sorted indexes for lookups. */
	struct ck_cat_tensor **by_name;     /* weights and moments */
	size_t nby_name;
	struct ck_cat_tensor **pt_by_name;  /* pt_weights */
	struct ck_cat_state **states_by_param;
};

/* Builds the catalog of checkpoint node ckpt (ck_view_checkpoint must know
 * it).  Composites it needs are built on the way.  A file the view cannot
 * serve leaves its tensors out (logged).  flags: 0 or CK_CAT_WEIGHTS.
 * 0, -ENOENT (not a checkpoint), -ENOMEM. */
int ck_catalog_build(struct ck_view *v, const struct ck_vnode *ckpt, unsigned flags, struct ck_catalog **out);
void ck_catalog_free(struct ck_catalog *c);
/* The weight or moment called name, or NULL. */
const struct ck_cat_tensor *ck_catalog_find(const struct ck_catalog *c, const char *name);
/* The torch.save weight called name (pt_weights), or NULL. */
const struct ck_cat_tensor *ck_catalog_find_pt(const struct ck_catalog *c, const char *name);
/* The optimizer state of parameter param, or NULL. */
const struct ck_cat_state *ck_catalog_find_state(const struct ck_catalog *c, const char *param);
/* Reads len bytes at off of e's bytes (its pieces in order, if any), as
 * ck_vsource_read does: 0, -EINVAL (past its end), or -EIO. */
int ck_cat_read(struct ck_view *v, const struct ck_cat_tensor *e, void *buf, size_t len, uint64_t off);
/* The block number of a layer name "layers.N", or -1. */
long ck_layer_block(const char *layer);
/* name with its block number from renumbered to: the first dotted
 * "layers.N" (or layer.N, h.N, blocks.N, block.N: the built-in numbered
 * blocks) with N == from.  0, -ENOENT (no such block in name), -ENOSPC. */
int ck_block_rename(const char *name, long from, long to, char *out, size_t size);

/* ---- Comparing tensors (ckptctl diff, the layers view) ---- */

enum ck_diff_status {
	CK_DIFF_IDENTICAL,          /* same bytes */
	CK_DIFF_CHANGED,            /* same dtype and shape, other bytes */
	CK_DIFF_ONLY_A,
	CK_DIFF_ONLY_B,
	CK_DIFF_RETYPED,            /* dtype or shape changed */
};

struct ck_diff_tensor {
	const char *name;
	const char *layer;
	enum ck_diff_status status;
	const struct ck_cat_tensor *a, *b;
	int measured;               /* CHANGED of a floating-point dtype: l2 is set */
	struct ck_l2 l2;            /* prev = a, cur = b */
};

/* Compares a tensor of A with one of B: identical when they are the same
 * bytes of the same file version, else both are read (chunk bytes at a
 * time) and compared, and measured when of a floating-point dtype.  Sets
 * out->status (CHANGED, IDENTICAL or RETYPED) and out->l2.  0 or -EIO. */
int ck_diff_pair(struct ck_view *v, const struct ck_cat_tensor *a, const struct ck_cat_tensor *b, size_t chunk,
		 struct ck_diff_tensor *out);

/* Every tensor of a and b by name (weights and moments), in a's order and
 * then b's tensors that a lacks.  *out is allocated.  0 or -errno. */
int ck_diff_catalogs(struct ck_view *v, const struct ck_catalog *a, const struct ck_catalog *b, size_t chunk,
		     struct ck_diff_tensor **out, size_t *n);

#endif
