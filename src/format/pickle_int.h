/* Internals shared by the files of the pickle module (not installed).
 *
 * Every node lives in its document's arena behind a small private header
 * (struct pk_inode).  Nodes are only ever made by pk_new() and friends, so
 * turning a node pointer back into its header is always valid.
 */
#ifndef CKPTFS_PICKLE_INT_H
#define CKPTFS_PICKLE_INT_H

#include <stdatomic.h>
#include <stdint.h>
#include "ckptfs/pickle.h"

#define PK_DEFAULT_DEPTH  1000
#define PK_DEFAULT_NODES  50000000
#define PK_DEFAULT_MEMO   100000000

/* An open-addressing table of (hash, position) pairs; positions index an
 * array that the owner keeps.  Lookups compare candidates through a callback. */
struct pk_hslot {
	uint64_t hash;
	uint32_t pos1;              /* position + 1; 0 = empty */
};

struct pk_htab {
	struct pk_hslot *slots;
	size_t mask;                /* capacity - 1; capacity 0 when slots == NULL */
	size_t count;
};

typedef int (*pk_htab_eq_fn)(const void *ctx, uint32_t pos);

/* Position of the entry equal to ctx, or -1. */
long pk_htab_find(const struct pk_htab *t, uint64_t hash, pk_htab_eq_fn eq, const void *ctx);
/* Adds a position that is known to be absent; 0 or -ENOMEM. */
int pk_htab_add(struct pk_htab *t, uint64_t hash, uint32_t pos);
void pk_htab_free(struct pk_htab *t);

/* SipHash-1-3 under a random per-process key (so hostile keys cannot
 * flood a table; the key is drawn from the kernel on first use). */
uint64_t pk_hash_bytes(const void *data, size_t len);

/* The unpickler's memo (pickle_memo.c). */
struct pk_memo_entry {
	uint64_t idx;
	struct pk_node *node;
};

struct pk_memo {
	struct pk_node **dense;     /* indices below ndense */
	size_t ndense;
	struct pk_memo_entry *sparse;
	size_t nsparse, sparse_cap;
	struct pk_htab sparse_tab;
	size_t len;                 /* distinct indices, as len(memo) in CPython */
};

struct pk_node *pk_memo_get(const struct pk_memo *m, uint64_t idx);
/* 0 or -ENOMEM. */
int pk_memo_put(struct pk_memo *m, uint64_t idx, struct pk_node *n);
void pk_memo_free(struct pk_memo *m);

/* Index of a dict's keys (or a set's items) by value, so that inserting
 * keeps Python's semantics (an equal key replaces the value) in O(1).  It
 * is valid while items/n still match what it indexed. */
struct pk_index {
	struct pk_htab tab;
	struct pk_node **items;
	size_t n;
	size_t stride;              /* 2 for dicts (key, value), 1 for sets */
	struct pk_index *next;      /* all indexes of a document, to free them */
};

struct pk_inode {
	struct pk_node node;        /* first: a node pointer is an inode pointer */
	uint32_t height;            /* container levels at and below (parse only) */
	uint8_t embedded;           /* has been made the child of another node */
	uint8_t color;              /* scratch for graph walks over a document */
	struct pk_index *index;     /* dicts and sets only, or NULL */
	_Atomic uint64_t hash;      /* cached key hash, 0 = not computed yet */
};

static inline struct pk_inode *pk_inode_of(const struct pk_node *n)
{
	return (struct pk_inode *)(uintptr_t)n;
}

struct pk_chunk;

struct pk_doc {
	struct pk_chunk *chunks;    /* arena: nodes, strings, item arrays */
	size_t nnodes;
	struct pk_node *root;
	int protocol;
	size_t length;              /* bytes up to and including STOP */
	struct pk_index *indexes;

	struct pk_node **globals;   /* interned GLOBAL nodes, first-use order */
	size_t nglobals, globals_cap;
	struct pk_htab globals_tab;

	/* builtins.getattr: how often it was pushed, and how many of those were
	 * consumed by an enum-member lookup getattr(SafeClass, 'NAME') (what
	 * Python >= 3.11 pickles an Enum member as).  Equal counts: harmless. */
	size_t getattr_pushes, getattr_member_calls;

	struct pk_storage **storages;
	struct pk_node **storage_pids;  /* the first pid tuple of each storage */
	size_t nstorages, storages_cap;
	struct pk_htab storages_tab;
};

void *pk_alloc(struct pk_doc *doc, size_t size);
char *pk_strndup(struct pk_doc *doc, const void *s, size_t len);
/* Makes room for `extra` more items (0 or -ENOMEM). */
int pk_items_reserve(struct pk_doc *doc, struct pk_node *seq, size_t extra);

/* Interned GLOBAL node for (module, name); NULL on allocation failure. */
struct pk_node *pk_doc_intern_global(struct pk_doc *doc, const char *module, size_t mlen,
				     const char *name, size_t nlen);
/* Position of the storage `key` in doc, or -1. */
long pk_doc_find_storage(const struct pk_doc *doc, const char *key, size_t klen);
/* The document's storage for `key`, created from the other fields when the
 * key is new (first use wins, as in torch.load); NULL on allocation failure. */
struct pk_storage *pk_doc_storage_for(struct pk_doc *doc, const char *key, size_t klen,
				      struct pk_node *cls, enum ck_dtype dtype,
				      const char *location, size_t llen, uint64_t numel,
				      struct pk_node *pid);

/* Hash of a key consistent with pk_key_equal(); cached in the nodes.
 * 0 or -ENOMEM (only for tuple keys of absurd nesting). */
int pk_key_hash(const struct pk_node *key, uint64_t *out);

/* Python-style dict insert (equal key: replace the value) and set add. */
int pk_dict_put(struct pk_doc *doc, struct pk_node *dict, struct pk_node *key, struct pk_node *value);
int pk_set_add(struct pk_doc *doc, struct pk_node *set, struct pk_node *item);

/* Recognisers for the torch shapes described in pickle.h: they turn a
 * PK_PERSID into a PK_STORAGE, a PK_CALL into a PK_TENSOR, when the node
 * matches exactly, and leave it alone otherwise.  0, or -1 when out of memory. */
int pk_torch_storage(struct pk_doc *doc, struct pk_node *persid);
int pk_torch_tensor(struct pk_doc *doc, struct pk_node *call);
int pk_global_is(const struct pk_node *n, const char *module, const char *name);
/* n is GLOBAL builtins.getattr (or __builtin__.getattr). */
int pk_is_getattr(const struct pk_node *n);
/* args of a getattr call look up a public attribute of a harmless class. */
int pk_getattr_is_member_lookup(const struct pk_node *args);

/* Height of a node for depth limits: 0 for nodes without children,
 * else 1 + the highest child. */
int pk_node_has_children(const struct pk_node *n);
/* Measures the heights below root exactly (edges back into the current
 * path, i.e. cycles, add nothing), iteratively.  0, -EINVAL when some
 * node is higher than max_depth, or -ENOMEM.  Uses the inodes' scratch. */
int pk_tree_check_height(struct pk_node *root, size_t max_depth);

/* Numbers */
/* Minimal two's-complement little-endian bytes of v into out[8]; returns the count. */
size_t pk_int64_to_bytes(int64_t v, uint8_t out[8]);
/* v from little-endian two's-complement bytes if it fits int64 (returns 1), else 0. */
int pk_bytes_to_int64(const uint8_t *p, size_t len, int64_t *v);
/* Length of the minimal encoding of the same value. */
size_t pk_bytes_minimal_len(const uint8_t *p, size_t len);

/* Text arguments of protocol-0 opcodes.  Each returns 0, or -1 with a
 * reason in *why; results go to out (reset first). */
struct ck_buf;
/* Decimal integer text (sign, digits, surrounding blanks) as minimal
 * two's-complement little-endian bytes. */
int pk_text_integer(const char *s, size_t len, struct ck_buf *out, const char **why);
int pk_text_float(const char *s, size_t len, double *out, const char **why);
/* The quoted repr of a Python 2 str with its escapes (codecs.escape_decode). */
int pk_text_string(const char *s, size_t len, struct ck_buf *out, const char **why);
/* raw-unicode-escape text as UTF-8 (lone surrogates as in 'surrogatepass'). */
int pk_text_unicode(const char *s, size_t len, struct ck_buf *out, const char **why);
int pk_utf8_valid(const uint8_t *s, size_t len);

#endif
