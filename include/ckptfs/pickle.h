/* A symbolic pickle VM and a protocol-2 emitter.
 *
 * pk_parse() runs pickle opcodes (protocols 0-5) over untrusted bytes and
 * builds a tree of nodes.  It never imports or calls anything: GLOBAL,
 * STACK_GLOBAL, REDUCE, NEWOBJ(_EX) and BUILD are recorded symbolically.
 * A few shapes are recognised and given a richer view:
 *   - collections.OrderedDict() (REDUCE of the class with an empty tuple)
 *     becomes a PK_DICT whose `cls` is the OrderedDict GLOBAL node; a later
 *     BUILD on it (state_dict's `_metadata` attribute) lands in `state`;
 *   - torch._utils._rebuild_tensor_v2 / _v3 calls whose first argument is a
 *     persistent id ('storage', cls, key, location, numel) become PK_TENSOR
 *     nodes: still the original call (cls = function, args = argument tuple)
 *     plus a struct pk_tensor summary;
 *   - such persistent ids become PK_STORAGE nodes (args = the pid tuple)
 *     that point at one struct pk_storage per distinct key in the document.
 *
 * The tree is a DAG: an object that the pickle referenced twice (BINGET)
 * is one node with two parents, and the emitter writes it once and then
 * BINGETs it, like CPython's pickler.  Nodes are immutable after parsing;
 * new trees (composites) are built from new nodes that point into one or
 * several parsed documents, which must outlive them.
 *
 * pk_emit() writes protocol 2 with only the opcodes torch.load(weights_only=True)
 * accepts (BINFLOAT for floats, which torch >= 2.0 accepts), so the output is
 * weights-only loadable whenever the source tree used only allowed globals.
 *
 * The tree may contain cycles (a list appended to itself through the memo):
 * anything that walks it must remember the nodes on its path (or visited)
 * and bound its depth; a hostile DAG can also make the number of paths
 * explode, so walkers should bound their total work too.
 *
 * Threads: a finished document may be read by many threads at once
 * (accessors, pk_dict_get, pk_key_equal, pk_emit); changing nodes
 * (pk_append, pk_dict_set) needs exclusive access to the nodes changed.
 */
#ifndef CKPTFS_PICKLE_H
#define CKPTFS_PICKLE_H

#include <stddef.h>
#include <stdint.h>
#include "ckptfs/buf.h"
#include "ckptfs/dtype.h"
#include "ckptfs/error.h"

enum pk_kind {
	PK_NONE,
	PK_BOOL,
	PK_INT,       /* fits int64: v.i */
	PK_LONG,      /* larger integer: v.str holds two's complement little-endian bytes */
	PK_FLOAT,     /* v.f */
	PK_STR,       /* unicode text, v.str (UTF-8, not NUL-terminated in the source but terminated here) */
	PK_BYTES,     /* bytes / bytearray payload, v.str */
	PK_TUPLE,     /* items[0..n) */
	PK_LIST,      /* items[0..n) */
	PK_DICT,      /* items alternate key, value: n = 2 * entries; cls = OrderedDict GLOBAL or NULL */
	PK_SET,       /* items */
	PK_FROZENSET, /* items */
	PK_GLOBAL,    /* v.global.module / v.global.name */
	PK_CALL,      /* REDUCE: cls = callable node, args = argument node */
	PK_NEWOBJ,    /* NEWOBJ / NEWOBJ_EX: cls = class node, args = tuple, kwargs = dict or NULL */
	PK_PERSID,    /* persistent id that is not a storage: args = the pid node */
	PK_STORAGE,   /* persistent id ('storage', cls, key, location, numel): v.storage, args = pid tuple */
	PK_TENSOR,    /* _rebuild_tensor_v2/_v3 call: cls, args as PK_CALL, plus v.tensor */
};

/* Flags on PK_CALL / PK_NEWOBJ nodes that received APPEND(S) or SETITEM(S). */
#define PK_F_LISTITEMS 0x1  /* items are appended values */
#define PK_F_DICTITEMS 0x2  /* items alternate key, value */
/* Flag on PK_BYTES: a bytearray (BYTEARRAY8), emitted as bytearray(bytes). */
#define PK_F_BYTEARRAY 0x4

struct pk_node;

struct pk_storage {
	enum ck_dtype dtype;        /* from the storage class; CK_DT_UNTYPED for UntypedStorage */
	char *key;                  /* archive record is "data/<key>" */
	char *location;             /* "cpu", "cuda:0", ... */
	uint64_t numel;             /* elements of the whole storage (bytes when untyped) */
	struct pk_node *cls;        /* storage class GLOBAL node as written in the source */
	size_t index;               /* first-seen order within its document, from 0 */
	void *user;                 /* free for callers */
};

struct pk_tensor {
	struct pk_storage *storage;
	int version;                /* 2 or 3 */
	enum ck_dtype dtype;        /* element type (v3: its dtype argument) */
	uint64_t offset;            /* storage offset in elements */
	int ndim;
	uint64_t shape[CK_MAX_DIMS];
	int64_t stride[CK_MAX_DIMS];
	int requires_grad;
};

struct pk_node {
	enum pk_kind kind;
	uint32_t flags;
	union {
		int b;
		int64_t i;
		double f;
		struct { char *s; size_t len; } str;
		struct { char *module; char *name; } global;
		struct pk_storage *storage;
		struct pk_tensor *tensor;
	} v;
	struct pk_node *cls;
	struct pk_node *args;
	struct pk_node *kwargs;
	struct pk_node **items;
	size_t n;
	size_t cap;
	struct pk_node *state;      /* BUILD argument or NULL */
};

struct pk_limits {
	size_t max_depth;   /* nesting of containers while parsing and emitting (default 1000) */
	size_t max_nodes;   /* nodes a document may create (default 50,000,000) */
	size_t max_memo;    /* highest memo index (default 100,000,000) */
};

struct pk_doc;

/* Parses a pickle.  lim may be NULL for defaults.  On failure returns
 * -EINVAL (malformed / limit hit) or -ENOMEM and fills err with
 * "pickle: <OPCODE> at offset <n>: <reason>".  Parsing stops at STOP, as
 * pickle.load() does: bytes after it are not looked at (pk_doc_length).
 *
 * What the tree promises:
 *   - no path of nodes is longer than max_depth containers (cycles, which a
 *     pickle can make through the memo, are not followed twice);
 *   - dicts (and sets) hold each key once, compared by value as Python
 *     does for str/bytes/int/bool/float/None/tuple keys (equal int and
 *     float keys are one key; a big int never equals a float here);
 *   - a PK_TENSOR's view (offset, shape, stride) lies inside its storage
 *     (numel * element size), and every size fits in uint64; a rebuild
 *     call that does not satisfy this stays a plain PK_CALL;
 *   - storage keys are 1..128 printable ASCII bytes without '/', '\\', or
 *     spaces (otherwise the persistent id stays a PK_PERSID);
 *   - GLOBAL module and name strings contain no NUL byte.
 * Text opcodes that name a Python 2 str (STRING, BINSTRING...) give PK_STR
 * when the bytes are UTF-8 (torch.load decodes them so) and PK_BYTES
 * otherwise.  INST and OBJ become PK_CALL (cls, args).  EXT1/2/4 and
 * out-of-band buffers (NEXT_BUFFER, READONLY_BUFFER) are refused. */
int pk_parse(const uint8_t *data, size_t len, const struct pk_limits *lim,
	     struct pk_doc **out, struct ck_error *err);
/* An empty document to allocate new nodes in (for composites). */
struct pk_doc *pk_doc_new(void);
void pk_doc_free(struct pk_doc *doc);
struct pk_node *pk_doc_root(const struct pk_doc *doc);
/* The version of the PROTO opcode, 0 when the pickle has none. */
int pk_doc_protocol(const struct pk_doc *doc);
/* Bytes parsed, up to and including STOP (pickles can be concatenated). */
size_t pk_doc_length(const struct pk_doc *doc);
size_t pk_doc_nstorages(const struct pk_doc *doc);
struct pk_storage *pk_doc_storage(const struct pk_doc *doc, size_t i);
/* Every distinct (module, name) GLOBAL the document referenced, in first-use order. */
size_t pk_doc_nglobals(const struct pk_doc *doc);
const struct pk_node *pk_doc_global(const struct pk_doc *doc, size_t i);
/* True for globals no checkpoint loader should ever call (os.system, eval,
 * subprocess.*, builtins.exec/eval/getattr/__import__, posix/nt/sys ...). */
int pk_global_is_dangerous(const char *module, const char *name);
/* Whether the document calls anything dangerous: 1 and *g set to the first
 * dangerous GLOBAL, else 0.  Like checking every global with
 * pk_global_is_dangerous(), except that builtins.getattr is allowed when its
 * every use is an Enum-member lookup getattr(HarmlessClass, 'NAME') (how
 * Python >= 3.11 pickles Enum members, e.g. DeepSpeed's ZeroStageEnum). */
int pk_doc_dangerous_global(const struct pk_doc *doc, const struct pk_node **g);

/* Node constructors for building new trees; nodes live until doc is freed.
 * They return NULL on allocation failure.  Every node handed to these
 * functions, to pk_dict_get or to pk_emit must come from a constructor or
 * pk_parse (nodes carry private bookkeeping in front of them).  Change dict
 * items through pk_dict_set (it keeps the key index valid; pk_append on a
 * dict is fine but makes the next lookup slower). */
struct pk_node *pk_new(struct pk_doc *doc, enum pk_kind kind);
struct pk_node *pk_new_str(struct pk_doc *doc, const char *s, size_t len);
struct pk_node *pk_new_int(struct pk_doc *doc, int64_t v);
/* The GLOBAL module.name of doc (one node per name, as pk_parse makes them;
 * counted by pk_doc_nglobals).  Neither string may hold a NUL or newline. */
struct pk_node *pk_new_global(struct pk_doc *doc, const char *module, const char *name);
/* A shallow copy of `src` (same children) in doc, to be modified.  The
 * items array is copied; strings and v.tensor / v.storage are shared. */
struct pk_node *pk_clone(struct pk_doc *doc, const struct pk_node *src);
/* Appends to items (0 or -ENOMEM).  seq must have been made in doc (pk_new,
 * pk_clone): parsed nodes are immutable, and new item arrays live in doc. */
int pk_append(struct pk_doc *doc, struct pk_node *seq, struct pk_node *item);
/* dict[key] = value with Python's semantics: an equal key (pk_key_equal)
 * keeps its place and gets the new value.  O(1) (a key index is kept from
 * 8 entries on).  0 or -ENOMEM; dict must have been made in doc. */
int pk_dict_set(struct pk_doc *doc, struct pk_node *dict, struct pk_node *key, struct pk_node *value);

/* A reference to the storage `key` of doc, as torch.save writes it: a
 * PK_STORAGE node whose pid tuple is ('storage', torch.<X>Storage, key,
 * location, numel).  dtype CK_DT_UNTYPED (or one without a legacy storage
 * class) gives torch.UntypedStorage with numel in bytes.  The first call
 * for a key creates doc's pk_storage; later calls share it (and must agree
 * with it).  NULL when out of memory or for an invalid key or dtype. */
struct pk_node *pk_new_storage(struct pk_doc *doc, enum ck_dtype dtype, const char *key,
			       const char *location, uint64_t numel);
/* A tensor as torch.save writes it: _rebuild_tensor_v2(storage, offset,
 * shape, stride, requires_grad, OrderedDict()), or _v3 with the dtype when
 * the storage is untyped (float8 and other new dtypes).  storage is a node
 * from pk_new_storage.  NULL when out of memory or when the view does not
 * fit in the storage. */
struct pk_node *pk_new_tensor(struct pk_doc *doc, struct pk_node *storage, enum ck_dtype dtype,
			      uint64_t offset, int ndim, const uint64_t *shape, const int64_t *stride,
			      int requires_grad);

/* Dict helpers.  Keys compare by value for NONE/BOOL/INT/LONG/FLOAT/STR/BYTES/TUPLE. */
int pk_key_equal(const struct pk_node *a, const struct pk_node *b);
struct pk_node *pk_dict_get(const struct pk_node *dict, const struct pk_node *key);
struct pk_node *pk_dict_get_str(const struct pk_node *dict, const char *key);
/* The tensor a node stands for: a PK_TENSOR, or a
 * torch._utils._rebuild_parameter(_with_state) call wrapping one.  NULL otherwise. */
const struct pk_tensor *pk_as_tensor(const struct pk_node *node);
/* Formats a scalar key for tensor paths: STR as is, INT in decimal, else a short repr.
 * Writes at most size bytes (NUL-terminated); returns 0 or -ENOSPC. */
int pk_key_to_path(const struct pk_node *key, char *out, size_t size);

struct pk_emit_opts {
	/* Key written for each storage; NULL callback (or NULL result) keeps storage->key.
	 * The returned string must stay valid until pk_emit returns. */
	const char *(*storage_key)(void *ctx, const struct pk_storage *st);
	void *ctx;
	size_t max_depth;  /* 0 = default (1000) */
	int protocol;      /* 2 (also for 0), 3, 4 or 5 */
};

/* Appends a pickle of root (PROTO 2 ... STOP, or the protocol opts asks
 * for) to out, as CPython's C pickler writes the objects the tree stands
 * for: same memo
 * (BINPUT on strs, non-empty tuples, lists, dicts, globals and REDUCE /
 * NEWOBJ results, in order; a node met again is BINGET; globals are memoized
 * by name), same batches (1000 items; one item: SETITEM / APPEND), same
 * integer encodings.  So a pickle written by torch.save (protocol 2) comes
 * back byte for byte when keys are kept.  Other protocols' spellings become
 * protocol 2's: STACK_GLOBAL -> GLOBAL, sets -> REDUCE of __builtin__ set /
 * frozenset on a list, bytes -> _codecs.encode(latin-1 text, 'latin1'),
 * bytearray -> __builtin__.bytearray(bytes), NEWOBJ_EX ->
 * copyreg.__newobj_ex__(cls, args, kwargs).  A PK_STORAGE is written as its
 * pid tuple + BINPERSID, with the key from opts->storage_key when that
 * returns a different key (one string per storage, BINGET for later views).
 * Recursive objects are written as CPython writes them (POP / POP_MARK +
 * BINGET for a tuple reached inside itself).  Ints beyond 255 bytes use
 * LONG4.  On failure (-EINVAL: an incomplete node, a global name with a
 * newline, a tuple that contains itself, nesting deeper than max_depth;
 * -ENOMEM) out is left as it was and err says why.
 *
 * Protocols 3 to 5 are written as CPython writes them: bytes as
 * (SHORT_)BINBYTES, globals of the builtins module as "builtins"; from 4
 * on, strs up to 255 bytes as SHORT_BINUNICODE, MEMOIZE instead of
 * BINPUT, STACK_GLOBAL (module and name strs memoized by value), sets as
 * EMPTY_SET + ADDITEMS, frozensets as FROZENSET, NEWOBJ_EX as itself, and
 * 64 KiB frames (FRAME) cut where CPython cuts them: before an object once
 * the frame holds 64 KiB, a str or bytes of 64 KiB or more outside any
 * frame; from 5 on, bytearrays as BYTEARRAY8.  The memo of objects is the
 * tree's, as for protocol 2, so a str object shared by CPython but
 * parsed as two nodes (or the reverse) is the only way the bytes differ. */
int pk_emit(const struct pk_node *root, const struct pk_emit_opts *opts,
	    struct ck_buf *out, struct ck_error *err);

#endif
