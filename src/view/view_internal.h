/* Internal structures of the view (src/view/).  Not a public header. */
#ifndef CKPTFS_VIEW_INTERNAL_H
#define CKPTFS_VIEW_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ckptfs/dcp.h"
#include "ckptfs/packstore.h"
#include "ckptfs/pickle.h"
#include "ckptfs/safetensors.h"
#include "ckptfs/store.h"
#include "ckptfs/torchzip.h"
#include "ckptfs/view.h"

/* A byte range of a physical file whose content hash the store recorded:
 * checked once, on first read, when verification is on. */
struct phys_range {
	uint64_t offset, length;
	uint64_t hash_lo, hash_hi;
	char *key;                  /* storage key or tensor name, for error messages */
	atomic_int state;           /* RANGE_* */
};

enum { RANGE_UNCHECKED = 0, RANGE_GOOD = 1, RANGE_BAD = -1, RANGE_HASHING = 2 };

/* One physical (imported) file, shared by every composite that uses it. */
struct phys_file {
	struct ck_file_info info;
	struct view_ckpt *ckpt;     /* the checkpoint it belongs to */
	int fd;                     /* opened lazily, -1 until then */
	int checked;                /* identity verified at least once */
	struct phys_range *ranges;  /* sorted by offset */
	size_t nranges;
	struct phys_range **ranges_by_key;   /* the same, sorted by key */
	int ranges_loaded;
	struct ck_tensor_info *tinfo;   /* the index's tensor records, sorted by name */
	size_t ntinfo;
	int tinfo_loaded;
	/* Parsed content, loaded lazily (under parse_lock: versions of a
	 * composite parse on several threads at once) */
	pthread_mutex_t parse_lock;
	struct tz_archive ar;
	struct pk_doc *doc;
	struct st_file st;
	const struct st_tensor **st_by_name;   /* st.tensors sorted by name */
	int parsed;                 /* 0 not yet, 1 ok, -errno failed */
	int reclaimed;              /* a deleted checkpoint's file the index dropped: no version any more */
	/* Packed (packed.c): once the index says so, every read goes
	 * through the pack and the raw file may be gone. */
	atomic_int packed_known;
	_Atomic(struct ck_vpacked *) packed;    /* opened on first use */
	/* Coded lossily after this view opened the raw file: its bytes are
	 * no longer the packed form's, so the view keeps reading the raw file
	 * through fd (which holds them even once compaction removed the
	 * file), and a file is never served half exact, half lossy. */
	atomic_int raw_pinned;
	/* Owner, group and mode (owners.c; under the view's lock) */
	struct ck_owner owner;
	int owner_state;            /* 0 not looked at yet, else where owner came from */
};

struct view_ckpt {
	struct ck_ckpt_info info;
	struct view_series *series;
	size_t index;               /* position in the series, ascending step */
	struct phys_file **files;   /* its own physical files */
	size_t nfiles;
	struct ck_vnode *node;      /* its directory (or file) in the series directory */
};

struct view_series {
	char *name;
	struct view_ckpt **ckpts;   /* ascending step; only ever appended to */
	size_t nckpts;
	struct ck_vnode *dir;
};

/* A source of a composite file: the same relative path in one checkpoint. */
struct file_version {
	struct phys_file *pf;
};

struct ck_vnode {
	uint64_t ino;
	char *name;
	int is_dir;
	struct ck_vnode *parent;
	struct ck_vnode **children; /* sorted by name */
	size_t nchildren, capchildren;
	struct view_ckpt *ckpt;     /* checkpoint the node is in (NULL above) */
	const char *relpath;        /* path inside the checkpoint (files) */
	struct file_version *versions;  /* newest first */
	size_t nversions;
	struct ck_vfile *vfile;     /* built composite, cached (under view->lock) */
	int build_error;
	int64_t mtime_ns;
	struct view_series *series; /* series directories: theirs */
	struct ck_owner owner;      /* directories: what they show (owners.c; view->lock) */
	int owner_known;
	char *own_relpath;          /* relpath when the view made it up (older DCP data files) */
	struct ck_vnode *link_of;   /* a hard link of another node of its checkpoint: that node */
	uint32_t nlinks;            /* the node its links point to: how many names it has */
	struct ck_vnode *dcp_meta;  /* a DCP save's directory of older data files
				     * (CK_VIEW_DCP_FROM): the .metadata node beside it */
	atomic_int dcp_pending;     /* ... whose children are not made yet (view_dcp_populate) */
};

/* The directory of a DCP save that shows the data files of older saves
 * its merged .metadata draws on: <dir>/.ckptfs-from/<checkpoint>/<file>. */
#define CK_VIEW_DCP_FROM ".ckptfs-from"

struct ck_view {
	struct ck_store *store;
	struct ck_view_opts opts;
	struct view_series **series;
	size_t nseries;
	struct view_series **retired;   /* reloaded series, kept for open files until close */
	size_t nretired;
	struct phys_file **phys;    /* every imported file */
	size_t nphys;
	struct ck_vnode **nodes;    /* by ino - 1 */
	size_t nnodes, capnodes;
	pthread_rwlock_t ns_lock;   /* the namespace: nodes, children, series (refresh writes) */
	uint64_t ns_changes;        /* grows with every change of a listing (ns_lock) */
	pthread_mutex_t lock;       /* phys_file caches (short sections) */
	pthread_mutex_t build_lock; /* composite builds (recursive: an index builds its shards) */
	pthread_mutex_t reid_lock;  /* files read again after their identity changed (physfile.c) */
	pthread_mutex_t verify_lock;   /* with verify_done: readers waiting for a range's hash */
	pthread_cond_t verify_done;
	int64_t open_time_ns;
	struct ck_vnode **hidden;   /* checkpoints refreshes hid, until ck_view_drain_hidden (ns_lock) */
	size_t nhidden;
	struct ck_chunk_cache *cache;   /* decoded chunks of packed files */
	struct verify_ahead *ahead;     /* checks ranges ahead of readers; NULL with verify=none */
};

/* An extent of a virtual file. */
struct vext {
	uint64_t off, len;
	const uint8_t *mem;         /* generated bytes, or NULL */
	struct phys_file *pf;       /* physical bytes at pf_off */
	uint64_t pf_off;
	struct phys_range *range;   /* to verify before serving, or NULL */
};

/* Where a tensor of a composite comes from (provenance). */
struct vtensor_src {
	char *name;
	enum ck_dtype dtype;
	int ndim;
	uint64_t shape[CK_MAX_DIMS];
	struct phys_file *pf;
	uint64_t offset, nbytes;
	int contiguous;             /* the bytes are the tensor in C order */
	const struct pk_node *node; /* torch: its node in the source version's pickle */
};

/* An older save's data file that a merged DCP .metadata names. */
struct vdcp_from {
	struct phys_file *pf;
	char *path;                 /* under CK_VIEW_DCP_FROM: "<checkpoint>/<file>" */
};

struct ck_vfile {
	atomic_int refs;
	struct ck_view *view;
	uint64_t size;
	struct vext *ext;
	size_t next, capext;
	struct ck_buf mem;          /* generated bytes; ext[].mem points inside once frozen */
	struct phys_file **srcs;    /* distinct physical files used */
	size_t nsrcs;
	struct vtensor_src *tensors;
	size_t ntensors, captensors;
	int tensors_pending;        /* a DCP .metadata served as saved: its items not listed yet
				     * (view_node_tensors) */
	const char *kind;           /* "torch", "safetensors", "safetensors-index", "dcp-metadata", "file" */
	int synthesized;            /* 0: served as the physical file is */
	int own_order;              /* built: packed bytes are decoded ahead in this file's order */
	struct pk_doc *tree_doc;    /* torch: nodes of the merged tree (NULL: it is the newest's) */
	const struct pk_node *tree; /* torch: the state tree the file serves */
	char *note;                 /* why it is not merged as far as it could be, or NULL */
	struct vdcp_from *from;     /* DCP .metadata: the older data files it names */
	size_t nfrom, capfrom;
	_Atomic uint64_t ahead_upto;    /* ranges before this offset were queued for checking */
};

/* verify_ahead.c: a thread checking the hashed ranges ahead of a
 * sequential reader (verify=first), started when first needed.
 * verify_ahead_post: the reader is at extent i of f: queue the unchecked
 * ranges of the window after it (cheap when nothing is to be done). */
int verify_ahead_init(struct ck_view *v);
void verify_ahead_free(struct ck_view *v);
void verify_ahead_post(struct ck_vfile *f, size_t i);

/* physfile.c */
int phys_open_fd(struct ck_view *v, struct phys_file *pf);
int phys_check(struct ck_view *v, struct phys_file *pf);
int phys_load_ranges(struct ck_view *v, struct phys_file *pf);
/* The loaded range of key, or NULL (O(log n)). */
struct phys_range *phys_find_range(struct phys_file *pf, const char *key);
int phys_parse(struct ck_view *v, struct phys_file *pf);
int phys_read(struct phys_file *pf, void *buf, size_t len, uint64_t off);
/* The file read as a DCP .metadata (not cached: a save of 80,000 chunks
 * parses into some 300 MB): 0 and *out (free with ck_dcp_free), -EINVAL
 * (not a DCP .metadata, logged) or -errno. */
int phys_read_dcp(struct ck_view *v, struct phys_file *pf, struct ck_dcp_meta **out);
int phys_verify_range(struct ck_view *v, struct phys_file *pf, struct phys_range *r);
/* As phys_verify_range, hashing bytes (r->length of them: the range as the
 * caller just read it) instead of reading the file again, so that what the
 * caller goes on to serve is exactly what was checked.  A range checked
 * already, or being checked by another thread, keeps that verdict. */
int phys_verify_bytes(struct ck_view *v, struct phys_file *pf, struct phys_range *r, const void *bytes);
/* phys_verify_range of r[0..n), on several threads when they are large
 * (a whole file before the kernel reads it itself).  0 or the first -errno. */
int phys_verify_ranges(struct ck_view *v, struct phys_file *pf, struct phys_range **r, size_t n);
/* Layer the index recorded for a tensor of pf (import knows more than the
 * name, e.g. an optimizer's param_names), or NULL. */
const char *phys_tensor_layer(struct ck_view *v, struct phys_file *pf, const char *name);
void phys_free(struct phys_file *pf);

/* dcp.c: DCP saves.  dcp_is_metadata: whether n is a save's .metadata (a
 * file of that name, kind other: the import checked it).
 * dcp_build_metadata: its composite from the versions pfs[0..np) (newest
 * first): the saves of the series merged (ck_dcp_merge), older items'
 * data files listed in f->from, or, with no older save, the newest as it
 * is without reading it (f->tensors_pending).  dcp_list_items: lists the
 * items of such a composite (call under build_lock). */
int dcp_is_metadata(const struct ck_vnode *n);
int dcp_build_metadata(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, size_t np,
		       struct ck_vfile *f);
int dcp_list_items(struct ck_view *v, struct ck_vnode *n, struct ck_vfile *f);
/* view.c: makes the children of a pending CK_VIEW_DCP_FROM directory
 * from its .metadata's composite, once (call without ns_lock): 0, or
 * -errno when the composite cannot be built. */
int view_dcp_populate(struct ck_view *v, struct ck_vnode *from);

/* vfile.c: building */
struct ck_vfile *vfile_new(const char *kind);
/* Appends generated bytes (copied). */
int vfile_add_mem(struct ck_vfile *f, const void *p, size_t len);
/* Appends a physical range; splits along the file's hashed ranges. */
int vfile_add_phys(struct ck_vfile *f, struct phys_file *pf, uint64_t off, uint64_t len);
int vfile_add_tensor(struct ck_vfile *f, const char *name, enum ck_dtype dt, int ndim,
		     const uint64_t *shape, struct phys_file *pf, uint64_t off, uint64_t nbytes);
/* The last tensor added: its node in a pickle and whether its bytes are
 * contiguous (vfile_add_tensor assumes they are). */
void vfile_tensor_origin(struct ck_vfile *f, const struct pk_node *node, int contiguous);
/* Counts pf among the files the composite draws on without an extent of it
 * (a file a DCP .metadata names): identity-checked on open, kept by gc. */
int vfile_add_src(struct ck_vfile *f, struct phys_file *pf);
/* Resolves mem pointers after all bytes are added. */
int vfile_freeze(struct ck_vfile *f);
void vfile_free(struct ck_vfile *f);

/* merge.c */
/* Merges trees of the versions (newest first) into doc: {**older, **newer}
 * recursively on dicts.  *used_older is set when any older node survives. */
int merge_trees(struct pk_doc *doc, struct pk_node **roots, size_t n, struct pk_node **out,
		int *used_older, struct ck_error *err);

/* composite.c */
int composite_build(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **out);
/* A torch.save archive of the state tree root (whose storages' user is
 * their phys_file) laid out like layout's records, into f, with its
 * tensors recorded.  what names the file in error messages. */
int composite_torch_file(const char *what, struct phys_file *layout, const struct pk_node *root,
			 struct ck_vfile *f);

/* index.c: *.safetensors.index.json regenerated from the composite shards */
int composite_build_index(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, size_t np,
			  struct ck_vfile *f);
/* view.c */
int view_node_vfile(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **out);
/* view_node_vfile, with every tensor of the composite listed (DCP saves
 * served as saved list theirs on first use). */
int view_node_tensors(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **out);

/* A growable array of nodes (refs.c, warm.c); zero-initialized is empty. */
struct node_list {
	struct ck_vnode **n;
	size_t len, cap;
};
/* Appends n: 0 or -ENOMEM. */
int node_list_add(struct node_list *l, struct ck_vnode *n);
void node_list_free(struct node_list *l);
/* Appends the file nodes under n made so far (n itself when it is a
 * file), up to max in l; with from, the CK_VIEW_DCP_FROM directories go
 * there instead of their files (their children may not be made yet).
 * Callers hold ns_lock.  0 or -ENOMEM. */
int view_collect_files(struct ck_vnode *n, struct node_list *l, struct node_list *from, size_t max);

/* view.c: takes n out of its parent's children (lookups and listings no
 * longer find it; its inode stays valid).  Callers hold ns_lock for writing. */
int view_detach(struct ck_vnode *n);

/* packed.c: physical files the compactor moved into packs */
/* Creates the chunk cache and asks the index which files are packed. */
int packed_setup(struct ck_view *v);
/* Frees the chunk cache, once every packed file is closed. */
void packed_teardown(struct ck_view *v);
/* Asks the index again for every file not known packed (a refresh). */
int packed_probe_all(struct ck_view *v);
/* The packed form of pf, opened on first use: 1 with *out (may be NULL),
 * 0 when pf is read from its raw file, or -EIO (logged). */
int packed_get(struct ck_view *v, struct phys_file *pf, struct ck_vpacked **out);
/* As packed_get, after asking the index about pf first (its raw file
 * failed its identity check: compaction may have removed it). */
int packed_recheck(struct ck_view *v, struct phys_file *pf);
/* len bytes at off of the file: 0 or -EIO (logged).  ahead: a reader of
 * the contents (not a parser), whose forward reads have the following
 * chunks decoded ahead. */
int packed_read(struct ck_vpacked *p, void *buf, size_t len, uint64_t off, int ahead);
/* Has r[0..n), the ranges a reader takes next in that order, decoded ahead
 * (replacing the last hint). */
void packed_hint(struct ck_vpacked *p, const struct ck_byte_range *r, size_t n);
/* As packed_read for a container parser, which reads headers only: the
 * bytes of the storage ranges r[0..n) (sorted) read as zeros, undecoded. */
int packed_read_headers(struct ck_vpacked *p, const struct phys_range *r, size_t n, void *buf,
			size_t len, uint64_t off);
void packed_free(struct ck_vpacked *p);

/* view.c: whether pf is a file reclaimed from a deleted checkpoint (its
 * file is gone and the index no longer holds it), which no composite drew
 * from: a build skips it even before a refresh prunes it. */
int view_version_reclaimed(struct ck_view *v, struct phys_file *pf);

/* owners.c: owners and modes (docs/design.md, "Owners and modes").
 * phys_owner: pf's owner (looked at once, then cached); phys_owner_update:
 * pf's owner now, from a stat of the file that is still the imported one;
 * view_node_owner: what node n shows (a file's composite is built);
 * view_owner_forget: directory n looks again at what it is made of. */
void phys_owner(struct ck_view *v, struct phys_file *pf, struct ck_owner *out);
void phys_owner_update(struct ck_view *v, struct phys_file *pf, const struct ck_owner *o);
void view_node_owner(struct ck_view *v, struct ck_vnode *n, struct ck_owner *out);
void view_owner_forget(struct ck_view *v, struct ck_vnode *n);

/* provenance.c */
int provenance_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out);
/* The user.ckptfs.lossy xattr: -ENODATA for a file served exactly. */
int lossy_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out);

#endif
