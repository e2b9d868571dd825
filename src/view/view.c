/* The namespace of a mounted store: root -> series -> checkpoints -> files.
 *
 * Built once from the index when the view opens (cheap: names and file
 * records only).  A checkpoint directory shows the union of the relative
 * paths of its own files and of every earlier checkpoint of its series;
 * each file node keeps its versions newest first, and its composite is
 * built on first use (composite.c) and cached.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <time.h>

#include "ckptfs/buf.h"
#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "ckptfs/str.h"
#include "view_internal.h"

/* --- building ------------------------------------------------------------- */

static struct ck_vnode *node_new(struct ck_view *v, struct ck_vnode *parent, const char *name,
				 size_t namelen, int is_dir)
{
	struct ck_vnode *n;

	if (v->nnodes == v->capnodes) {
		struct ck_vnode **p = ck_grow(v->nodes, &v->capnodes, sizeof(*p), 256);

		if (!p)
			return NULL;
		v->nodes = p;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->name = strndup(name, namelen);
	if (!n->name) {
		free(n);
		return NULL;
	}
	n->is_dir = is_dir;
	n->parent = parent;
	n->ino = v->nnodes + 1;
	n->mtime_ns = v->open_time_ns;
	v->nodes[v->nnodes++] = n;
	if (parent) {
		if (parent->nchildren == parent->capchildren) {
			struct ck_vnode **c = ck_grow(parent->children, &parent->capchildren, sizeof(*c), 8);

			if (!c)
				return NULL;  /* n stays owned by v->nodes */
			parent->children = c;
		}
		parent->children[parent->nchildren++] = n;
	}
	return n;
}

static struct ck_vnode *child_named(struct ck_vnode *dir, const char *name, size_t len)
{
	for (size_t i = 0; i < dir->nchildren; i++)
		if (!strncmp(dir->children[i]->name, name, len) && !dir->children[i]->name[len])
			return dir->children[i];
	return NULL;
}

int view_detach(struct ck_vnode *n)
{
	struct ck_vnode *p = n->parent;

	for (size_t i = 0; p && i < p->nchildren; i++) {
		if (p->children[i] == n) {
			memmove(&p->children[i], &p->children[i + 1], (p->nchildren - i - 1) * sizeof(*p->children));
			p->nchildren--;
			return 0;
		}
	}
	return -ENOENT;
}

static int add_version(struct ck_vnode *n, struct phys_file *pf)
{
	struct file_version *fv = realloc(n->versions, (n->nversions + 1) * sizeof(*fv));

	if (!fv)
		return -ENOMEM;
	n->versions = fv;
	n->versions[n->nversions++].pf = pf;
	if (n->nversions == 1)
		n->mtime_ns = pf->info.mtime_ns;
	return 0;
}

/* Places pf (a file of an earlier or the same checkpoint) under the
 * checkpoint directory node at its relative path; the first placement of a
 * path is the newest version (*placed, when it is pf's node).  A path that
 * is a directory in a newer checkpoint and a file in an older one (or the
 * reverse) keeps the newer.  An empty directory (CK_FILE_DIR) is a
 * directory node with no children of its own. */
static int place_file(struct ck_view *v, struct ck_vnode *ckdir, struct view_ckpt *ck, struct phys_file *pf,
		      struct ck_vnode **placed)
{
	const char *p = pf->info.relpath;
	int dir_entry = pf->info.kind == CK_FILE_DIR;
	struct ck_vnode *dir = ckdir, *n;

	*placed = NULL;
	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		if (!len) {
			if (!slash)
				return 0;
			p = slash + 1;
			continue;
		}
		n = child_named(dir, p, len);
		if (!slash && !dir_entry) {
			if (!n) {
				n = node_new(v, dir, p, len, 0);
				if (!n)
					return -ENOMEM;
				n->ckpt = ck;
				n->relpath = pf->info.relpath;
			} else if (n->is_dir) {
				return 0;
			}
			if (pf->info.mtime_ns > ckdir->mtime_ns || ckdir->mtime_ns == v->open_time_ns)
				ckdir->mtime_ns = pf->info.mtime_ns;
			if (!n->nversions)
				*placed = n;
			return add_version(n, pf);
		}
		if (!n) {
			n = node_new(v, dir, p, len, 1);
			if (!n)
				return -ENOMEM;
			n->ckpt = ck;
			if (!slash)
				n->mtime_ns = pf->info.mtime_ns;
		} else if (!n->is_dir) {
			return 0;
		}
		if (!slash)
			return 0;
		dir = n;
		p = slash + 1;
	}
}

static int name_cmp(const void *a, const void *b)
{
	const struct ck_vnode *x = *(struct ck_vnode *const *)a, *y = *(struct ck_vnode *const *)b;

	return strcmp(x->name, y->name);
}

/* A new checkpoint of series s, with its files; appended to s->ckpts. */
static int add_checkpoint(struct ck_view *v, struct view_series *s, struct ck_ckpt_info *info)
{
	struct ck_file_info *files = NULL;
	struct view_ckpt *ck, **ckpts;
	size_t n = 0;
	int rc;

	ck = calloc(1, sizeof(*ck));
	ckpts = ck ? realloc(s->ckpts, (s->nckpts + 1) * sizeof(*ckpts)) : NULL;
	if (!ckpts) {
		free(ck);
		return -ENOMEM;
	}
	s->ckpts = ckpts;
	/* The view keeps the info's strings for its lifetime. */
	ck->info = *info;
	memset(info, 0, sizeof(*info));
	ck->series = s;
	ck->index = s->nckpts;
	s->ckpts[s->nckpts++] = ck;
	rc = ck_store_list_files(v->store, ck->info.id, &files, &n);
	if (rc)
		return rc;
	ck->files = calloc(n ? n : 1, sizeof(*ck->files));
	if (!ck->files) {
		ck_file_info_free(files, n);
		return -ENOMEM;
	}
	for (size_t j = 0; j < n; j++) {
		struct phys_file *pf = calloc(1, sizeof(*pf)), **all;

		all = pf ? realloc(v->phys, (v->nphys + 1) * sizeof(*all)) : NULL;
		if (!all) {
			free(pf);
			rc = -ENOMEM;
			break;
		}
		v->phys = all;
		pf->info = files[j];   /* strings now belong to the phys_file */
		memset(&files[j], 0, sizeof(files[j]));
		pf->ckpt = ck;
		pf->fd = -1;
		pthread_mutex_init(&pf->parse_lock, NULL);
		v->phys[v->nphys++] = pf;
		ck->files[ck->nfiles++] = pf;
	}
	ck_file_info_free(files, n);
	return rc;
}

/* --- DCP saves -------------------------------------------------------------- */

/* A DCP save's directory shows the data files of one save only: that of
 * the newest checkpoint (at or before the one being built) with a
 * .metadata there.  Older saves' data files share its file names
 * (__0_3.distcp) but not its contents; the merged .metadata reaches the
 * ones it needs under CK_VIEW_DCP_FROM (dcp.c). */
struct dcp_owner {
	const char *dir;            /* the save's directory in the checkpoint, dlen bytes */
	size_t dlen;
	const struct view_ckpt *ck;
};

struct dcp_owners {
	struct dcp_owner *v;
	size_t n, cap;
};

static size_t dir_len(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? (size_t)(slash - rel) : 0;
}

static const struct dcp_owner *owner_of(const struct dcp_owners *o, const char *dir, size_t dlen)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].dlen == dlen && !strncmp(o->v[i].dir, dir, dlen))
			return &o->v[i];
	return NULL;
}

/* The saves of checkpoint ck (newest first) that no newer one already owns. */
static int note_owners(struct dcp_owners *o, const struct view_ckpt *ck)
{
	for (size_t k = 0; k < ck->nfiles; k++) {
		const char *rel = ck->files[k]->info.relpath;
		size_t dlen = dir_len(rel);
		struct dcp_owner *nv;

		if (ck->files[k]->reclaimed || strcmp(rel + dlen + (dlen > 0), CK_DCP_METADATA) ||
		    owner_of(o, rel, dlen))
			continue;
		if (o->n == o->cap) {
			if (!(nv = ck_grow(o->v, &o->cap, sizeof(*nv), 4)))
				return -ENOMEM;
			o->v = nv;
		}
		o->v[o->n++] = (struct dcp_owner){ rel, dlen, ck };
	}
	return 0;
}

static int other_save(const struct dcp_owners *o, const struct view_ckpt *ck, const char *rel)
{
	const struct dcp_owner *w;

	if (!ck_ends_with(rel, CK_DCP_DATA_SUFFIX))
		return 0;
	w = owner_of(o, rel, dir_len(rel));
	return w && w->ck != ck;
}

/* The node at dir (dlen bytes, relative) under the checkpoint node, or NULL. */
static struct ck_vnode *node_at(struct ck_vnode *n, const char *dir, size_t dlen)
{
	while (n && dlen) {
		const char *slash = memchr(dir, '/', dlen);
		size_t len = slash ? (size_t)(slash - dir) : dlen;

		n = len ? child_named(n, dir, len) : n;
		dir += len + (slash != NULL);
		dlen -= len + (slash != NULL);
	}
	return n;
}

/* A pending CK_VIEW_DCP_FROM beside each merged save's .metadata. */
static int add_dcp_from(struct ck_view *v, struct ck_vnode *cn, const struct dcp_owners *o)
{
	for (size_t i = 0; i < o->n; i++) {
		struct ck_vnode *dir = node_at(cn, o->v[i].dir, o->v[i].dlen), *meta, *from;

		meta = dir && dir->is_dir ? child_named(dir, CK_DCP_METADATA, strlen(CK_DCP_METADATA)) : NULL;
		if (!meta || meta->nversions < 2 || !dcp_is_metadata(meta) ||
		    child_named(dir, CK_VIEW_DCP_FROM, strlen(CK_VIEW_DCP_FROM)))
			continue;
		from = node_new(v, dir, CK_VIEW_DCP_FROM, strlen(CK_VIEW_DCP_FROM), 1);
		if (!from)
			return -ENOMEM;
		from->ckpt = cn->ckpt;
		from->dcp_meta = meta;
		atomic_store(&from->dcp_pending, 1);
	}
	return 0;
}

/* Makes path (under from: "<checkpoint>/<file>") a file node of pf. */
static int place_from(struct ck_view *v, struct ck_vnode *from, const char *path, const char *rel,
		      struct phys_file *pf, struct node_list *dirs)
{
	struct ck_vnode *dir = from, *n;
	const char *p = path;

	for (;;) {
		const char *slash = strchr(p, '/');
		size_t len = slash ? (size_t)(slash - p) : strlen(p);

		n = child_named(dir, p, len);
		if (!slash) {
			if (n)
				return 0;
			n = node_new(v, dir, p, len, 0);
			if (!n)
				return -ENOMEM;
			n->ckpt = from->ckpt;
			n->own_relpath = strdup(rel);
			n->relpath = n->own_relpath;
			return n->own_relpath ? add_version(n, pf) : -ENOMEM;
		}
		if (!n) {
			n = node_new(v, dir, p, len, 1);
			if (!n || node_list_add(dirs, n))
				return -ENOMEM;
			n->ckpt = from->ckpt;
		}
		dir = n;
		p = slash + 1;
	}
}

static void sort_children(struct ck_vnode *n);

int view_dcp_populate(struct ck_view *v, struct ck_vnode *from)
{
	struct node_list dirs = { NULL, 0, 0 };
	struct ck_vfile *f;
	int rc;

	rc = view_node_vfile(v, from->dcp_meta, &f);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&v->ns_lock);
	if (atomic_load(&from->dcp_pending)) {
		const char *mrel = from->dcp_meta->relpath ? from->dcp_meta->relpath : "";
		size_t dlen = dir_len(mrel);

		for (size_t i = 0; i < f->nfrom && !rc; i++) {
			size_t n = dlen + 1 + strlen(CK_VIEW_DCP_FROM) + 1 + strlen(f->from[i].path) + 1;
			char *rel = malloc(n);

			if (!rel) {
				rc = -ENOMEM;
				break;
			}
			snprintf(rel, n, "%.*s%s%s/%s", (int)dlen, mrel, dlen ? "/" : "", CK_VIEW_DCP_FROM,
				 f->from[i].path);
			rc = place_from(v, from, f->from[i].path, rel, f->from[i].pf, &dirs);
			free(rel);
		}
		sort_children(from);
		for (size_t i = 0; i < dirs.len; i++)
			sort_children(dirs.n[i]);
		atomic_store(&from->dcp_pending, 0);
		v->ns_changes++;
	}
	pthread_rwlock_unlock(&v->ns_lock);
	node_list_free(&dirs);
	ck_vfile_put(f);
	return rc;
}

/* Before a directory's children are read. */
static int ensure_children(struct ck_view *v, const struct ck_vnode *dir)
{
	if (!atomic_load(&dir->dcp_pending))
		return 0;
	return view_dcp_populate(v, (struct ck_vnode *)dir) ? -EIO : 0;
}

struct named_file {
	const struct phys_file *pf;
	struct ck_vnode *node;
};

static int named_file_cmp(const void *a, const void *b)
{
	const struct phys_file *x = ((const struct named_file *)a)->pf, *y = ((const struct named_file *)b)->pf;

	if (x->info.dev != y->info.dev)
		return x->info.dev < y->info.dev ? -1 : 1;
	return x->info.ino < y->info.ino ? -1 : x->info.ino > y->info.ino;
}

/* Whether node n serves its newest version alone (no older version of its
 * kind merged in): then two such names of one physical file are one file. */
static int served_alone(const struct ck_vnode *n)
{
	enum ck_file_kind kind = n->versions[0].pf->info.kind;

	if (kind != CK_FILE_TORCH && kind != CK_FILE_SAFETENSORS)
		return kind == CK_FILE_OTHER;
	for (size_t i = 1; i < n->nversions; i++)
		if (n->versions[i].pf->info.kind == kind)
			return 0;
	return 1;
}

/* Hard links a trainer made in checkpoint ck (its files with one identity,
 * own[k] the node of ck->files[k] when it is the newest version there)
 * show as one file: every name answers the first one's inode, and it
 * counts them. */
static int link_names(struct view_ckpt *ck, struct ck_vnode **own)
{
	struct named_file *v = calloc(ck->nfiles, sizeof(*v));
	size_t n = 0;

	if (!v)
		return -ENOMEM;
	for (size_t k = 0; k < ck->nfiles; k++)
		if (own[k] && ck->files[k]->info.ino && served_alone(own[k]))
			v[n++] = (struct named_file){ ck->files[k], own[k] };
	if (n > 1)
		qsort(v, n, sizeof(*v), named_file_cmp);
	for (size_t i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && !named_file_cmp(&v[i], &v[j]); j++)
			v[j].node->link_of = v[i].node;
		v[i].node->nlinks = (uint32_t)(j - i);
	}
	free(v);
	return 0;
}

/* The node of checkpoint i: its own files first (the newest versions), then
 * those of every earlier checkpoint of the series (union of paths), except
 * data files of DCP saves other than the one each save directory shows. */
static int add_checkpoint_node(struct ck_view *v, struct view_series *s, size_t i)
{
	struct view_ckpt *ck = s->ckpts[i];
	struct ck_vnode *cn = node_new(v, s->dir, ck->info.name, strlen(ck->info.name), !ck->info.is_file);
	struct dcp_owners owners = { NULL, 0, 0 };
	struct ck_vnode **own = NULL;
	int rc = 0;

	if (!cn)
		return -ENOMEM;
	cn->ckpt = ck;
	ck->node = cn;
	if (!ck->info.is_file && ck->nfiles && !(own = calloc(ck->nfiles, sizeof(*own))))
		return -ENOMEM;
	for (size_t j = i + 1; j-- > 0 && !rc;) {
		const struct view_ckpt *older = s->ckpts[j];

		if (older->info.is_file != ck->info.is_file)
			continue;
		if (!ck->info.is_file)
			rc = note_owners(&owners, older);
		for (size_t k = 0; k < older->nfiles && !rc; k++) {
			if (older->files[k]->reclaimed)
				continue;
			if (ck->info.is_file) {
				if (!older->files[k]->info.relpath[0])
					rc = add_version(cn, older->files[k]);
			} else if (!other_save(&owners, older, older->files[k]->info.relpath)) {
				struct ck_vnode *placed;

				rc = place_file(v, cn, ck, older->files[k], &placed);
				if (j == i)
					own[k] = placed;
			}
		}
	}
	if (!rc && own)
		rc = link_names(ck, own);
	free(own);
	if (!rc)
		rc = add_dcp_from(v, cn, &owners);
	free(owners.v);
	if (cn->nversions)
		cn->relpath = "";
	/* A deleted checkpoint is never listed, but stays a source of newer ones. */
	if (ck->info.deleted)
		view_detach(cn);
	return rc;
}

/* Appends infos[from..n) to the series (their strings move into the view). */
static int append_checkpoints(struct ck_view *v, struct view_series *s, struct ck_ckpt_info *infos,
			      size_t from, size_t n)
{
	size_t first = s->nckpts;
	int rc = 0;

	for (size_t i = from; i < n && !rc; i++)
		rc = add_checkpoint(v, s, &infos[i]);
	for (size_t i = first; i < s->nckpts && !rc; i++)
		rc = add_checkpoint_node(v, s, i);
	return rc;
}

static struct view_series *add_series(struct ck_view *v, const char *name)
{
	struct view_series *s = calloc(1, sizeof(*s)), **all;

	all = s ? realloc(v->series, (v->nseries + 1) * sizeof(*all)) : NULL;
	if (!all) {
		free(s);
		return NULL;
	}
	v->series = all;
	s->name = strdup(name);
	s->dir = s->name ? node_new(v, v->nodes[0], name, strlen(name), 1) : NULL;
	if (!s->dir) {
		free(s->name);
		free(s);
		return NULL;
	}
	s->dir->series = s;
	v->series[v->nseries++] = s;
	return s;
}

static int load_series(struct ck_view *v, const char *name)
{
	struct ck_ckpt_info *infos = NULL;
	struct view_series *s;
	size_t n = 0;
	int rc;

	rc = ck_store_list_checkpoints(v->store, name, &infos, &n);
	if (rc)
		return rc;
	s = add_series(v, name);
	rc = s ? append_checkpoints(v, s, infos, 0, n) : -ENOMEM;
	ck_ckpt_info_free(infos, n);
	return rc;
}

static void sort_children(struct ck_vnode *n)
{
	if (n->nchildren > 1)
		qsort(n->children, n->nchildren, sizeof(struct ck_vnode *), name_cmp);
}

static void view_free_nodes(struct ck_view *v)
{
	for (size_t i = 0; i < v->nnodes; i++) {
		struct ck_vnode *n = v->nodes[i];

		/* Freed whatever its count: the view owns its composites, and a
		 * handle whose FUSE_RELEASE was still queued when the session
		 * ended (releases are asynchronous) will never put its reference.
		 * Nothing can use a composite after the view that describes it. */
		if (n->vfile)
			vfile_free(n->vfile);
		free(n->children);
		free(n->versions);
		free(n->name);
		free(n->own_relpath);
		free(n);
	}
	free(v->nodes);
}

int ck_view_open(const char *store_dir, const struct ck_view_opts *opts, struct ck_view **out,
		 struct ck_error *err)
{
	struct ck_view *v = calloc(1, sizeof(*v));
	pthread_mutexattr_t ma;
	struct ck_vnode *root;
	char **names = NULL;
	size_t nnames = 0;
	int rc;

	if (!v)
		return -ENOMEM;
	pthread_mutex_init(&v->lock, NULL);
	pthread_mutex_init(&v->reid_lock, NULL);
	pthread_rwlock_init(&v->ns_lock, NULL);
	pthread_mutex_init(&v->verify_lock, NULL);
	pthread_cond_init(&v->verify_done, NULL);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&v->build_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	if (opts)
		v->opts = *opts;
	else
		v->opts.verify = CK_VERIFY_FIRST;
	v->open_time_ns = ck_now_ns();
	if (verify_ahead_init(v)) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = ck_store_open(store_dir, 1, &v->store, err);
	if (rc)
		goto fail;
	root = node_new(v, NULL, "", 0, 1);
	if (!root) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = ck_store_list_series(v->store, &names, &nnames);
	if (rc) {
		ck_fail(err, -rc, "%s: cannot list series: %s", store_dir, strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < nnames && !rc; i++)
		rc = load_series(v, names[i]);
	ck_strv_free(names, nnames);
	if (rc) {
		ck_fail(err, -rc, "%s: cannot load the index: %s", store_dir, strerror(-rc));
		goto fail;
	}
	for (size_t i = 0; i < v->nnodes; i++)
		sort_children(v->nodes[i]);
	rc = packed_setup(v);
	if (rc) {
		ck_fail(err, -rc, "%s: cannot read the packed store: %s", store_dir, strerror(-rc));
		goto fail;
	}
	*out = v;
	return 0;
fail:
	ck_view_close(v);
	return rc;
}

static void free_series(struct view_series *sr)
{
	for (size_t j = 0; j < sr->nckpts; j++) {
		struct ck_ckpt_info *ci = &sr->ckpts[j]->info;

		free(ci->series);
		free(ci->name);
		free(ci->src_path);
		free(sr->ckpts[j]->files);
		free(sr->ckpts[j]);
	}
	free(sr->ckpts);
	free(sr->name);
	free(sr);
}

void ck_view_close(struct ck_view *v)
{
	if (!v)
		return;
	verify_ahead_free(v);   /* its thread reads the physical files */
	view_free_nodes(v);
	for (size_t i = 0; i < v->nphys; i++) {
		struct phys_file *pf = v->phys[i];

		/* The strings came from ck_store_list_files(); the array was freed at load. */
		ck_file_info_clear(&pf->info);
		phys_free(pf);
	}
	free(v->phys);
	for (size_t i = 0; i < v->nseries; i++)
		free_series(v->series[i]);
	free(v->series);
	for (size_t i = 0; i < v->nretired; i++)
		free_series(v->retired[i]);
	free(v->retired);
	free(v->hidden);
	packed_teardown(v);   /* after the packed files (phys_free) */
	ck_store_close(v->store);
	pthread_mutex_destroy(&v->lock);
	pthread_mutex_destroy(&v->reid_lock);
	pthread_rwlock_destroy(&v->ns_lock);
	pthread_mutex_destroy(&v->verify_lock);
	pthread_cond_destroy(&v->verify_done);
	pthread_mutex_destroy(&v->build_lock);
	free(v);
}

/* --- lookup ---------------------------------------------------------------- */

const struct ck_vnode *ck_view_root(struct ck_view *v)
{
	const struct ck_vnode *n;

	pthread_rwlock_rdlock(&v->ns_lock);
	n = v->nodes[0];
	pthread_rwlock_unlock(&v->ns_lock);
	return n;
}

const struct ck_vnode *ck_view_node(struct ck_view *v, uint64_t ino)
{
	const struct ck_vnode *n = NULL;

	pthread_rwlock_rdlock(&v->ns_lock);
	if (ino >= 1 && ino <= v->nnodes)
		n = v->nodes[ino - 1];
	pthread_rwlock_unlock(&v->ns_lock);
	return n;
}

const char *ck_vnode_name(const struct ck_vnode *n)
{
	return n->name;
}

/* Callers hold ns_lock. */
static int lookup_locked(const struct ck_vnode *dir, const char *name, const struct ck_vnode **out)
{
	size_t lo = 0, hi;

	if (!dir->is_dir)
		return -ENOTDIR;
	if (!strcmp(name, ".")) {
		*out = dir;
		return 0;
	}
	if (!strcmp(name, "..")) {
		*out = dir->parent ? dir->parent : dir;
		return 0;
	}
	hi = dir->nchildren;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, dir->children[mid]->name);

		if (!c) {
			*out = dir->children[mid];
			return 0;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return -ENOENT;
}

int ck_view_lookup(struct ck_view *v, const struct ck_vnode *dir, const char *name,
		   const struct ck_vnode **out)
{
	int rc = ensure_children(v, dir);

	if (rc)
		return rc;
	pthread_rwlock_rdlock(&v->ns_lock);
	rc = lookup_locked(dir, name, out);
	pthread_rwlock_unlock(&v->ns_lock);
	return rc;
}

int ck_view_child(struct ck_view *v, const struct ck_vnode *dir, size_t i, const struct ck_vnode **out)
{
	int rc = 0;

	if (!dir->is_dir)
		return -ENOTDIR;
	rc = ensure_children(v, dir);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&v->ns_lock);
	if (i >= dir->nchildren)
		rc = -ENOENT;
	else
		*out = dir->children[i];
	pthread_rwlock_unlock(&v->ns_lock);
	return rc;
}

int ck_view_children(struct ck_view *v, const struct ck_vnode *dir, const struct ck_vnode ***out,
		     size_t *n, uint64_t *changes)
{
	const struct ck_vnode **c = NULL;
	int rc = 0;

	if (!dir->is_dir)
		return -ENOTDIR;
	rc = ensure_children(v, dir);
	if (rc)
		return rc;
	pthread_rwlock_rdlock(&v->ns_lock);
	/* One more than needed: malloc(0) may answer NULL. */
	c = malloc((dir->nchildren + 1) * sizeof(*c));
	if (c) {
		if (dir->nchildren)	/* children is NULL then: no memcpy from NULL */
			memcpy(c, dir->children, dir->nchildren * sizeof(*c));
		*n = dir->nchildren;
		*changes = v->ns_changes;
	} else {
		rc = -ENOMEM;
	}
	pthread_rwlock_unlock(&v->ns_lock);
	*out = c;
	return rc;
}

uint64_t ck_view_namespace_changes(struct ck_view *v)
{
	uint64_t n;

	pthread_rwlock_rdlock(&v->ns_lock);
	n = v->ns_changes;
	pthread_rwlock_unlock(&v->ns_lock);
	return n;
}

int ck_view_resolve(struct ck_view *v, const char *path, const struct ck_vnode **out)
{
	const struct ck_vnode *n = ck_view_root(v);
	char name[4096];
	int rc = 0;

	while (*path && !rc) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);

		if (len >= sizeof(name)) {
			rc = -ENAMETOOLONG;
			break;
		}
		if (len) {
			memcpy(name, path, len);
			name[len] = 0;
			rc = ck_view_lookup(v, n, name, &n);
		}
		path += len + (slash ? 1 : 0);
	}
	if (!rc)
		*out = n;
	return rc;
}

/* --- refresh ------------------------------------------------------------------ */

static struct view_series *find_series(struct ck_view *v, const char *name)
{
	for (size_t i = 0; i < v->nseries; i++)
		if (!strcmp(v->series[i]->name, name))
			return v->series[i];
	return NULL;
}

static int note_changed(uint64_t *changed, size_t max, size_t *n, uint64_t ino)
{
	for (size_t i = 0; i < *n; i++)
		if (changed[i] == ino)
			return 0;
	if (*n < max)
		changed[(*n)++] = ino;
	return 0;
}

/* A deleted checkpoint leaves its series directory for good; the kernel is
 * told through ck_view_drain_hidden.  Callers hold ns_lock for writing. */
static void hide_checkpoint(struct ck_view *v, struct view_series *s, struct view_ckpt *ck,
			    uint64_t *changed, size_t max, size_t *nchanged)
{
	struct ck_vnode **h;

	ck->info.deleted = 1;
	if (!ck->node || view_detach(ck->node) < 0)
		return;
	note_changed(changed, max, nchanged, s->dir->ino);
	h = realloc(v->hidden, (v->nhidden + 1) * sizeof(*h));
	if (h) {
		v->hidden = h;
		v->hidden[v->nhidden++] = ck->node;
	}
	ck_info("refresh: %s/%s deleted", s->name, ck->info.name);
}

/* Marks the files of deleted checkpoint ck that the index no longer holds
 * (all of them when the checkpoint is gone).  Returns how many, or -errno. */
static int note_reclaimed(struct ck_view *v, struct view_ckpt *ck, int gone)
{
	struct ck_file_info *files = NULL;
	size_t n = 0, j;
	int count = 0, rc;

	if (!gone) {
		rc = ck_store_list_files(v->store, ck->info.id, &files, &n);
		if (rc)
			return rc;
	}
	for (size_t i = 0; i < ck->nfiles; i++) {
		struct phys_file *pf = ck->files[i];

		for (j = 0; j < n && files[j].id != pf->info.id; j++)
			;
		if (j == n && !pf->reclaimed) {
			pf->reclaimed = 1;
			count++;
		}
	}
	ck_file_info_free(files, n);
	return count;
}

/* Reclaimed files stop being versions of any node.  They were dropped
 * because no composite drew from them, so built composites stay valid and
 * new builds give the same bytes.  Under build_lock (builds read versions)
 * and then ns_lock, the builders' order. */
static void prune_reclaimed(struct ck_view *v)
{
	pthread_mutex_lock(&v->build_lock);
	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; i < v->nnodes; i++) {
		struct ck_vnode *n = v->nodes[i];
		size_t k = 0;

		for (size_t j = 0; j < n->nversions; j++)
			if (!n->versions[j].pf->reclaimed || j == 0)
				n->versions[k++] = n->versions[j];
		n->nversions = k;
	}
	pthread_rwlock_unlock(&v->ns_lock);
	pthread_mutex_unlock(&v->build_lock);
}

/* A checkpoint committed or imported with a step below the newest one
 * changes the composites of every later checkpoint: the series is loaded
 * again as a new directory (new inodes).  Files open in the old one keep
 * reading their composites; the kernel is told to forget the old name.
 * The old series is retired, freed with the view.  ns_lock held. */
static int reload_series(struct ck_view *v, struct view_series *s, uint64_t *changed, size_t max,
			 size_t *nchanged)
{
	struct view_series **retired = realloc(v->retired, (v->nretired + 1) * sizeof(*retired));
	struct ck_vnode **h = realloc(v->hidden, (v->nhidden + 1) * sizeof(*h));
	size_t i;
	int rc;

	if (retired)
		v->retired = retired;
	if (h)
		v->hidden = h;
	if (!retired || !h)
		return -ENOMEM;
	for (i = 0; i < v->nseries && v->series[i] != s; i++)
		;
	if (i == v->nseries)
		return -ENOENT;
	memmove(&v->series[i], &v->series[i + 1], (v->nseries - i - 1) * sizeof(*v->series));
	v->nseries--;
	v->retired[v->nretired++] = s;
	view_detach(s->dir);
	v->hidden[v->nhidden++] = s->dir;
	note_changed(changed, max, nchanged, v->nodes[0]->ino);
	ck_info("refresh: series %s has a checkpoint inserted before its newest: reloaded", s->name);
	rc = load_series(v, s->name);
	/* The new directory went last: lookups search the root's children by name. */
	sort_children(v->nodes[0]);
	return rc;
}

/* Follows one known series: checkpoints deleted (hidden), reclaimed (their
 * versions dropped) or gone, and new ones after the newest (appended).
 * Returns 0 or -errno; *pruned counts reclaimed files. */
static int refresh_series(struct ck_view *v, struct view_series *s, uint64_t *changed, size_t max,
			  size_t *nchanged, int *pruned)
{
	struct ck_ckpt_info *infos = NULL;
	size_t n = 0, j = 0;
	int stale = 0, rc;

	rc = ck_store_list_checkpoints(v->store, s->name, &infos, &n);
	if (rc)
		return rc;
	for (size_t k = 0; k < s->nckpts && !rc; k++) {
		struct view_ckpt *ck = s->ckpts[k];
		size_t m = j;

		while (m < n && infos[m].id != ck->info.id)
			m++;
		if (m == n) {
			/* Gone: deleted and reclaimed whole (or removed some other way). */
			if (!ck->info.deleted)
				hide_checkpoint(v, s, ck, changed, max, nchanged);
			rc = note_reclaimed(v, ck, 1);
		} else {
			if (m > j)
				stale = 1;   /* inserted before a checkpoint the view has */
			if (infos[m].deleted && !ck->info.deleted)
				hide_checkpoint(v, s, ck, changed, max, nchanged);
			rc = ck->info.deleted ? note_reclaimed(v, ck, 0) : 0;
			j = m + 1;
		}
		if (rc > 0) {
			*pruned += rc;
			rc = 0;
		}
	}
	/* New checkpoints must come after every checkpoint the view has
	 * (composites only read older ones), deleted or gone ones included. */
	for (size_t m = j; m < n && s->nckpts; m++)
		if (infos[m].step <= s->ckpts[s->nckpts - 1]->info.step)
			stale = 1;
	if (!rc && stale) {
		rc = reload_series(v, s, changed, max, nchanged);
	} else if (!rc && j < n) {
		size_t first = s->nckpts;

		rc = append_checkpoints(v, s, infos, j, n);
		sort_children(s->dir);
		view_owner_forget(v, s->dir);   /* the newest checkpoint's directory holds it */
		note_changed(changed, max, nchanged, s->dir->ino);
		ck_info("refresh: series %s: %zu new checkpoint(s), newest %s", s->name, s->nckpts - first,
			s->ckpts[s->nckpts - 1]->info.name);
	}
	ck_ckpt_info_free(infos, n);
	return rc;
}

/* Whether the store now has checkpoints (or series) the view lacks:
 * new series, and new checkpoints after the last one of a series, are
 * added; deleted checkpoints are hidden and the files reclaimed from them
 * stop being versions; a series with a checkpoint re-imported or inserted
 * before its newest is reloaded as a new directory (reload_series). */
int ck_view_refresh(struct ck_view *v, uint64_t *changed, size_t max, size_t *nchanged)
{
	struct ck_error err = { { 0 } };
	char **names = NULL;
	size_t nnames = 0;
	int pruned = 0, rc;

	*nchanged = 0;
	/* What other processes and nodes did, from the store's journal. */
	rc = ck_store_follow(v->store, NULL, &err);
	if (rc)
		ck_warn("refresh: %s", err.msg);
	rc = ck_store_list_series(v->store, &names, &nnames);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&v->ns_lock);
	for (size_t i = 0; i < nnames && !rc; i++) {
		struct view_series *s = find_series(v, names[i]);
		size_t before = v->nnodes;

		if (!s) {
			rc = load_series(v, names[i]);
			if (!rc)
				ck_info("refresh: new series %s (%zu checkpoints)", names[i],
					v->series[v->nseries - 1]->nckpts);
			sort_children(v->nodes[0]);
			note_changed(changed, max, nchanged, v->nodes[0]->ino);
		} else {
			rc = refresh_series(v, s, changed, max, nchanged, &pruned);
		}
		/* Directories made by this refresh get their children sorted. */
		for (size_t j = before; j < v->nnodes; j++)
			sort_children(v->nodes[j]);
	}
	if (*nchanged)
		v->ns_changes++;
	pthread_rwlock_unlock(&v->ns_lock);
	ck_strv_free(names, nnames);
	if (pruned)
		prune_reclaimed(v);
	if (!rc)
		rc = packed_probe_all(v);   /* versions compaction packed since */
	return rc;
}

int view_version_reclaimed(struct ck_view *v, struct phys_file *pf)
{
	struct ck_file_info *files = NULL;
	struct stat sb;
	size_t n = 0, i;

	if (pf->reclaimed)
		return 1;
	/* Reclaims drop a file from the index before they unlink it. */
	if (stat(pf->info.src_path, &sb) == 0 || errno != ENOENT ||
	    ck_store_list_files(v->store, pf->ckpt->info.id, &files, &n) < 0)
		return 0;
	for (i = 0; i < n && files[i].id != pf->info.id; i++)
		;
	ck_file_info_free(files, n);
	return i == n;
}

int ck_view_hide(struct ck_view *v, const struct ck_vnode *cn)
{
	struct ck_vnode *n = (struct ck_vnode *)cn;
	int rc;

	if (!n->ckpt || !n->parent)
		return -EINVAL;   /* the root and series directories */
	pthread_rwlock_wrlock(&v->ns_lock);
	rc = n->is_dir && n->nchildren ? -ENOTEMPTY : view_detach(n);
	if (rc >= 0)
		v->ns_changes++;
	pthread_rwlock_unlock(&v->ns_lock);
	return rc;
}

void ck_view_drain_hidden(struct ck_view *v, ck_hidden_fn fn, void *ctx)
{
	struct ck_vnode **h;
	size_t n;

	pthread_rwlock_wrlock(&v->ns_lock);
	h = v->hidden;
	n = v->nhidden;
	v->hidden = NULL;
	v->nhidden = 0;
	pthread_rwlock_unlock(&v->ns_lock);
	for (size_t i = 0; i < n; i++)
		fn(ctx, h[i], h[i]->parent->ino, h[i]->name);
	free(h);
}

int view_collect_files(struct ck_vnode *n, struct node_list *l, struct node_list *from, size_t max)
{
	int rc = 0;

	if (!n->is_dir)
		return l->len < max ? node_list_add(l, n) : 0;
	if (n->dcp_meta && from)
		return node_list_add(from, n);
	for (size_t i = 0; i < n->nchildren && !rc; i++)
		rc = view_collect_files(n->children[i], l, from, max);
	return rc;
}

int ck_view_files_made(struct ck_view *v, const struct ck_vnode *n, uint64_t **inos, size_t *count)
{
	struct node_list l = { NULL, 0, 0 };
	int rc;

	*inos = NULL;
	*count = 0;
	pthread_rwlock_rdlock(&v->ns_lock);
	rc = view_collect_files((struct ck_vnode *)n, &l, NULL, SIZE_MAX);
	pthread_rwlock_unlock(&v->ns_lock);
	if (!rc && l.len && !(*inos = malloc(l.len * sizeof(**inos))))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < l.len; i++)
		(*inos)[(*count)++] = l.n[i]->ino;
	node_list_free(&l);
	return rc;
}

/* --- file contents ---------------------------------------------------------- */

/* The node's composite, built once.  A failed build is not cached: the
 * next open tries again (the cause may have been fixed). */
int node_list_add(struct node_list *l, struct ck_vnode *n)
{
	if (l->len == l->cap) {
		struct ck_vnode **p = ck_grow(l->n, &l->cap, sizeof(*p), 64);

		if (!p)
			return -ENOMEM;
		l->n = p;
	}
	l->n[l->len++] = n;
	return 0;
}

void node_list_free(struct node_list *l)
{
	free(l->n);
	memset(l, 0, sizeof(*l));
}

void ck_view_pause_builds(struct ck_view *v)
{
	pthread_mutex_lock(&v->build_lock);
}

void ck_view_resume_builds(struct ck_view *v)
{
	pthread_mutex_unlock(&v->build_lock);
}

int view_node_vfile(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **out)
{
	int rc = 0;

	if (n->is_dir || !n->nversions)
		return -EISDIR;
	pthread_mutex_lock(&v->build_lock);
	if (!n->vfile) {
		rc = composite_build(v, n, &n->vfile);
		n->build_error = rc;
	}
	if (!rc) {
		atomic_fetch_add(&n->vfile->refs, 1);
		*out = n->vfile;
	}
	pthread_mutex_unlock(&v->build_lock);
	return rc;
}

int view_node_tensors(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **out)
{
	struct ck_vfile *f;
	int rc = view_node_vfile(v, n, &f);

	if (rc)
		return rc;
	pthread_mutex_lock(&v->build_lock);
	if (f->tensors_pending)
		rc = dcp_list_items(v, n, f);
	pthread_mutex_unlock(&v->build_lock);
	if (rc) {
		ck_vfile_put(f);
		return rc;
	}
	*out = f;
	return 0;
}

int ck_view_open_file(struct ck_view *v, const struct ck_vnode *cn, struct ck_vfile **out)
{
	struct ck_vnode *n = (struct ck_vnode *)cn;
	struct ck_vfile *f;
	int rc;

	rc = view_node_vfile(v, n, &f);
	if (rc)
		return rc;
	/* Re-check every physical file on each open: an imported file changed
	 * since import must not be served (cheap: one stat per file). */
	for (size_t i = 0; i < f->nsrcs; i++) {
		rc = phys_check(v, f->srcs[i]);
		if (rc) {
			ck_vfile_put(f);
			return -EIO;
		}
	}
	*out = f;
	return 0;
}

int ck_view_getattr(struct ck_view *v, const struct ck_vnode *cn, struct ck_vattr *out)
{
	struct ck_vnode *n = cn->link_of ? cn->link_of : (struct ck_vnode *)cn;
	struct ck_vfile *f;
	struct ck_owner o;

	memset(out, 0, sizeof(*out));
	out->ino = n->ino;
	out->mtime_ns = n->mtime_ns;
	view_node_owner(v, n, &o);
	out->uid = o.uid;
	out->gid = o.gid;
	if (n->is_dir) {
		uint32_t subdirs = 0;

		if (ensure_children(v, n))
			return -EIO;
		pthread_rwlock_rdlock(&v->ns_lock);
		for (size_t i = 0; i < n->nchildren; i++)
			subdirs += n->children[i]->is_dir;
		out->mtime_ns = n->mtime_ns;
		pthread_rwlock_unlock(&v->ns_lock);
		out->mode = S_IFDIR | o.mode;
		out->nlink = 2 + subdirs;
		return 0;
	}
	out->nlink = n->nlinks ? n->nlinks : 1;
	if (n->versions[0].pf->info.kind == CK_FILE_SYMLINK) {
		out->mode = S_IFLNK | 0777;
		out->size = n->versions[0].pf->info.size;
		return 0;
	}
	out->mode = S_IFREG | o.mode;
	if (!view_node_vfile(v, n, &f)) {
		out->size = f->size;
		ck_vfile_put(f);
	} else {
		/* Stat still works for a file that cannot be served; open reports why. */
		out->size = n->versions[0].pf->info.size;
	}
	return 0;
}

/* --- provenance ------------------------------------------------------------- */

/* The storages of one physical file coded lossily, with their byte ranges. */
struct lossy_ranges {
	const struct phys_file *pf;
	struct ck_lossy_storage *l;
	uint64_t *off, *len;
	double bound;
	size_t n;
};

static void lossy_ranges_clear(struct lossy_ranges *r)
{
	free(r->l);
	free(r->off);
	free(r->len);
	memset(r, 0, sizeof(*r));
}

static void lossy_ranges_load(struct ck_view *v, const struct phys_file *pf, struct lossy_ranges *r)
{
	struct ck_storage_info *si = NULL;
	struct ck_file_pack_info pi;
	size_t ns = 0;

	if (r->pf == pf)
		return;
	lossy_ranges_clear(r);
	r->pf = pf;
	if (ck_store_file_pack_info(v->store, pf->info.id, &pi) < 0 || !pi.lossy ||
	    ck_store_file_lossy(v->store, pf->info.id, &r->l, &r->n) < 0 ||
	    ck_store_list_storages(v->store, pf->info.id, &si, &ns) < 0)
		goto none;
	r->off = calloc(r->n ? r->n : 1, sizeof(*r->off));
	r->len = calloc(r->n ? r->n : 1, sizeof(*r->len));
	if (!r->off || !r->len)
		goto none;
	for (size_t i = 0; i < r->n; i++) {
		if (r->l[i].storage >= ns)
			goto none;
		r->off[i] = si[r->l[i].storage].offset;
		r->len[i] = si[r->l[i].storage].length;
	}
	r->bound = pi.lossy_bound;
	ck_storage_info_free(si, ns);
	return;
none:
	ck_storage_info_free(si, ns);
	lossy_ranges_clear(r);
	r->pf = pf;
}

int ck_view_tensors(struct ck_view *v, const struct ck_vnode *cn, ck_vtensor_fn fn, void *ctx)
{
	struct ck_vnode *n = (struct ck_vnode *)cn;
	const struct ck_layer_rules *rules = ck_store_layer_rules(v->store);
	struct lossy_ranges lr = { 0 };
	struct ck_vfile *f;
	char layer[128];
	int rc;

	rc = view_node_tensors(v, n, &f);
	if (rc)
		return rc;
	for (size_t i = 0; i < f->ntensors && !rc; i++) {
		const struct vtensor_src *t = &f->tensors[i];
		const char *stored = phys_tensor_layer(v, t->pf, t->name);
		struct ck_vtensor vt = { 0 };

		lossy_ranges_load(v, t->pf, &lr);
		for (size_t k = 0; k < lr.n; k++)
			if (t->offset >= lr.off[k] && t->offset - lr.off[k] < lr.len[k]) {
				vt.lossy_bound = lr.bound;
				vt.lossy_max_abs = lr.l[k].max_abs;
				vt.lossy_max_err = lr.l[k].max_err;
			}

		if (!stored && (!rules || ck_layer_of(rules, t->name, layer, sizeof(layer))))
			strcpy(layer, "other");
		vt.name = t->name;
		vt.layer = stored ? stored : layer;
		vt.dtype = t->dtype;
		vt.ndim = t->ndim;
		vt.shape = t->shape;
		vt.src_ckpt = t->pf->ckpt->info.name;
		vt.src_step = t->pf->ckpt->info.step;
		vt.src_path = t->pf->info.src_path;
		vt.src_file_id = t->pf->info.id;
		vt.src_offset = t->offset;
		vt.nbytes = t->nbytes;
		vt.source = (struct ck_vsource *)t->pf;
		vt.contiguous = t->contiguous;
		vt.node = t->node;
		rc = fn(ctx, &vt);
	}
	lossy_ranges_clear(&lr);
	ck_vfile_put(f);
	return rc;
}

static const char *const xattr_names[] = {
	"user.ckptfs.sources", "user.ckptfs.step", "user.ckptfs.checkpoint", "user.ckptfs.kind",
	"user.ckptfs.error", "user.ckptfs.lossy",
};

static const char *kind_name(enum ck_file_kind k)
{
	switch (k) {
	case CK_FILE_TORCH: return "torch";
	case CK_FILE_SAFETENSORS: return "safetensors";
	case CK_FILE_SAFETENSORS_INDEX: return "safetensors-index";
	case CK_FILE_BAD: return "bad";
	case CK_FILE_SYMLINK: return "symlink";
	default: return "file";
	}
}

/* Whether name is a user attribute of the files themselves (user.*, but
 * not the mount's own user.ckptfs.*). */
static int files_own_xattr(const char *name)
{
	return !strncmp(name, "user.", 5) && strncmp(name, "user.ckptfs.", 12);
}

/* The user.* attribute name of the physical file of n's newest version,
 * which a trainer set while writing it (raw files only: packing keeps the
 * bytes, not the attributes). */
static int phys_xattr(const struct ck_vnode *n, const char *name, struct ck_buf *out)
{
	const char *path = n->versions[0].pf->info.src_path;
	ssize_t len = lgetxattr(path, name, NULL, 0);

	if (len >= 0 && ck_buf_reserve(out, (size_t)len + 1) < 0)
		return -ENOMEM;
	if (len >= 0)
		len = lgetxattr(path, name, out->data + out->len, (size_t)len);
	if (len < 0)
		return errno == ENOTSUP || errno == ENOENT || errno == ERANGE ? -ENODATA : -errno;
	out->len += (size_t)len;
	return 0;
}

/* Appends the user.* names of the physical file of n's newest version. */
static int phys_xattr_names(const struct ck_vnode *n, struct ck_buf *out)
{
	const char *path = n->versions[0].pf->info.src_path;
	ssize_t len = llistxattr(path, NULL, 0);
	char *names;

	if (len <= 0)
		return 0;
	names = malloc((size_t)len);
	if (!names)
		return -ENOMEM;
	len = llistxattr(path, names, (size_t)len);
	for (ssize_t i = 0; i < len;) {
		size_t k = strlen(names + i) + 1;

		if (files_own_xattr(names + i) && ck_buf_put(out, names + i, k) < 0) {
			free(names);
			return -ENOMEM;
		}
		i += (ssize_t)k;
	}
	free(names);
	return 0;
}

/* Whether the user.ckptfs.* file attributes beyond step and checkpoint
 * apply to n: files with bytes. */
static int served_file(const struct ck_vnode *n)
{
	return !n->is_dir && n->nversions && n->versions[0].pf->info.kind != CK_FILE_SYMLINK;
}

int ck_view_getxattr(struct ck_view *v, const struct ck_vnode *cn, const char *name, struct ck_buf *out)
{
	struct ck_vnode *n = cn->link_of ? cn->link_of : (struct ck_vnode *)cn;

	if (!n->ckpt)
		return -ENODATA;
	if (files_own_xattr(name))
		return served_file(n) && ck_file_kind_has_bytes(n->versions[0].pf->info.kind) ? phys_xattr(n, name, out)
											   : -ENODATA;
	if (!strcmp(name, "user.ckptfs.step"))
		return ck_buf_printf(out, "%lld", (long long)n->ckpt->info.step);
	if (!strcmp(name, "user.ckptfs.checkpoint"))
		return ck_buf_printf(out, "%s/%s", n->ckpt->series->name, n->ckpt->info.name);
	if (n->is_dir || !n->nversions)
		return -ENODATA;
	if (!strcmp(name, "user.ckptfs.kind"))
		return ck_buf_puts(out, dcp_is_metadata(n) ? "dcp-metadata" : kind_name(n->versions[0].pf->info.kind));
	if (!served_file(n))
		return -ENODATA;
	if (!strcmp(name, "user.ckptfs.error")) {
		struct ck_vfile *f;
		int rc;

		if (n->versions[0].pf->info.kind == CK_FILE_BAD)
			return ck_buf_puts(out, n->versions[0].pf->info.error ? n->versions[0].pf->info.error
									     : "refused at import");
		rc = view_node_vfile(v, n, &f);
		if (!rc) {
			ck_vfile_put(f);
			return -ENODATA;
		}
		return ck_buf_printf(out, "cannot be served: %s (see the daemon log)", strerror(-rc));
	}
	if (!strcmp(name, "user.ckptfs.sources"))
		return provenance_json(v, n, out);
	if (!strcmp(name, "user.ckptfs.lossy"))
		return lossy_json(v, n, out);
	return -ENODATA;
}

int ck_view_listxattr(struct ck_view *v, const struct ck_vnode *cn, struct ck_buf *out)
{
	struct ck_vnode *n = cn->link_of ? cn->link_of : (struct ck_vnode *)cn;
	int rc = 0;

	if (!n->ckpt)
		return 0;
	/* step and checkpoint everywhere inside a checkpoint; files add the rest,
	 * and user.ckptfs.error only when there is one to read */
	for (size_t i = 0; i < sizeof(xattr_names) / sizeof(xattr_names[0]) && !rc; i++) {
		const char *name = xattr_names[i];

		if (n->is_dir && strcmp(name, "user.ckptfs.step") && strcmp(name, "user.ckptfs.checkpoint"))
			continue;
		if (!n->is_dir && !served_file(n) && strcmp(name, "user.ckptfs.step") &&
		    strcmp(name, "user.ckptfs.checkpoint") && strcmp(name, "user.ckptfs.kind"))
			continue;
		if (!strcmp(name, "user.ckptfs.error")) {
			struct ck_vfile *f;

			if (n->versions[0].pf->info.kind != CK_FILE_BAD) {
				if (!view_node_vfile(v, n, &f)) {
					ck_vfile_put(f);
					continue;
				}
			}
		}
		if (!strcmp(name, "user.ckptfs.lossy")) {   /* only on a file served lossily */
			struct ck_buf scratch = CK_BUF_INIT;
			int lossy = lossy_json(v, n, &scratch) == 0;

			ck_buf_free(&scratch);
			if (!lossy)
				continue;
		}
		rc = ck_buf_put(out, name, strlen(name) + 1);
	}
	if (rc == 0 && served_file(n) && ck_file_kind_has_bytes(n->versions[0].pf->info.kind))
		rc = phys_xattr_names(n, out);
	return rc;
}

const struct ck_layer_rules *ck_view_layer_rules(struct ck_view *v)
{
	return ck_store_layer_rules(v->store);
}

int ck_view_series_pattern(struct ck_view *v, const char *series, char **pattern)
{
	return ck_store_series_pattern(v->store, series, pattern);
}

int ck_vnode_is_series_dir(struct ck_view *v, const struct ck_vnode *n)
{
	return n && n->is_dir && !n->ckpt && n->parent == v->nodes[0];
}

int ck_view_readlink(struct ck_view *v, const struct ck_vnode *n, const char **target)
{
	(void)v;
	if (n->is_dir || !n->nversions || n->versions[0].pf->info.kind != CK_FILE_SYMLINK ||
	    !n->versions[0].pf->info.target)
		return -EINVAL;
	*target = n->versions[0].pf->info.target;
	return 0;
}

int ck_vnode_file_kind(const struct ck_vnode *n)
{
	return n && !n->is_dir && n->nversions ? (int)n->versions[0].pf->info.kind : CK_FILE_OTHER;
}
