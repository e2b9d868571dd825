/* The in-progress inode table of a writable mount: directories being
 * written under STORE/staging/<series>/ and everything in them.  The real
 * filesystem is the truth; a node remembers where it is by its names
 * (parent, name), one per hard link, so a rename moves one name and a
 * directory's subtree follows it.  Inode numbers are CK_STAGING_BIT | slot,
 * slots never reused while mounted (so a forgotten number cannot come back
 * as another file).  Names are found through a hash of (parent, series,
 * name): a long run creates many thousands of files, and every one of
 * them stays a slot.  Directory handles are kept on a list so that those
 * whose RELEASEDIR was lost at unmount are still closed.
 */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "ckptfs/store.h"
#include "ckptfs/writer_staging.h"

/* One name of a node.  Directories and series markers have one; a
 * regular file has one per hard link, the first giving its path. */
struct sname {
	uint64_t parent;        /* a staged ino, or 0 for series and top names */
	char *series;           /* series and top names */
	char *name;             /* NULL for a series node's name */
	long slot;              /* its node */
	struct sname *next;     /* the node's next name */
	struct sname *hnext;    /* next in its hash chain */
};

struct snode {
	struct sname *names;    /* NULL once removed or renamed over */
	int is_series;
	uint64_t nlookup;
	unsigned open;          /* file handles open on it */
	unsigned dirs_open;     /* directory handles open on it */
	unsigned writing;       /* of those, open for writing */
	long wtop;              /* the top node's slot they count in (-1: none) */
	int hold_fd;            /* while handles are open: a copy of one (fstat after unlink) */
	dev_t dev;              /* the real file, once seen: links found by lookup */
	ino_t rino;
	int linked;             /* seen with more than one link */
	int busy;               /* top node: being committed */
	unsigned writers;       /* top node: handles open for writing in it */
	int writers_fd;         /* top node: its writers lock, held shared, or -1 */
	int writers_off;        /* top node: the lock given up for a commit */
};

/* An open in-progress directory (fi->fh of opendir). */
struct ck_staged_dir {
	DIR *dir;
	uint64_t ino;
	struct ck_staged_dir *prev, *next;
};

struct ck_staging {
	char *store;
	char *staging_dir;      /* STORE/staging */
	atomic_int root_fd;     /* STORE/staging, O_PATH, once it exists; -1 before */
	pthread_mutex_t lock;
	pthread_cond_t unclaimed;   /* a commit released its directory */
	size_t nbusy;           /* top nodes claimed: listings skip the scan for them at 0 */
	struct snode **nodes;   /* slot i is ino CK_STAGING_BIT | (i + 1) */
	size_t n, cap;
	size_t nnames;          /* names in the hash */
	size_t nlinked;         /* nodes seen with more than one link */
	struct sname **buckets; /* hash chains of names */
	size_t nbuckets;        /* a power of two */
	struct ck_staged_dir *dirs;   /* open directory handles */
};

int ck_staging_new(const char *store, struct ck_staging **out)
{
	struct ck_staging *s = calloc(1, sizeof(*s));
	struct ck_buf dir = CK_BUF_INIT;

	if (!s)
		return -ENOMEM;
	if (ck_buf_printf(&dir, "%s/%s", store, CK_STORE_STAGING_DIR) || ck_buf_putc(&dir, '\0')) {
		ck_buf_free(&dir);
		free(s);
		return -ENOMEM;
	}
	s->staging_dir = (char *)ck_buf_steal(&dir, NULL);
	s->store = strdup(store);
	if (!s->store) {
		free(s->staging_dir);
		free(s);
		return -ENOMEM;
	}
	atomic_init(&s->root_fd, -1);
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->unclaimed, NULL);
	*out = s;
	return 0;
}

static void sname_free(struct sname *nm)
{
	free(nm->series);
	free(nm->name);
	free(nm);
}

static void snode_free(struct snode *n)
{
	if (!n)
		return;
	while (n->names) {
		struct sname *nm = n->names;

		n->names = nm->next;
		sname_free(nm);
	}
	if (n->writers_fd >= 0)
		ck_writers_unlock(n->writers_fd);
	if (n->hold_fd >= 0)
		close(n->hold_fd);
	free(n);
}

void ck_staging_free(struct ck_staging *s)
{
	if (!s)
		return;
	while (s->dirs)
		ck_staging_closedir(s, s->dirs);
	for (size_t i = 0; i < s->n; i++)
		snode_free(s->nodes[i]);
	free(s->nodes);
	free(s->buckets);
	if (atomic_load(&s->root_fd) >= 0)
		close(atomic_load(&s->root_fd));
	free(s->staging_dir);
	free(s->store);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->unclaimed);
	free(s);
}

static long slot_of(uint64_t ino)
{
	return (long)((ino & ~CK_STAGING_BIT) - 1);
}

static struct snode *node_at(struct ck_staging *s, uint64_t ino)
{
	uint64_t slot = (ino & ~CK_STAGING_BIT) - 1;

	if (!ck_staging_is_staged(ino) || slot >= s->n)
		return NULL;
	return s->nodes[slot];
}

static int same(const char *a, const char *b)
{
	return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* The hash of a name's key: (parent, name) inside a directory, (series,
 * name) for a top name, the series alone for a series node's name. */
static uint64_t key_hash(uint64_t parent, const char *series, const char *name)
{
	uint64_t h = XXH3_64bits_withSeed(name ? name : "", name ? strlen(name) : 0, parent * 2 + !name);

	if (parent == 0 && series)
		h ^= XXH3_64bits(series, strlen(series)) * 0x9E3779B97F4A7C15ull;
	return h;
}

static struct sname **chain_of(struct ck_staging *s, const struct sname *nm)
{
	return &s->buckets[key_hash(nm->parent, nm->parent ? NULL : nm->series, nm->name) & (s->nbuckets - 1)];
}

static void hash_insert(struct ck_staging *s, struct sname *nm)
{
	struct sname **b = chain_of(s, nm);

	nm->hnext = *b;
	*b = nm;
}

/* Takes a name out of its chain (before its key changes). */
static void hash_remove(struct ck_staging *s, struct sname *nm)
{
	struct sname **link = chain_of(s, nm);

	while (*link && *link != nm)
		link = &(*link)->hnext;
	if (*link)
		*link = nm->hnext;
}

/* Keeps chains short as names accumulate: at most two a bucket.  0 or
 * -ENOMEM (the old table stays usable). */
static int hash_grow(struct ck_staging *s)
{
	size_t nb = s->nbuckets ? s->nbuckets * 2 : 256;
	struct sname **old = s->buckets, **b;
	size_t oldn = s->nbuckets;

	if (s->nnames + 1 < s->nbuckets * 2)
		return 0;
	b = calloc(nb, sizeof(*b));
	if (!b)
		return -ENOMEM;
	s->buckets = b;
	s->nbuckets = nb;
	for (size_t i = 0; i < oldn; i++) {
		for (struct sname *nm = old[i], *next; nm; nm = next) {
			next = nm->hnext;
			hash_insert(s, nm);
		}
	}
	free(old);
	return 0;
}

/* The name (parent, series, name), or NULL.  name NULL with parent 0: a
 * series node's. */
static struct sname *find(struct ck_staging *s, uint64_t parent, const char *series, const char *name)
{
	struct sname *nm;

	if (!s->nbuckets)
		return NULL;
	nm = s->buckets[key_hash(parent, parent ? NULL : series, name) & (s->nbuckets - 1)];
	for (; nm; nm = nm->hnext) {
		if (nm->parent != parent || !same(nm->name, name))
			continue;
		if (parent || same(nm->series, series))
			return nm;
	}
	return NULL;
}

static long find_slot(struct ck_staging *s, uint64_t parent, const char *series, const char *name)
{
	struct sname *nm = find(s, parent, series, name);

	return nm ? nm->slot : -1;
}

/* A new name (parent, series, name) of node slot, last of its names.
 * 0 or -ENOMEM. */
static int add_name(struct ck_staging *s, long slot, uint64_t parent, const char *series, const char *name)
{
	struct sname *nm = calloc(1, sizeof(*nm)), **tail;

	if (!nm || hash_grow(s)) {
		free(nm);
		return -ENOMEM;
	}
	nm->parent = parent;
	nm->slot = slot;
	nm->name = name ? strdup(name) : NULL;
	nm->series = parent == 0 ? strdup(series) : NULL;
	if ((name && !nm->name) || (parent == 0 && !nm->series)) {
		sname_free(nm);
		return -ENOMEM;
	}
	for (tail = &s->nodes[slot]->names; *tail; tail = &(*tail)->next)
		;
	*tail = nm;
	hash_insert(s, nm);
	s->nnames++;
	return 0;
}

/* Frees node slot once nothing refers to it: no name, no lookup, no
 * handle.  Lock held. */
static void maybe_free(struct ck_staging *s, long slot)
{
	struct snode *n = s->nodes[slot];

	if (n && !n->names && n->nlookup == 0 && n->open == 0 && n->dirs_open == 0) {
		s->nodes[slot] = NULL;
		if (n->linked)
			s->nlinked--;
		snode_free(n);
	}
}

/* Takes name nm away from its node (unlink, rename over, commit). */
static void drop_name(struct ck_staging *s, struct sname *nm)
{
	struct snode *n = s->nodes[nm->slot];
	struct sname **link = &n->names;
	long slot = nm->slot;

	while (*link && *link != nm)
		link = &(*link)->next;
	if (*link)
		*link = nm->next;
	hash_remove(s, nm);
	s->nnames--;
	sname_free(nm);
	maybe_free(s, slot);
}

char *ck_staging_top_path(struct ck_staging *s, const char *series, const char *name)
{
	struct ck_buf p = CK_BUF_INIT;
	int rc = ck_buf_printf(&p, "%s/%s", s->staging_dir, series);

	if (!rc && name)
		rc = ck_buf_printf(&p, "/%s", name);
	if (!rc)
		rc = ck_buf_putc(&p, '\0');
	if (rc) {
		ck_buf_free(&p);
		return NULL;
	}
	return (char *)ck_buf_steal(&p, NULL);
}

/* Appends the path of n below STORE/staging ("series/dir/...") to p, by
 * its first names, lock held.  -ESTALE when a name on the way is gone. */
static int path_rel(struct ck_staging *s, const struct snode *n, struct ck_buf *p, int depth)
{
	const struct sname *nm = n ? n->names : NULL;
	int rc;

	if (!nm || depth > 4096)
		return -ESTALE;
	if (nm->parent == 0) {
		if (n->is_series)
			return ck_buf_puts(p, nm->series);
		return ck_buf_printf(p, "%s/%s", nm->series, nm->name);
	}
	rc = path_rel(s, node_at(s, nm->parent), p, depth + 1);
	return rc ? rc : ck_buf_printf(p, "/%s", nm->name);
}

/* ---- Reaching nodes with the *at system calls ---- */

/* STORE/staging, opened once it exists.  The descriptor or -errno. */
static int root_fd(struct ck_staging *s)
{
	int fd = atomic_load(&s->root_fd), expected = -1;

	if (fd >= 0)
		return fd;
	fd = open(s->staging_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (!atomic_compare_exchange_strong(&s->root_fd, &expected, fd)) {
		close(fd);
		fd = expected;
	}
	return fd;
}

/* fstatat of STORE/staging/rel, reached as ck_staging_at reaches nodes. */
static int stat_rel(struct ck_staging *s, const char *rel, struct stat *st)
{
	struct ck_staged_at at = { -1, NULL };
	const char *slash = strrchr(rel, '/');
	int root = root_fd(s), rc;
	char *dir;

	if (root < 0)
		return root;
	dir = slash ? strndup(rel, (size_t)(slash - rel)) : strdup("");
	if (!dir)
		return -ENOMEM;
	at.dir = ck_open_dir_beneath(root, dir);
	free(dir);
	if (at.dir < 0)
		return at.dir;
	rc = fstatat(at.dir, slash ? slash + 1 : rel, st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
	close(at.dir);
	return rc;
}

/* A named node of real identity (dev, ino), seen with several links, whose
 * first name still leads to that file: another name of it, found by a
 * lookup (a link made before the mount, or forgotten by the kernel).
 * Lock held; a stat of the candidate's path under it (rare: only files
 * that have several links).  Its slot or -1. */
static long linked_node(struct ck_staging *s, const struct stat *st)
{
	for (size_t i = 0; s->nlinked && i < s->n; i++) {
		struct snode *n = s->nodes[i];
		struct ck_buf p = CK_BUF_INIT;
		struct stat now;
		int ok;

		if (!n || !n->names || n->is_series || !n->linked || n->dev != st->st_dev || n->rino != st->st_ino)
			continue;
		ok = path_rel(s, n, &p, 0) == 0 && ck_buf_putc(&p, '\0') == 0 &&
		     stat_rel(s, (const char *)p.data, &now) == 0 && now.st_dev == st->st_dev &&
		     now.st_ino == st->st_ino;
		ck_buf_free(&p);
		if (ok)
			return (long)i;
	}
	return -1;
}

static void note_identity(struct ck_staging *s, struct snode *n, const struct stat *st)
{
	if (!st || !S_ISREG(st->st_mode))
		return;
	if (!n->linked && st->st_nlink > 1) {
		n->linked = 1;
		s->nlinked++;
	}
	n->dev = st->st_dev;
	n->rino = st->st_ino;
}

int ck_staging_get(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		   const struct stat *st, uint64_t *ino)
{
	struct snode *n;
	long slot;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	slot = find_slot(s, parent, series, name);
	if (slot < 0 && parent && st && S_ISREG(st->st_mode) && st->st_nlink > 1) {
		slot = linked_node(s, st);
		if (slot >= 0 && (rc = add_name(s, slot, parent, series, name)) != 0)
			goto out;
	}
	if (slot >= 0) {
		s->nodes[slot]->nlookup++;
		note_identity(s, s->nodes[slot], st);
		*ino = CK_STAGING_BIT | (uint64_t)(slot + 1);
		goto out;
	}
	if (s->n == s->cap) {
		struct snode **nodes = ck_grow(s->nodes, &s->cap, sizeof(*nodes), 64);

		if (!nodes) {
			rc = -ENOMEM;
			goto out;
		}
		s->nodes = nodes;
	}
	n = calloc(1, sizeof(*n));
	if (!n) {
		rc = -ENOMEM;
		goto out;
	}
	n->wtop = -1;
	n->writers_fd = -1;
	n->hold_fd = -1;
	n->is_series = parent == 0 && !name;
	n->nlookup = 1;
	s->nodes[s->n] = n;
	if (add_name(s, (long)s->n, parent, series, name)) {
		s->nodes[s->n] = NULL;
		snode_free(n);
		rc = -ENOMEM;
		goto out;
	}
	note_identity(s, n, st);
	s->n++;
	*ino = CK_STAGING_BIT | (uint64_t)s->n;
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

void ck_staging_forget(struct ck_staging *s, uint64_t ino, uint64_t nlookup)
{
	struct snode *n;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (n) {
		n->nlookup = nlookup < n->nlookup ? n->nlookup - nlookup : 0;
		/* Only a nameless node may go: a named one may be a parent. */
		maybe_free(s, slot_of(ino));
	}
	pthread_mutex_unlock(&s->lock);
}

int ck_staging_path(struct ck_staging *s, uint64_t ino, const char *child, char **path)
{
	struct ck_buf p = CK_BUF_INIT;
	int rc = ck_buf_printf(&p, "%s/", s->staging_dir);

	pthread_mutex_lock(&s->lock);
	if (!rc)
		rc = path_rel(s, node_at(s, ino), &p, 0);
	pthread_mutex_unlock(&s->lock);
	if (!rc && child)
		rc = ck_buf_printf(&p, "/%s", child);
	if (!rc)
		rc = ck_buf_putc(&p, '\0');
	if (rc) {
		ck_buf_free(&p);
		return rc;
	}
	*path = (char *)ck_buf_steal(&p, NULL);
	return 0;
}

/* at for the directory rel below STORE/staging and the name leaf in it. */
static int at_of(struct ck_staging *s, const char *rel, const char *leaf, struct ck_staged_at *at)
{
	int root = root_fd(s);

	at->dir = -1;
	at->name = NULL;
	if (root < 0)
		return root;
	at->name = strdup(leaf);
	if (!at->name)
		return -ENOMEM;
	at->dir = ck_open_dir_beneath(root, rel);
	if (at->dir < 0) {
		int rc = at->dir;

		free(at->name);
		at->name = NULL;
		return rc;
	}
	return 0;
}

int ck_staging_at(struct ck_staging *s, uint64_t ino, const char *child, struct ck_staged_at *at)
{
	struct ck_buf dir = CK_BUF_INIT, leaf = CK_BUF_INIT;
	struct snode *n;
	int rc;

	at->dir = -1;
	at->name = NULL;
	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (child) {
		rc = path_rel(s, n, &dir, 0);
		if (!rc)
			rc = ck_buf_puts(&leaf, child);
	} else if (!n || !n->names) {
		rc = -ESTALE;
	} else if (n->names->parent == 0) {
		/* a series (in STORE/staging) or a top name (in its series) */
		if (n->is_series)
			rc = ck_buf_puts(&leaf, n->names->series);
		else if ((rc = ck_buf_puts(&dir, n->names->series)) == 0)
			rc = ck_buf_puts(&leaf, n->names->name);
	} else {
		rc = path_rel(s, node_at(s, n->names->parent), &dir, 0);
		if (!rc)
			rc = ck_buf_puts(&leaf, n->names->name);
	}
	pthread_mutex_unlock(&s->lock);
	if (!rc && (ck_buf_putc(&dir, '\0') || ck_buf_putc(&leaf, '\0')))
		rc = -ENOMEM;
	if (!rc)
		rc = at_of(s, (const char *)dir.data, (const char *)leaf.data, at);
	ck_buf_free(&dir);
	ck_buf_free(&leaf);
	return rc;
}

int ck_staging_top_at(struct ck_staging *s, const char *series, const char *name, struct ck_staged_at *at)
{
	return name ? at_of(s, series, name, at) : at_of(s, "", series, at);
}

void ck_staging_at_free(struct ck_staged_at *at)
{
	if (at->dir >= 0)
		close(at->dir);
	free(at->name);
	at->dir = -1;
	at->name = NULL;
}

/* Keeps a copy of fd in n, lock held (while a handle is open on it). */
static void hold(struct snode *n, int fd)
{
	if (n->hold_fd < 0)
		n->hold_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

/* Closes n's copy once no handle is open on it, lock held. */
static void unhold(struct snode *n)
{
	if (n->open == 0 && n->dirs_open == 0 && n->hold_fd >= 0) {
		close(n->hold_fd);
		n->hold_fd = -1;
	}
}

void ck_staging_hold(struct ck_staging *s, uint64_t ino, int fd)
{
	struct snode *n;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (n && n->open)
		hold(n, fd);
	pthread_mutex_unlock(&s->lock);
}

int ck_staging_held_fd(struct ck_staging *s, uint64_t ino)
{
	struct snode *n;
	int fd = -ESTALE;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (n && n->hold_fd >= 0) {
		fd = fcntl(n->hold_fd, F_DUPFD_CLOEXEC, 3);
		if (fd < 0)
			fd = -errno;
	}
	pthread_mutex_unlock(&s->lock);
	return fd;
}

/* ---- Names ---- */

static int top_info(struct ck_staging *s, uint64_t ino, int want_series, char **series, char **name)
{
	struct snode *n;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (!n || !n->names || n->names->parent != 0 || n->is_series != want_series) {
		rc = -EINVAL;
	} else {
		*series = strdup(n->names->series);
		if (name)
			*name = strdup(n->names->name);
		if (!*series || (name && !*name)) {
			free(*series);
			if (name)
				free(*name);
			rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int ck_staging_top(struct ck_staging *s, uint64_t ino, char **series, char **name)
{
	return top_info(s, ino, 0, series, name);
}

int ck_staging_series(struct ck_staging *s, uint64_t ino, char **series)
{
	return top_info(s, ino, 1, series, NULL);
}

/* Gives name nm the key (parent, series, name), lock held.  0 or -ENOMEM
 * (nm unchanged). */
static int rekey(struct ck_staging *s, struct sname *nm, uint64_t parent, const char *series, const char *name)
{
	char *n = strdup(name), *sr = parent == 0 ? strdup(series) : NULL;

	if (!n || (parent == 0 && !sr)) {
		free(n);
		free(sr);
		return -ENOMEM;
	}
	hash_remove(s, nm);
	free(nm->name);
	free(nm->series);
	nm->name = n;
	nm->series = sr;
	nm->parent = parent;
	hash_insert(s, nm);
	return 0;
}

void ck_staging_moved(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		      uint64_t newparent, const char *newname, int exchange)
{
	struct sname *from, *over;

	pthread_mutex_lock(&s->lock);
	from = find(s, parent, series, name);
	over = find(s, newparent, series, newname);
	/* Two links of one file: rename(2) does nothing, an exchange nothing seen. */
	if (from && over && from != over && from->slot == over->slot)
		goto out;
	if (exchange && over && rekey(s, over, parent, series, name))
		drop_name(s, over);	/* out of memory: forget where it is */
	else if (!exchange && over && over != from)
		drop_name(s, over);
	if (from && rekey(s, from, newparent, series, newname))
		drop_name(s, from);
out:
	pthread_mutex_unlock(&s->lock);
}

void ck_staging_removed(struct ck_staging *s, uint64_t parent, const char *series, const char *name)
{
	struct sname *nm;

	pthread_mutex_lock(&s->lock);
	nm = find(s, parent, series, name);
	if (nm)
		drop_name(s, nm);
	pthread_mutex_unlock(&s->lock);
}

int ck_staging_linked(struct ck_staging *s, uint64_t ino, uint64_t newparent, const char *newname)
{
	struct snode *n;
	struct sname *over;
	int rc = -ESTALE;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	over = find(s, newparent, NULL, newname);
	if (over)
		drop_name(s, over);	/* a name the table kept after it went behind its back */
	n = node_at(s, ino);
	if (n && newparent) {
		rc = add_name(s, slot_of(ino), newparent, NULL, newname);
		if (rc == 0) {
			n->nlookup++;	/* the kernel counts the entry it gets back */
			if (!n->linked) {
				n->linked = 1;
				s->nlinked++;
			}
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* The slot of the top node (directly under a series) that node ino is in,
 * lock held; -1 for series nodes and nodes removed or renamed away. */
static long top_slot(struct ck_staging *s, uint64_t ino)
{
	struct snode *n = node_at(s, ino);

	for (int depth = 0; n && n->names && depth < 4096; depth++) {
		if (n->names->parent == 0)
			return n->is_series ? -1 : slot_of(ino);
		ino = n->names->parent;
		n = node_at(s, ino);
	}
	return -1;
}

/* The top node that n is in, lock held; NULL for series nodes and nodes
 * removed or renamed away. */
static struct snode *top_of(struct ck_staging *s, struct snode *n)
{
	for (int depth = 0; n && n->names && depth < 4096; depth++) {
		if (n->names->parent == 0)
			return n->is_series ? NULL : n;
		n = node_at(s, n->names->parent);
	}
	return NULL;
}

int ck_staging_same_top(struct ck_staging *s, uint64_t a, uint64_t b)
{
	int same_top;

	pthread_mutex_lock(&s->lock);
	same_top = top_slot(s, a) >= 0 && top_slot(s, a) == top_slot(s, b);
	pthread_mutex_unlock(&s->lock);
	return same_top;
}

/* ---- Open handles and claims ---- */

/* One more handle open for writing on file node n (ino) in its top
 * directory: this node's shared hold of the directory's writers lock
 * starts with the first.  Lock held; the lock file is touched under it,
 * which happens once per directory and node.  0 or -EBUSY (a commit of
 * the directory holds the lock, on some node). */
static int writer_in(struct ck_staging *s, struct snode *n, uint64_t ino)
{
	long slot = n->writing ? n->wtop : top_slot(s, ino);
	struct snode *top = slot >= 0 ? s->nodes[slot] : NULL;

	if (top == n || !top || !top->names)
		return 0;   /* a series marker, or a node moved away: nothing to hold */
	if (top->writers == 0 && top->writers_fd < 0 && !top->writers_off) {
		struct ck_error err = { { 0 } };
		int rc = ck_writers_share(s->store, top->names->series, top->names->name, &top->writers_fd, &err);

		if (rc == -EBUSY)
			return rc;
		if (rc < 0)
			ck_warn("%s/%s: other nodes' commits will not wait for this node's writes: %s",
				top->names->series, top->names->name, err.msg);
	}
	top->writers++;
	n->writing++;
	n->wtop = slot;
	return 0;
}

/* One handle open for writing on n closed, lock held: the last one in its
 * top directory gives up this node's hold of the writers lock (the
 * caller closed its descriptor first, and the node's held copy is closed
 * by now when it was the last handle). */
static void writer_out(struct ck_staging *s, struct snode *n)
{
	struct snode *top = n->wtop >= 0 && (size_t)n->wtop < s->n ? s->nodes[n->wtop] : NULL;

	if (!n->writing)
		return;
	if (--n->writing == 0)
		n->wtop = -1;
	if (top && top->writers && --top->writers == 0) {
		ck_writers_unlock(top->writers_fd);
		top->writers_fd = -1;
	}
}

int ck_staging_open_begin(struct ck_staging *s, uint64_t ino, int writing)
{
	struct snode *n, *top;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	top = top_of(s, n);
	if (!n)
		rc = -ESTALE;
	else if (writing && top && top->busy)
		rc = -EBUSY;
	else if (writing)
		rc = writer_in(s, n, ino);
	if (rc == 0)
		n->open++;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int ck_staging_busy(struct ck_staging *s, uint64_t ino)
{
	struct snode *top;
	int busy;

	pthread_mutex_lock(&s->lock);
	top = top_of(s, node_at(s, ino));
	busy = top && top->busy;
	pthread_mutex_unlock(&s->lock);
	return busy;
}

unsigned ck_staging_open_end(struct ck_staging *s, uint64_t ino, int writing)
{
	struct snode *n;
	unsigned left = 0;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (n && n->open)
		n->open--;
	if (n)
		unhold(n);   /* before the writers lock goes: close-to-open */
	if (n && writing)
		writer_out(s, n);
	if (n)
		left = n->open;
	if (n && left == 0)
		maybe_free(s, slot_of(ino));
	pthread_mutex_unlock(&s->lock);
	return left;
}

int ck_staging_claim(struct ck_staging *s, const char *series, const char *name, int need_closed)
{
	struct snode *top;
	long slot;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	slot = find_slot(s, 0, series, name);
	top = slot >= 0 ? s->nodes[slot] : NULL;
	if (top && top->busy)
		rc = -EBUSY;
	for (size_t i = 0; need_closed && top && rc == 0 && i < s->n; i++)
		if (s->nodes[i] && s->nodes[i]->open && top_of(s, s->nodes[i]) == top)
			rc = -EBUSY;
	if (rc == 0 && top) {
		top->busy = 1;
		s->nbusy++;
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* Whether STORE/staging/<series>/<name> is there. */
static int still_staged(struct ck_staging *s, const char *series, const char *name)
{
	char *path = ck_staging_top_path(s, series, name);
	struct stat sb;
	int there = path && lstat(path, &sb) == 0;

	free(path);
	return there;
}

int ck_staging_known(struct ck_staging *s, const char *series, const char *name)
{
	int known;

	pthread_mutex_lock(&s->lock);
	known = find_slot(s, 0, series, name) >= 0;
	pthread_mutex_unlock(&s->lock);
	return known;
}

void ck_staging_writers_off(struct ck_staging *s, const char *series, const char *name)
{
	long slot;

	pthread_mutex_lock(&s->lock);
	slot = find_slot(s, 0, series, name);
	if (slot >= 0) {
		struct snode *top = s->nodes[slot];

		ck_writers_unlock(top->writers_fd);
		top->writers_fd = -1;
		top->writers_off = 1;
	}
	pthread_mutex_unlock(&s->lock);
}

void ck_staging_writers_on(struct ck_staging *s, const char *series, const char *name)
{
	long slot;

	pthread_mutex_lock(&s->lock);
	slot = find_slot(s, 0, series, name);
	if (slot >= 0) {
		struct snode *top = s->nodes[slot];
		struct ck_error err = { { 0 } };

		top->writers_off = 0;
		if (top->writers && top->writers_fd < 0 && still_staged(s, series, name) &&
		    ck_writers_share(s->store, series, name, &top->writers_fd, &err) < 0)
			ck_warn("%s/%s: other nodes' commits will not wait for this node's writes: %s", series,
				name, err.msg);
	}
	pthread_mutex_unlock(&s->lock);
}

void ck_staging_unclaim(struct ck_staging *s, const char *series, const char *name)
{
	long slot;

	pthread_mutex_lock(&s->lock);
	slot = find_slot(s, 0, series, name);
	if (slot >= 0 && s->nodes[slot]->busy) {
		s->nodes[slot]->busy = 0;
		s->nbusy--;
	}
	pthread_cond_broadcast(&s->unclaimed);
	pthread_mutex_unlock(&s->lock);
}

int ck_staging_wait_unclaimed(struct ck_staging *s, const char *series, const char *name)
{
	int waited = 0;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		long slot = find_slot(s, 0, series, name);

		if (slot < 0 || !s->nodes[slot]->busy)
			break;
		waited = 1;
		pthread_cond_wait(&s->unclaimed, &s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return waited;
}

static int claimed_in(const struct snode *t, const char *series)
{
	return t && t->busy && t->names && same(t->names->series, series);
}

static int top_in(const struct snode *t, const char *series)
{
	return t && t->names && t->names->parent == 0 && !t->is_series && same(t->names->series, series);
}

/* The names of the nodes that match (in series), allocated.  Lock held. */
static int names_of(struct ck_staging *s, const char *series, int (*match)(const struct snode *, const char *),
		    char ***names, size_t *n)
{
	size_t count = 0, k = 0;
	int rc = 0;

	*names = NULL;
	*n = 0;
	for (size_t i = 0; i < s->n; i++)
		if (match(s->nodes[i], series))
			count++;
	if (count) {
		*names = calloc(count, sizeof(**names));
		rc = *names ? 0 : -ENOMEM;
	}
	for (size_t i = 0; i < s->n && rc == 0 && k < count; i++) {
		if (!match(s->nodes[i], series))
			continue;
		(*names)[k] = strdup(s->nodes[i]->names->name);
		if (!(*names)[k++])
			rc = -ENOMEM;
	}
	if (rc) {
		ck_strv_free(*names, k);
		*names = NULL;
		return rc;
	}
	*n = count;
	return 0;
}

int ck_staging_claimed(struct ck_staging *s, const char *series, char ***names, size_t *n)
{
	int rc = 0;

	*names = NULL;
	*n = 0;
	pthread_mutex_lock(&s->lock);
	/* Every slot ever made stays (thousands in a long run); commits are rare. */
	if (s->nbusy)
		rc = names_of(s, series, claimed_in, names, n);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int ck_staging_tops(struct ck_staging *s, const char *series, char ***names, size_t *n)
{
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = names_of(s, series, top_in, names, n);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int ck_staging_top_of(struct ck_staging *s, uint64_t ino, char **series, char **name)
{
	struct snode *top;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	top = top_of(s, node_at(s, ino));
	if (!top) {
		rc = -EINVAL;
	} else {
		*series = strdup(top->names->series);
		*name = strdup(top->names->name);
		if (!*series || !*name) {
			free(*series);
			free(*name);
			rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int ck_staging_mkdir(struct ck_staging *s, const char *series, const char *name, mode_t mode)
{
	char *path = ck_staging_top_path(s, series, name);
	int rc = 0;

	if (!path)
		return -ENOMEM;
	/* The parents first; whatever stops them, the last mkdir tells. */
	mkdir(s->staging_dir, 0755);
	if (name) {
		char *series_dir = ck_staging_top_path(s, series, NULL);

		if (!series_dir)
			rc = -ENOMEM;
		else
			mkdir(series_dir, 0755);
		free(series_dir);
	}
	if (rc == 0 && mkdir(path, mode) != 0)
		rc = -errno;
	free(path);
	return rc;
}

/* ---- Directory handles ---- */

int ck_staging_opendir(struct ck_staging *s, uint64_t ino, struct ck_staged_dir **out)
{
	struct ck_staged_dir *d = calloc(1, sizeof(*d));
	struct ck_staged_at at;
	struct snode *n;
	int fd, rc;

	if (!d)
		return -ENOMEM;
	rc = ck_staging_at(s, ino, NULL, &at);
	if (rc == 0) {
		fd = openat(at.dir, at.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		rc = fd < 0 ? -errno : 0;
		if (rc == 0 && !(d->dir = fdopendir(fd))) {
			rc = -errno;
			close(fd);
		}
		ck_staging_at_free(&at);
	}
	if (rc) {
		free(d);
		return rc;
	}
	d->ino = ino;
	pthread_mutex_lock(&s->lock);
	d->next = s->dirs;
	if (s->dirs)
		s->dirs->prev = d;
	s->dirs = d;
	n = node_at(s, ino);
	if (n) {
		n->dirs_open++;
		hold(n, dirfd(d->dir));   /* answers fstat once rmdir took its name */
	}
	pthread_mutex_unlock(&s->lock);
	*out = d;
	return 0;
}

DIR *ck_staged_dir_stream(struct ck_staged_dir *d)
{
	return d->dir;
}

void ck_staging_closedir(struct ck_staging *s, struct ck_staged_dir *d)
{
	struct snode *n;

	pthread_mutex_lock(&s->lock);
	if (d->prev)
		d->prev->next = d->next;
	else
		s->dirs = d->next;
	if (d->next)
		d->next->prev = d->prev;
	n = node_at(s, d->ino);
	if (n && n->dirs_open) {
		n->dirs_open--;
		unhold(n);
		maybe_free(s, slot_of(d->ino));
	}
	pthread_mutex_unlock(&s->lock);
	closedir(d->dir);
	free(d);
}

int ck_staging_is_series_file(struct ck_staging *s, uint64_t ino)
{
	struct snode *n;
	int top;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	top = n && n->names && n->names->parent == 0 && !n->is_series;
	pthread_mutex_unlock(&s->lock);
	return top;
}
