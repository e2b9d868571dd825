/* The control directory's node model (include/ckptfs/ctldir.h): a tree of
 * nodes made on demand.  A directory's children come from its type's list
 * callback, taken again when the type's stamp changes (new checkpoints,
 * recipes); a child keeps its node, and so its inode number, for as long
 * as its name and key stay.  A file's contents are built once, by its
 * type, and cached.  Nodes are never freed before the control directory,
 * so an inode number stays valid however the listings change. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/buf.h"
#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "ctl_int.h"

/* --- specs ------------------------------------------------------------------ */

int ctl_spec_add(struct ctl_specs *s, const char *name, const char *key, int is_dir, const struct ctl_type *type,
		 const char *a0, const char *a1, const char *a2, void *ptr)
{
	const char *args[3] = { a0, a1, a2 };
	struct ctl_spec *sp;

	if (s->n == s->cap) {
		sp = ck_grow(s->v, &s->cap, sizeof(*sp), 16);
		if (!sp)
			return -ENOMEM;
		s->v = sp;
	}
	sp = &s->v[s->n];
	memset(sp, 0, sizeof(*sp));
	sp->name = strdup(name);
	sp->key = strdup(key ? key : "");
	sp->is_dir = is_dir;
	sp->type = type;
	sp->ptr = ptr;
	sp->order = s->n;
	s->n++;
	if (!sp->name || !sp->key)
		return -ENOMEM;
	for (int i = 0; i < 3; i++)
		if (args[i] && !(sp->arg[i] = strdup(args[i])))
			return -ENOMEM;
	return 0;
}

void ctl_spec_anchor(struct ctl_specs *s, const struct ck_vnode *anchor)
{
	if (s->n)
		s->v[s->n - 1].anchor = anchor;
}

void ctl_specs_free(struct ctl_specs *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].name);
		free(s->v[i].key);
		for (int k = 0; k < 3; k++)
			free(s->v[i].arg[k]);
	}
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* --- sources ------------------------------------------------------------------ */

int ctl_srcs_add(struct ctl_srcs *s, struct ck_vsource *src)
{
	for (size_t i = s->n; i-- > 0;)   /* a file's tensors come from a few files, mostly the last one met */
		if (s->v[i] == src)
			return 0;
	if (s->n == s->cap) {
		struct ck_vsource **p = ck_grow(s->v, &s->cap, sizeof(*p), 8);

		if (!p)
			return -ENOMEM;
		s->v = p;
	}
	s->v[s->n++] = src;
	return 0;
}

int ctl_srcs_add_entry(struct ctl_srcs *s, const struct ck_cat_tensor *e)
{
	int rc = ctl_srcs_add(s, e->source);

	for (size_t i = 0; i < e->npieces && !rc; i++)
		rc = ctl_srcs_add(s, e->pieces[i].source);
	return rc;
}

void ctl_srcs_free(struct ctl_srcs *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* --- nodes ------------------------------------------------------------------- */

/* A new node from spec (its strings move into the node).  c->lock held. */
static struct ctl_node *node_new(struct ck_ctl *c, struct ctl_node *parent, struct ctl_spec *sp)
{
	struct ctl_node *n;

	if (c->nnodes == c->capnodes) {
		struct ctl_node **p = ck_grow(c->nodes, &c->capnodes, sizeof(*p), 256);

		if (!p)
			return NULL;
		c->nodes = p;
	}
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->name = sp->name;
	n->key = sp->key;
	n->is_dir = sp->is_dir;
	n->type = sp->type;
	memcpy(n->arg, sp->arg, sizeof(n->arg));
	n->ptr = sp->ptr;
	n->anchor = sp->anchor;
	memset(sp, 0, sizeof(*sp));
	n->parent = parent;
	n->mtime_ns = c->open_time_ns;
	c->nodes[c->nnodes++] = n;
	n->ino = CK_CTL_INO_BIT | c->nnodes;
	return n;
}

static void node_free(struct ctl_node *n)
{
	free(n->name);
	free(n->key);
	for (int k = 0; k < 3; k++)
		free(n->arg[k]);
	free(n->children);
	ck_vfile_put(n->vfile);
	free(n);
}

static struct ctl_node *node_of(struct ck_ctl *c, uint64_t ino)
{
	struct ctl_node *n = NULL;
	uint64_t i = ino & ~CK_CTL_INO_BIT;

	pthread_mutex_lock(&c->lock);
	if (ck_ctl_owns(ino) && i >= 1 && i <= c->nnodes)
		n = c->nodes[i - 1];
	pthread_mutex_unlock(&c->lock);
	return n;
}

static int spec_cmp(const void *a, const void *b)
{
	const struct ctl_spec *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x->order < y->order ? -1 : x->order > y->order);   /* equal names: list order */
}

/* Lists dir anew when its stamp moved (or never listed): children that
 * keep their name and key keep their nodes.  Both lists sorted by name,
 * merged in one pass; of two specs with one name the first listed wins. */
static int refresh_dir(struct ck_ctl *c, struct ctl_node *dir)
{
	struct ctl_specs specs = { 0 };
	struct ctl_node **kids;
	uint64_t stamp = dir->type->stamp ? dir->type->stamp(c, dir) : 0;
	size_t k = 0, j = 0;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = dir->listed && dir->stamp == stamp;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		return 0;
	rc = dir->type->list ? dir->type->list(c, dir, &specs) : 0;
	if (rc) {
		ctl_specs_free(&specs);
		return rc;
	}
	if (specs.n > 1)
		qsort(specs.v, specs.n, sizeof(*specs.v), spec_cmp);
	pthread_mutex_lock(&c->lock);
	kids = calloc(specs.n + 1, sizeof(*kids));
	for (size_t i = 0; kids && i < specs.n; i++) {
		struct ctl_spec *sp = &specs.v[i];
		struct ctl_node *old = NULL;

		if (k && !strcmp(kids[k - 1]->name, sp->name))
			continue;   /* a name listed twice: the first stays */
		while (j < dir->nchildren && strcmp(dir->children[j]->name, sp->name) < 0)
			j++;
		if (j < dir->nchildren && !strcmp(dir->children[j]->name, sp->name) &&
		    !strcmp(dir->children[j]->key, sp->key))
			old = dir->children[j];
		if (!old && !(old = node_new(c, dir, sp))) {
			free(kids);
			kids = NULL;
			break;
		}
		kids[k++] = old;
	}
	if (kids) {
		free(dir->children);
		dir->children = kids;
		dir->nchildren = k;
		dir->listed = 1;
		dir->stamp = stamp;
	}
	pthread_mutex_unlock(&c->lock);
	ctl_specs_free(&specs);
	return kids ? 0 : -ENOMEM;
}

/* The contents of a file node (a new reference), built once; a volatile
 * type's every time. */
static int node_vfile(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	struct ck_vfile *f = NULL;
	int rc = 0;

	if (n->is_dir)
		return -EISDIR;
	if (n->type->is_volatile)
		return n->type->build(c, n, out);
	pthread_mutex_lock(&c->build_lock);
	if (!n->vfile)
		rc = n->type->build(c, n, &n->vfile);
	if (!rc)
		f = ck_vfile_get(n->vfile);
	pthread_mutex_unlock(&c->build_lock);
	if (!rc)
		*out = f;
	return rc;
}

/* --- the root: the registry -------------------------------------------------- */

static int root_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out);

static const struct ctl_type ctl_root = {
	.kind = "control",
	.list = root_list,
};

static int registered_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	const struct ctl_entry *e = n->ptr;

	return e->fn(e->ctx, c->view, out);
}

static int no_sources(struct ck_ctl *c, struct ctl_node *n, struct ctl_srcs *out)
{
	(void)c;
	(void)n;
	(void)out;
	return 0;
}

/* Registered files are built on every open, and read by anyone who may
 * search .ckptfs. */
static const struct ctl_type ctl_registered = {
	.kind = "control",
	.build = registered_build,
	.sources = no_sources,
	.is_volatile = 1,
};

static int root_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	int rc = 0;

	(void)dir;
	for (size_t i = 0; i < c->nentries && !rc; i++) {
		struct ctl_entry *e = &c->entries[i];

		rc = ctl_spec_add(out, e->name, NULL, e->is_dir, e->type, NULL, NULL, NULL, e);
	}
	return rc;
}

static int register_entry(struct ck_ctl *c, const char *name, int is_dir, const struct ctl_type *type,
			  ck_ctl_file_fn fn, void *ctx)
{
	struct ctl_entry *e;

	if (!*name || strchr(name, '/'))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->nentries; i++)
		if (!strcmp(c->entries[i].name, name)) {
			pthread_mutex_unlock(&c->lock);
			return -EEXIST;
		}
	e = realloc(c->entries, (c->nentries + 1) * sizeof(*e));
	if (e)
		c->entries = e;
	if (e && (e[c->nentries].name = strdup(name))) {
		e[c->nentries].is_dir = is_dir;
		e[c->nentries].type = type;
		e[c->nentries].fn = fn;
		e[c->nentries].ctx = ctx;
		c->nentries++;
		/* The root lists again at its next use. */
		c->nodes[0]->listed = 0;
		e = NULL;
	} else {
		e = (void *)1;
	}
	pthread_mutex_unlock(&c->lock);
	return e ? -ENOMEM : 0;
}

int ck_ctl_register_file(struct ck_ctl *c, const char *name, ck_ctl_file_fn fn, void *ctx)
{
	return register_entry(c, name, 0, &ctl_registered, fn, ctx);
}

/* --- series files ----------------------------------------------------------------- */

static int series_file_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	const struct ctl_series_file *sf = n->ptr;

	return sf->fn(sf->ctx, n->arg[0], c->view, out);
}

/* Built at every open, absent while fn says -ENOENT; a node per series,
 * a child of no directory (reached by ck_ctl_lookup_series_file only). */
static const struct ctl_type ctl_series_file_type = {
	.kind = "control",
	.build = series_file_build,
	.sources = no_sources,
	.is_volatile = 1,
};

static struct ctl_series_file *series_file_of(struct ck_ctl *c, const char *name)
{
	for (size_t i = 0; i < c->nseries_files; i++)
		if (!strcmp(c->series_files[i].name, name))
			return &c->series_files[i];
	return NULL;
}

int ck_ctl_register_series_file(struct ck_ctl *c, const char *name, ck_ctl_series_fn fn, void *ctx)
{
	struct ctl_series_file *sf;
	int rc = 0;

	if (!*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	if (series_file_of(c, name)) {
		rc = -EEXIST;
	} else if (!(sf = realloc(c->series_files, (c->nseries_files + 1) * sizeof(*sf)))) {
		rc = -ENOMEM;
	} else {
		c->series_files = sf;
		sf += c->nseries_files;
		memset(sf, 0, sizeof(*sf));
		sf->fn = fn;
		sf->ctx = ctx;
		if ((sf->name = strdup(name)))
			c->nseries_files++;
		else
			rc = -ENOMEM;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ck_ctl_is_series_file(struct ck_ctl *c, const char *name)
{
	int found;

	pthread_mutex_lock(&c->lock);
	found = series_file_of(c, name) != NULL;
	pthread_mutex_unlock(&c->lock);
	return found;
}

/* The node of series file name of series, made at its first lookup. */
static int series_file_node(struct ck_ctl *c, const char *series, const char *name, struct ctl_node **out)
{
	struct ctl_series_file *sf;
	struct ctl_node **p, *n = NULL;
	struct ctl_spec sp = { 0 };
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	sf = series_file_of(c, name);
	for (size_t i = 0; sf && i < sf->nnodes && !n; i++)
		if (!strcmp(sf->nodes[i]->arg[0], series))
			n = sf->nodes[i];
	if (!sf) {
		rc = -ENOENT;
	} else if (!n) {
		sp.name = strdup(name);
		sp.key = strdup(series);
		sp.arg[0] = strdup(series);
		sp.type = &ctl_series_file_type;
		sp.ptr = sf;
		p = realloc(sf->nodes, (sf->nnodes + 1) * sizeof(*p));
		if (p)
			sf->nodes = p;
		if (!p || !sp.name || !sp.key || !sp.arg[0] || !(n = node_new(c, c->nodes[0], &sp))) {
			free(sp.name);
			free(sp.key);
			free(sp.arg[0]);
			rc = -ENOMEM;
		} else {
			sf->nodes[sf->nnodes++] = n;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!rc)
		*out = n;
	return rc;
}

/* --- open / close -------------------------------------------------------------- */

int ck_ctl_open(struct ck_view *v, const char *store_dir, const struct ck_ctl_opts *opts, struct ck_ctl **out)
{
	struct ck_ctl *c = calloc(1, sizeof(*c));
	struct ctl_spec root = { 0 };
	pthread_mutexattr_t ma;
	int rc = 0;

	if (!c)
		return -ENOMEM;
	c->view = v;
	c->store = strdup(store_dir);
	if (opts)
		c->opts = *opts;
	if (!c->opts.shard_bytes)
		c->opts.shard_bytes = CK_CTL_DEFAULT_SHARD_BYTES;
	c->open_time_ns = ck_now_ns();
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutexattr_init(&ma);
	pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
	pthread_mutex_init(&c->build_lock, &ma);
	pthread_mutexattr_destroy(&ma);
	root.name = strdup(CK_CTL_NAME);
	root.key = strdup("");
	root.is_dir = 1;
	root.type = &ctl_root;
	if (!c->store || !root.name || !root.key || !node_new(c, NULL, &root)) {
		free(root.name);
		free(root.key);
		ck_ctl_close(c);
		return -ENOMEM;
	}
	rc = register_entry(c, "weights", 1, &ctl_weights_root, NULL, NULL);
	if (!rc)
		rc = register_entry(c, "layers", 1, &ctl_layers_root, NULL, NULL);
	if (!rc)
		rc = register_entry(c, "history", 1, &ctl_history_root, NULL, NULL);
	if (!rc)
		rc = register_entry(c, "recipes", 1, &ctl_recipes_root, NULL, NULL);
	if (rc) {
		ck_ctl_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

void ck_ctl_close(struct ck_ctl *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nnodes; i++)
		node_free(c->nodes[i]);
	free(c->nodes);
	recipes_free(c);
	for (size_t i = 0; i < c->ncats; i++)
		ck_catalog_free(c->cats[i]);
	free(c->cats);
	for (size_t i = 0; i < c->nfindex; i++)
		cat_entries_free(c->findex[i].v, c->findex[i].n);
	free(c->findex);
	for (size_t i = 0; i < c->nentries; i++)
		free(c->entries[i].name);
	free(c->entries);
	for (size_t i = 0; i < c->nseries_files; i++) {
		free(c->series_files[i].name);
		free(c->series_files[i].nodes);
	}
	free(c->series_files);
	free(c->store);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->build_lock);
	free(c);
}

/* --- catalogs ---------------------------------------------------------------------- */

int ctl_catalog(struct ck_ctl *c, const struct ck_vnode *ckpt, unsigned flags, struct ck_catalog **out)
{
	struct ck_catalog *cat = NULL;
	int rc = 0;

	pthread_mutex_lock(&c->build_lock);
	for (size_t i = 0; i < c->ncats && !cat; i++)
		if (c->cats[i]->ckpt.node == ckpt && (c->cats[i]->flags & ~flags) == 0)
			cat = c->cats[i];
	if (!cat) {
		if (c->ncats == c->capcats) {
			struct ck_catalog **p = ck_grow(c->cats, &c->capcats, sizeof(*p), 16);

			if (!p)
				rc = -ENOMEM;
			else
				c->cats = p;
		}
		if (!rc)
			rc = ck_catalog_build(c->view, ckpt, flags, &cat);
		if (!rc)
			c->cats[c->ncats++] = cat;
	}
	pthread_mutex_unlock(&c->build_lock);
	if (!rc)
		*out = cat;
	return rc;
}

int ctl_file_tensor(struct ck_ctl *c, const struct ck_vnode *file, const char *path, const struct ck_cat_tensor **out)
{
	struct file_index *fi = NULL;
	int rc = 0;

	pthread_mutex_lock(&c->build_lock);
	for (size_t i = 0; i < c->nfindex && !fi; i++)
		if (c->findex[i].file == file)
			fi = &c->findex[i];
	if (!fi) {
		struct file_index *p = realloc(c->findex, (c->nfindex + 1) * sizeof(*p));

		if (!p) {
			rc = -ENOMEM;
		} else {
			c->findex = p;
			fi = &p[c->nfindex];
			fi->file = file;
			rc = cat_file_entries(c->view, file, &fi->v, &fi->n);
			if (!rc)
				c->nfindex++;
			else
				fi = NULL;
		}
	}
	rc = rc ? rc : -ENOENT;
	if (fi) {
		size_t lo = 0, hi = fi->n;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			int cmp = strcmp(path, fi->v[mid].path);

			if (!cmp) {
				*out = &fi->v[mid];
				rc = 0;
				break;
			}
			if (cmp < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
	}
	pthread_mutex_unlock(&c->build_lock);
	return rc;
}

int ctl_find_checkpoint(struct ck_ctl *c, const char *series, const char *name, const struct ck_vnode **out)
{
	struct ck_vckpt *ck = NULL;
	size_t n = 0;
	int rc = ck_view_series_checkpoints(c->view, series, &ck, &n);

	if (rc)
		return rc;
	rc = -ENOENT;
	for (size_t i = 0; i < n && rc; i++)
		if (!strcmp(ck[i].name, name)) {
			*out = ck[i].node;
			rc = 0;
		}
	free(ck);
	return rc;
}

/* --- the public operations -------------------------------------------------------- */

/* What directory n shows: its anchor's owner and group, and of its mode
 * the read and search bits (a file's read bits giving both), else its
 * parent's; .ckptfs and the entries without one: the mount root's owner,
 * 0555. */
static void dir_owner(struct ck_ctl *c, const struct ctl_node *n, struct ck_owner *o)
{
	const struct ck_vnode *a = NULL;
	struct ck_vattr va;

	while (n && !(a = n->anchor))
		n = n->parent;
	if (ck_view_getattr(c->view, a ? a : ck_view_root(c->view), &va)) {
		memset(o, 0, sizeof(*o));   /* gone: root's, and nothing for the others */
		o->mode = a ? 0500 : 0555;
		return;
	}
	o->uid = va.uid;
	o->gid = va.gid;
	if (!a)
		o->mode = 0555;
	else if (S_ISDIR(va.mode))
		o->mode = (uint32_t)va.mode & 0555;
	else
		o->mode = ((uint32_t)va.mode & 0444) | (((uint32_t)va.mode & 0444) >> 2);
}

/* The sources of file n: its type's, or those of the file built. */
static int file_sources(struct ck_ctl *c, struct ctl_node *n, struct ctl_srcs *out)
{
	struct ck_vfile *f;
	int rc;

	if (n->type->sources)
		return n->type->sources(c, n, out);
	rc = node_vfile(c, n, &f);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < ck_vfile_nsources(f); i++)
		rc = ctl_srcs_add(out, ck_vfile_source(f, i));
	ck_vfile_put(f);
	return rc;
}

/* What node n shows (see ctl_int.h, ctl_spec_add and struct ctl_type):
 * files are read-only, so only read bits. */
static void node_owner(struct ck_ctl *c, struct ctl_node *n, struct ck_owner *o)
{
	struct ctl_srcs s = { 0 };

	if (n->is_dir) {
		dir_owner(c, n, o);
		return;
	}
	if (!file_sources(c, n, &s) && s.n)
		ck_view_sources_owner(c->view, s.v, s.n, o);
	else
		dir_owner(c, n->parent, o);
	o->mode &= 0444;
	ctl_srcs_free(&s);
}

static int attr_of(struct ck_ctl *c, struct ctl_node *n, struct ck_vattr *out)
{
	struct ck_owner o;

	memset(out, 0, sizeof(*out));
	out->ino = n->ino;
	out->mtime_ns = n->mtime_ns;
	node_owner(c, n, &o);
	out->uid = o.uid;
	out->gid = o.gid;
	if (n->is_dir) {
		out->mode = S_IFDIR | o.mode;
		out->nlink = 2;
		return 0;
	}
	out->mode = S_IFREG | o.mode;
	out->nlink = 1;
	if (n->type->size && !n->vfile)
		return n->type->size(c, n, &out->size);
	{
		struct ck_vfile *f;
		int rc = node_vfile(c, n, &f);

		if (rc == -ENOENT && n->type->is_volatile)
			return rc;   /* not there now */
		if (rc) {
			out->size = 0;   /* stat works for a file that cannot be built; open says why */
			return 0;
		}
		out->size = ck_vfile_size(f);
		ck_vfile_put(f);
	}
	return 0;
}

int ck_ctl_getattr(struct ck_ctl *c, uint64_t ino, struct ck_vattr *out)
{
	struct ctl_node *n = node_of(c, ino);

	return n ? attr_of(c, n, out) : -ENOENT;
}

static int lookup_node(struct ck_ctl *c, struct ctl_node *dir, const char *name, struct ctl_node **out)
{
	int rc;

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
	rc = refresh_dir(c, dir);
	if (rc)
		return rc;
	rc = -ENOENT;
	pthread_mutex_lock(&c->lock);
	{
		size_t lo = 0, hi = dir->nchildren;

		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			int cmp = strcmp(name, dir->children[mid]->name);

			if (!cmp) {
				*out = dir->children[mid];
				rc = 0;
				break;
			}
			if (cmp < 0)
				hi = mid;
			else
				lo = mid + 1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ck_ctl_lookup_series_file(struct ck_ctl *c, const char *series, const char *name, struct ck_vattr *out)
{
	struct ctl_node *n;
	int rc = series_file_node(c, series, name, &n);

	return rc ? rc : attr_of(c, n, out);
}

int ck_ctl_lookup(struct ck_ctl *c, uint64_t parent, const char *name, struct ck_vattr *out)
{
	struct ctl_node *dir = node_of(c, parent), *n;
	int rc;

	if (!dir)
		return -ENOENT;
	rc = lookup_node(c, dir, name, &n);
	return rc ? rc : attr_of(c, n, out);
}

int ck_ctl_readdir(struct ck_ctl *c, uint64_t ino, struct ck_ctl_dirent **out, size_t *count)
{
	struct ctl_node *dir = node_of(c, ino);
	struct ck_ctl_dirent *d;
	size_t n = 0;
	int rc;

	if (!dir)
		return -ENOENT;
	if (!dir->is_dir)
		return -ENOTDIR;
	rc = refresh_dir(c, dir);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	d = calloc(dir->nchildren + 1, sizeof(*d));
	for (size_t i = 0; d && i < dir->nchildren; i++) {
		d[i].name = strdup(dir->children[i]->name);
		d[i].ino = dir->children[i]->ino;
		d[i].is_dir = dir->children[i]->is_dir;
		n++;
		if (!d[i].name) {
			ck_ctl_dirents_free(d, n);
			d = NULL;
		}
	}
	pthread_mutex_unlock(&c->lock);
	if (!d)
		return -ENOMEM;
	*out = d;
	*count = n;
	return 0;
}

void ck_ctl_dirents_free(struct ck_ctl_dirent *d, size_t n)
{
	for (size_t i = 0; d && i < n; i++)
		free(d[i].name);
	free(d);
}

int ck_ctl_volatile(struct ck_ctl *c, uint64_t ino)
{
	struct ctl_node *n = node_of(c, ino);

	return n && !n->is_dir && n->type->is_volatile;
}

int ck_ctl_renamable(struct ck_ctl *c, uint64_t ino)
{
	struct ctl_node *n = node_of(c, ino);

	return n && (n->type->renamable || n->type->is_volatile);
}

int ck_ctl_access(struct ck_ctl *c, uint64_t ino, const struct ck_cred *cred, int mask)
{
	struct ctl_node *n = node_of(c, ino);
	struct ctl_srcs s = { 0 };
	struct ck_owner o;
	int rc;

	if (!n)
		return -ENOENT;
	node_owner(c, n, &o);
	rc = ck_perm_check(&o, n->is_dir, cred, mask);
	if (rc || n->is_dir || !(mask & CK_MAY_READ))
		return rc;
	/* Reading a file made of others' bytes reads them all. */
	rc = file_sources(c, n, &s);
	if (!rc)
		rc = ck_view_sources_access(c->view, s.v, s.n, cred, CK_MAY_READ);
	ctl_srcs_free(&s);
	return rc == -ENOMEM || rc == -EACCES ? rc : rc ? -EIO : 0;
}

int ck_ctl_open_file(struct ck_ctl *c, uint64_t ino, struct ck_vfile **out)
{
	struct ctl_node *n = node_of(c, ino);
	struct ck_vfile *f;
	int rc;

	if (!n)
		return -ENOENT;
	rc = node_vfile(c, n, &f);
	if (rc)
		return rc == -ENOMEM || rc == -EISDIR || (rc == -ENOENT && n->type->is_volatile) ? rc : -EIO;
	rc = ck_vfile_check(f);
	if (rc) {
		ck_vfile_put(f);
		return rc;
	}
	*out = f;
	return 0;
}

/* "weights/run/checkpoint-20/model.safetensors" for log lines and labels. */
static void node_path(const struct ctl_node *n, struct ck_buf *b)
{
	if (n->parent && n->parent->parent) {
		node_path(n->parent, b);
		ck_buf_putc(b, '/');
	}
	if (n->parent)
		ck_buf_puts(b, n->name);
}

static const char *const xattr_names[] = {
	"user.ckptfs.kind", "user.ckptfs.checkpoint", "user.ckptfs.step", "user.ckptfs.sources",
	"user.ckptfs.lossy",
};

/* user.ckptfs.lossy of file n: -ENODATA when it serves exact bytes only. */
static int node_lossy(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *out)
{
	struct ck_vfile *f;
	int rc;

	if (n->is_dir || n->type->is_volatile)
		return -ENODATA;
	rc = node_vfile(c, n, &f);
	if (rc)
		return rc == -ENOMEM ? rc : -EIO;
	rc = ck_vfile_lossy_json(f, out);
	ck_vfile_put(f);
	return rc;
}

int ck_ctl_getxattr(struct ck_ctl *c, uint64_t ino, const char *name, struct ck_buf *out)
{
	struct ctl_node *n = node_of(c, ino);
	struct ck_buf label = CK_BUF_INIT;
	int64_t step = 0;
	int rc;

	if (!n)
		return -ENOENT;
	if (!strcmp(name, "user.ckptfs.kind"))
		return ck_buf_puts(out, n->type->kind);
	if (!strcmp(name, "user.ckptfs.checkpoint") || !strcmp(name, "user.ckptfs.step")) {
		if (!n->type->ckpt || n->type->ckpt(c, n, &label, &step)) {
			ck_buf_free(&label);
			return -ENODATA;
		}
		if (!strcmp(name, "user.ckptfs.step"))
			rc = step < 0 ? -ENODATA : ck_buf_printf(out, "%lld", (long long)step);
		else
			rc = ck_buf_put(out, label.data, label.len);
		ck_buf_free(&label);
		return rc;
	}
	if (!strcmp(name, "user.ckptfs.sources") && !n->is_dir) {
		struct ck_buf path = CK_BUF_INIT;
		struct ck_vfile *f;

		rc = node_vfile(c, n, &f);
		if (rc)
			return rc == -ENOMEM ? rc : -EIO;
		node_path(n, &path);
		if (!n->type->ckpt || n->type->ckpt(c, n, &label, &step))
			ck_buf_puts(&label, "");
		rc = ck_buf_putc(&path, 0);
		if (!rc)
			rc = ck_buf_putc(&label, 0);
		/* The file is named by its path under .ckptfs. */
		if (!rc)
			rc = ck_vfile_sources_json(f, (const char *)label.data, (const char *)path.data, out);
		ck_vfile_put(f);
		ck_buf_free(&path);
		ck_buf_free(&label);
		return rc;
	}
	if (!strcmp(name, "user.ckptfs.lossy"))
		return node_lossy(c, n, out);
	return -ENODATA;
}

int ck_ctl_listxattr(struct ck_ctl *c, uint64_t ino, struct ck_buf *out)
{
	struct ctl_node *n = node_of(c, ino);
	struct ck_buf label = CK_BUF_INIT;
	int64_t step = 0;
	int has_ckpt, rc = 0;

	if (!n)
		return -ENOENT;
	has_ckpt = n->type->ckpt && !n->type->ckpt(c, n, &label, &step);
	ck_buf_free(&label);
	for (size_t i = 0; i < sizeof(xattr_names) / sizeof(xattr_names[0]) && !rc; i++) {
		if (i == 1 && !has_ckpt)
			continue;
		if (i == 2 && (!has_ckpt || step < 0))
			continue;
		if (i == 3 && n->is_dir)
			continue;
		if (i == 4) {
			struct ck_buf scratch = CK_BUF_INIT;
			int lossy = node_lossy(c, n, &scratch) == 0;

			ck_buf_free(&scratch);
			if (!lossy)
				continue;
		}
		rc = ck_buf_put(out, xattr_names[i], strlen(xattr_names[i]) + 1);
	}
	return rc;
}

int ck_ctl_resolve(struct ck_ctl *c, const char *path, uint64_t *ino)
{
	struct ctl_node *n = node_of(c, CK_CTL_ROOT_INO);
	char name[4096];
	int rc = 0;

	while (*path && !rc) {
		const char *slash = strchr(path, '/');
		size_t len = slash ? (size_t)(slash - path) : strlen(path);

		if (len >= sizeof(name))
			return -ENAMETOOLONG;
		if (len) {
			memcpy(name, path, len);
			name[len] = 0;
			rc = lookup_node(c, n, name, &n);
		}
		path += len + (slash ? 1 : 0);
	}
	if (!rc)
		*ino = n->ino;
	return rc;
}
