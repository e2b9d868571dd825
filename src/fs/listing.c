/* Directory listings of view directories, taken whole at the start.
 *
 * A listing is read in several READDIR requests (one page each), and a
 * writable mount's series directory is two lists: the view's committed
 * checkpoints, then the in-progress directories.  A commit moves a name
 * from the second list to the first; read piecewise, the listing could
 * show it twice or not at all (a trainer resuming from `ls` would miss a
 * checkpoint).  So the first READDIR (offset 0) takes the whole listing
 * as one consistent snapshot, kept in the directory handle, and later
 * requests page through that: what the directory held at one moment, as
 * getdents on a local filesystem gives.
 *
 * Consistency of the two lists: the in-progress names are read after the
 * view's children, and a directory being committed is listed as in
 * progress until the view lists it (ck_writer_staged_names).  If the view's
 * listing changed while the names were read, the snapshot is taken again.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/writer.h"
#include "listing.h"
#include "nodes.h"

/* Retakes before settling for a snapshot the view changed under: each
 * retake follows a commit or refresh, so this only binds under a storm. */
#define RETAKES_MAX 16

struct ckfs_listing {
	pthread_mutex_t lock;   /* the kernel serialises READDIR per handle; cheap insurance */
	int taken;
	const struct ck_vnode **nodes;  /* the view's children */
	size_t nnodes;
	char **staged;          /* then in-progress directories (writable mounts) */
	size_t nstaged;
	char *series;           /* a staged series node's handle, else NULL */
	struct ckfs_listing *prev, *next;   /* on fs->listings, for unmount */
};

static void listing_clear(struct ckfs_listing *l)
{
	free(l->nodes);
	ck_strv_free(l->staged, l->nstaged);
	l->nodes = NULL;
	l->staged = NULL;
	l->nnodes = l->nstaged = 0;
	l->taken = 0;
}

int ckfs_listing_open(struct ckfs *fs, const char *series, struct ckfs_listing **out)
{
	struct ckfs_listing *l = calloc(1, sizeof(*l));

	if (!l)
		return -ENOMEM;
	if (series && !(l->series = strdup(series))) {
		free(l);
		return -ENOMEM;
	}
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_lock(&fs->listings_lock);
	l->next = fs->listings;
	if (l->next)
		l->next->prev = l;
	fs->listings = l;
	pthread_mutex_unlock(&fs->listings_lock);
	*out = l;
	return 0;
}

void ckfs_listing_close(struct ckfs *fs, struct ckfs_listing *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&fs->listings_lock);
	if (l->prev)
		l->prev->next = l->next;
	else
		fs->listings = l->next;
	if (l->next)
		l->next->prev = l->prev;
	pthread_mutex_unlock(&fs->listings_lock);
	listing_clear(l);
	pthread_mutex_destroy(&l->lock);
	free(l->series);
	free(l);
}

void ckfs_listings_free(struct ckfs *fs)
{
	while (fs->listings)
		ckfs_listing_close(fs, fs->listings);
}

/* The view's children of dir, or for a series handle those of the
 * series' directory if the view has one by now. */
static int view_part(struct ckfs *fs, const struct ck_vnode *dir, struct ckfs_listing *l,
		     const struct ck_vnode **series_dir, uint64_t *changes)
{
	uint64_t later;

	if (!l->series)
		return ck_view_children(fs->view, dir, &l->nodes, &l->nnodes, changes);
	/* Read first: a change after it, the lookup included, means a retake. */
	*changes = ck_view_namespace_changes(fs->view);
	if (ck_view_lookup(fs->view, ck_view_root(fs->view), l->series, series_dir) != 0) {
		*series_dir = NULL;
		return 0;
	}
	return ck_view_children(fs->view, *series_dir, &l->nodes, &l->nnodes, &later);
}

/* The in-progress directories a listing of the view's dir shows after its
 * children: at the root, new series; in a series directory, its
 * directories being written; elsewhere none.  0 or -ENOMEM. */
static int staged_names(struct ckfs *fs, const struct ck_vnode *dir, char ***names, size_t *n)
{
	const struct ck_vnode *root = ck_view_root(fs->view);

	*names = NULL;
	*n = 0;
	if (dir == root)
		return ck_writer_staged_names(fs->writer, NULL, dir, names, n);
	if (!ck_vnode_is_series_dir(fs->view, dir))
		return 0;
	return ck_writer_staged_names(fs->writer, ck_vnode_name(dir), dir, names, n);
}

/* Takes the snapshot of dir: 0 or -errno. */
static int listing_take(struct ckfs *fs, const struct ck_vnode *dir, struct ckfs_listing *l)
{
	int rc = 0;

	for (int tries = 0; ; tries++) {
		const struct ck_vnode *series_dir = NULL;
		uint64_t changes;

		listing_clear(l);
		rc = view_part(fs, dir, l, &series_dir, &changes);
		if (rc == 0 && fs->writer)
			rc = l->series ? ck_writer_staged_names(fs->writer, l->series, series_dir, &l->staged,
								&l->nstaged) :
				staged_names(fs, dir, &l->staged, &l->nstaged);
		if (rc || !fs->writer || ck_view_namespace_changes(fs->view) == changes)
			break;
		if (tries == RETAKES_MAX) {
			ck_debug("%s: listing taken while the view kept changing",
				 l->series ? l->series : ck_vnode_name(dir));
			break;
		}
	}
	if (rc)
		listing_clear(l);
	else
		l->taken = 1;
	return rc;
}

/* Entry i of the listing of dir (i == 0 takes it anew): a view node into
 * *node, or an in-progress directory's name into *staged (valid until the
 * next call on l).  0, -ENOENT past the end, or -errno. */
static int listing_entry(struct ckfs *fs, const struct ck_vnode *dir, struct ckfs_listing *l, size_t i,
			 const struct ck_vnode **node, const char **staged)
{
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	/* Offset 0 is a new listing (opendir, or rewinddir). */
	if (i == 0 || !l->taken)
		rc = listing_take(fs, dir, l);
	*node = NULL;
	*staged = NULL;
	if (rc == 0 && i < l->nnodes)
		*node = l->nodes[i];
	else if (rc == 0 && i - l->nnodes < l->nstaged)
		*staged = l->staged[i - l->nnodes];
	else if (rc == 0)
		rc = -ENOENT;
	pthread_mutex_unlock(&l->lock);
	return rc;
}

/* One directory entry at position pos: 0 is ".", 1 is "..", 2 + i the
 * listing's i-th entry.  Returns 0, -ENOENT past the end, or -errno. */
static int dir_entry(struct ckfs *fs, const struct ck_vnode *dir, const struct stat *dir_st,
		     struct ckfs_listing *l, off_t pos, int plus, const char **name,
		     struct fuse_entry_param *e)
{
	const struct ck_vnode *child;
	const char *staged;
	int rc;

	memset(e, 0, sizeof(*e));
	if (pos < 2) {
		/* The view has no parent links; the kernel answers ".." lookups
		 * itself, so d_ino of ".." only needs to be a directory's. */
		*name = pos == 0 ? "." : "..";
		e->attr.st_ino = dir_st->st_ino;
		e->attr.st_mode = S_IFDIR;
		return 0;
	}
	rc = listing_entry(fs, dir, l, (size_t)(pos - 2), &child, &staged);
	if (rc)
		return rc;
	if (staged) {
		/* No node yet (ino 0): the kernel looks it up when used. */
		*name = staged;
		e->attr.st_ino = CK_STAGING_BIT;
		e->attr.st_mode = S_IFDIR;
		return 0;
	}
	*name = ck_vnode_name(child);
	rc = ckfs_fill_entry(fs, child, e);
	if (rc) {
		/* Still list it, with unknown type; a stat will give the error.
		 * ino 0 tells the kernel not to cache an entry for it. */
		ck_debug("%s: attributes unavailable: %s", *name, strerror(-rc));
		memset(e, 0, sizeof(*e));
	} else if (!plus) {
		e->ino = 0;
	}
	return 0;
}

void ckfs_listing_reply(fuse_req_t req, const struct ck_vnode *dir, const struct stat *dir_st,
			struct ckfs_listing *l, size_t size, off_t off, int plus)
{
	struct ckfs *fs = ckfs_of(req);
	char *buf = malloc(size ? size : 1);
	size_t used = 0;
	int rc = 0;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (off_t pos = off; ; pos++) {
		struct fuse_entry_param e;
		const char *name;
		size_t len;

		rc = dir_entry(fs, dir, dir_st, l, pos, plus, &name, &e);
		if (rc)
			break;
		if (plus)
			len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, pos + 1);
		else
			len = fuse_add_direntry(req, buf + used, size - used, name, &e.attr, pos + 1);
		if (len > size - used)
			break;	/* full: the kernel asks again from pos */
		used += len;
	}
	/* An error after some entries is reported on the next call. */
	if (rc && rc != -ENOENT && used == 0)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_buf(req, buf, used);
	free(buf);
}
