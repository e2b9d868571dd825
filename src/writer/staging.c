/* The in-progress inode table of a writable mount: directories being
 * written under STORE/staging/<series>/ and everything in them, as nodes
 * named by (parent, name).  The real filesystem is the truth; a node only
 * remembers where it is, so a rename moves one node and its subtree
 * follows.  Inode numbers are CK_STAGING_BIT | slot, slots never reused
 * while mounted (so a forgotten number cannot come back as another file).
 * Lookups by name go through a hash of (parent, series, name): a long run
 * creates many thousands of files, and every one of them stays a slot.
 * Directory handles are kept on a list so that those whose RELEASEDIR was
 * lost at unmount are still closed.
 */
#include "config.h"

#include <errno.h>
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <xxhash.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/store.h"
#include "ckptfs/writer_staging.h"

struct snode {
	uint64_t parent;        /* a staged ino, or 0 for series and top nodes */
	char *series;           /* series and top nodes */
	char *name;             /* NULL once removed or renamed over */
	int is_series;
	uint64_t nlookup;
	unsigned open;          /* file handles open on it */
	unsigned writing;       /* of those, open for writing */
	long wtop;              /* the top node's slot they count in (-1: none) */
	int busy;               /* top node: being committed */
	unsigned writers;       /* top node: handles open for writing in it */
	int writers_fd;         /* top node: its writers lock, held shared, or -1 */
	int writers_off;        /* top node: the lock given up for a commit */
	long hnext;             /* next slot in its hash chain; -1 ends it */
};

/* An open in-progress directory (fi->fh of opendir). */
struct ck_staged_dir {
	DIR *dir;
	struct ck_staged_dir *prev, *next;
};

struct ck_staging {
	char *store;
	char *staging_dir;      /* STORE/staging */
	pthread_mutex_t lock;
	pthread_cond_t unclaimed;   /* a commit released its directory */
	size_t nbusy;           /* top nodes claimed: listings skip the scan for them at 0 */
	struct snode **nodes;   /* slot i is ino CK_STAGING_BIT | (i + 1) */
	size_t n, cap;
	long *buckets;          /* first slot of each hash chain, -1 if none */
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
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->unclaimed, NULL);
	*out = s;
	return 0;
}

static void snode_free(struct snode *n)
{
	if (!n)
		return;
	if (n->writers_fd >= 0)
		ck_writers_unlock(n->writers_fd);
	free(n->series);
	free(n->name);
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
	free(s->staging_dir);
	free(s->store);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->unclaimed);
	free(s);
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

/* The hash of a node's key: (parent, name) inside a directory, (series,
 * name) for a top node, the series alone for a series node. */
static uint64_t key_hash(uint64_t parent, int is_series, const char *series, const char *name)
{
	uint64_t h = XXH3_64bits_withSeed(name ? name : "", name ? strlen(name) : 0, parent * 2 + (uint64_t)is_series);

	if (parent == 0 && series)
		h ^= XXH3_64bits(series, strlen(series)) * 0x9E3779B97F4A7C15ull;
	return h;
}

static uint64_t node_hash(const struct snode *n)
{
	return key_hash(n->parent, n->is_series, n->parent ? NULL : n->series, n->is_series ? NULL : n->name);
}

static void hash_insert(struct ck_staging *s, long slot)
{
	size_t b = node_hash(s->nodes[slot]) & (s->nbuckets - 1);

	s->nodes[slot]->hnext = s->buckets[b];
	s->buckets[b] = slot;
}

/* Takes a named node out of its chain (before its key changes). */
static void hash_remove(struct ck_staging *s, long slot)
{
	long *link = &s->buckets[node_hash(s->nodes[slot]) & (s->nbuckets - 1)];

	while (*link >= 0 && *link != slot)
		link = &s->nodes[*link]->hnext;
	if (*link == slot)
		*link = s->nodes[slot]->hnext;
}

/* Keeps chains short as slots accumulate: at most two slots a bucket.
 * 0 or -ENOMEM (the old table stays usable). */
static int hash_grow(struct ck_staging *s)
{
	size_t nb = s->nbuckets ? s->nbuckets * 2 : 256;
	long *b;

	if (s->n < s->nbuckets * 2)
		return 0;
	b = malloc(nb * sizeof(*b));
	if (!b)
		return -ENOMEM;
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = nb;
	for (size_t i = 0; i < nb; i++)
		b[i] = -1;
	for (size_t i = 0; i < s->n; i++)
		if (s->nodes[i] && s->nodes[i]->name)
			hash_insert(s, (long)i);
	return 0;
}

/* The slot of the named node, or -1.  name NULL with parent 0: a series node. */
static long find(struct ck_staging *s, uint64_t parent, const char *series, const char *name)
{
	int is_series = parent == 0 && !name;
	long i;

	if (!s->nbuckets)
		return -1;
	i = s->buckets[key_hash(parent, is_series, parent ? NULL : series, name) & (s->nbuckets - 1)];
	for (; i >= 0; i = s->nodes[i]->hnext) {
		struct snode *n = s->nodes[i];

		if (n->parent != parent || n->is_series != is_series)
			continue;
		if (is_series ? same(n->series, series) :
		    strcmp(n->name, name) == 0 && (parent || same(n->series, series)))
			return i;
	}
	return -1;
}

int ck_staging_get(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
		     uint64_t *ino)
{
	struct snode *n;
	long slot;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	slot = find(s, parent, series, name);
	if (slot >= 0) {
		s->nodes[slot]->nlookup++;
		*ino = CK_STAGING_BIT | (uint64_t)(slot + 1);
		goto out;
	}
	if (hash_grow(s)) {
		rc = -ENOMEM;
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
	n->parent = parent;
	n->wtop = -1;
	n->writers_fd = -1;
	n->is_series = parent == 0 && !name;
	n->name = strdup(name ? name : series);
	n->series = parent == 0 ? strdup(series) : NULL;
	if (!n->name || (parent == 0 && !n->series)) {
		snode_free(n);
		rc = -ENOMEM;
		goto out;
	}
	n->nlookup = 1;
	s->nodes[s->n++] = n;
	hash_insert(s, (long)s->n - 1);
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
		/* Only a removed node may go: a named one may be a parent. */
		if (n->nlookup == 0 && !n->name) {
			s->nodes[(ino & ~CK_STAGING_BIT) - 1] = NULL;
			snode_free(n);
		}
	}
	pthread_mutex_unlock(&s->lock);
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

/* Appends the path of n below STORE/staging to p, lock held. */
static int append_path(struct ck_staging *s, const struct snode *n, struct ck_buf *p, int depth)
{
	int rc;

	if (!n || !n->name || depth > 4096)
		return -ESTALE;
	if (n->parent == 0) {
		if (n->is_series)
			return ck_buf_printf(p, "%s/%s", s->staging_dir, n->series);
		return ck_buf_printf(p, "%s/%s/%s", s->staging_dir, n->series, n->name);
	}
	rc = append_path(s, node_at(s, n->parent), p, depth + 1);
	return rc ? rc : ck_buf_printf(p, "/%s", n->name);
}

int ck_staging_path(struct ck_staging *s, uint64_t ino, const char *child, char **path)
{
	struct ck_buf p = CK_BUF_INIT;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = append_path(s, node_at(s, ino), &p, 0);
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

static int top_info(struct ck_staging *s, uint64_t ino, int want_series, char **series, char **name)
{
	struct snode *n;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	n = node_at(s, ino);
	if (!n || !n->name || n->parent != 0 || n->is_series != want_series) {
		rc = -EINVAL;
	} else {
		*series = strdup(n->series);
		if (name)
			*name = strdup(n->name);
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

static void unname(struct ck_staging *s, long slot)
{
	struct snode *n = s->nodes[slot];

	hash_remove(s, slot);
	free(n->name);
	n->name = NULL;
	if (n->nlookup == 0) {
		s->nodes[slot] = NULL;
		snode_free(n);
	}
}

void ck_staging_moved(struct ck_staging *s, uint64_t parent, const char *series, const char *name,
			uint64_t newparent, const char *newname)
{
	long from, over;
	char *copy = strdup(newname);

	pthread_mutex_lock(&s->lock);
	from = find(s, parent, series, name);
	over = find(s, newparent, series, newname);
	if (over >= 0 && over != from)
		unname(s, over);
	if (from >= 0) {
		struct snode *n = s->nodes[from];

		if (copy) {
			hash_remove(s, from);
			free(n->name);
			n->name = copy;
			copy = NULL;
			n->parent = newparent;
			if (newparent) {
				free(n->series);
				n->series = NULL;
			}
			hash_insert(s, from);
		} else {
			unname(s, from);	/* out of memory: forget where it is */
		}
	}
	pthread_mutex_unlock(&s->lock);
	free(copy);
}

void ck_staging_removed(struct ck_staging *s, uint64_t parent, const char *series, const char *name)
{
	long slot;

	pthread_mutex_lock(&s->lock);
	slot = find(s, parent, series, name);
	if (slot >= 0)
		unname(s, slot);
	pthread_mutex_unlock(&s->lock);
}

/* The slot of the top node (directly under a series) that node ino is in,
 * lock held; -1 for series nodes and nodes removed or renamed away. */
static long top_slot(struct ck_staging *s, uint64_t ino)
{
	struct snode *n = node_at(s, ino);

	for (int depth = 0; n && n->name && depth < 4096; depth++) {
		if (n->parent == 0)
			return n->is_series ? -1 : (long)((ino & ~CK_STAGING_BIT) - 1);
		ino = n->parent;
		n = node_at(s, ino);
	}
	return -1;
}

/* The top node that n is in, lock held; NULL for series nodes and nodes
 * removed or renamed away. */
static struct snode *top_of(struct ck_staging *s, struct snode *n)
{
	for (int depth = 0; n && n->name && depth < 4096; depth++) {
		if (n->parent == 0)
			return n->is_series ? NULL : n;
		n = node_at(s, n->parent);
	}
	return NULL;
}

/* One more handle open for writing on file node n (ino) in its top
 * directory: this node's shared hold of the directory's writers lock
 * starts with the first.  Lock held; the lock file is touched under it,
 * which happens once per directory and node.  0 or -EBUSY (a commit of
 * the directory holds the lock, on some node). */
static int writer_in(struct ck_staging *s, struct snode *n, uint64_t ino)
{
	long slot = n->writing ? n->wtop : top_slot(s, ino);
	struct snode *top = slot >= 0 ? s->nodes[slot] : NULL;

	if (top == n || !top || !top->name)
		return 0;   /* a series marker, or a node moved away: nothing to hold */
	if (top->writers == 0 && top->writers_fd < 0 && !top->writers_off) {
		struct ck_error err = { { 0 } };
		int rc = ck_writers_share(s->store, top->series, top->name, &top->writers_fd, &err);

		if (rc == -EBUSY)
			return rc;
		if (rc < 0)
			ck_warn("%s/%s: other nodes' commits will not wait for this node's writes: %s",
				top->series, top->name, err.msg);
	}
	top->writers++;
	n->writing++;
	n->wtop = slot;
	return 0;
}

/* One handle open for writing on n closed, lock held: the last one in its
 * top directory gives up this node's hold of the writers lock (the
 * caller closed its descriptor first). */
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
	if (n && writing)
		writer_out(s, n);
	if (n && n->open)
		n->open--;
	if (n)
		left = n->open;
	pthread_mutex_unlock(&s->lock);
	return left;
}

int ck_staging_claim(struct ck_staging *s, const char *series, const char *name, int need_closed)
{
	struct snode *top;
	long slot;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	slot = find(s, 0, series, name);
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
	known = find(s, 0, series, name) >= 0;
	pthread_mutex_unlock(&s->lock);
	return known;
}

void ck_staging_writers_off(struct ck_staging *s, const char *series, const char *name)
{
	long slot;

	pthread_mutex_lock(&s->lock);
	slot = find(s, 0, series, name);
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
	slot = find(s, 0, series, name);
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
	slot = find(s, 0, series, name);
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
		long slot = find(s, 0, series, name);

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
	return t && t->busy && t->name && same(t->series, series);
}

static int top_in(const struct snode *t, const char *series)
{
	return t && t->name && t->parent == 0 && !t->is_series && same(t->series, series);
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
		(*names)[k] = strdup(s->nodes[i]->name);
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
		*series = strdup(top->series);
		*name = strdup(top->name);
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

int ck_staging_opendir(struct ck_staging *s, const char *path, struct ck_staged_dir **out)
{
	struct ck_staged_dir *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->dir = opendir(path);
	if (!d->dir) {
		int rc = -errno;

		free(d);
		return rc;
	}
	pthread_mutex_lock(&s->lock);
	d->next = s->dirs;
	if (s->dirs)
		s->dirs->prev = d;
	s->dirs = d;
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
	pthread_mutex_lock(&s->lock);
	if (d->prev)
		d->prev->next = d->next;
	else
		s->dirs = d->next;
	if (d->next)
		d->next->prev = d->prev;
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
	top = n && n->parent == 0 && !n->is_series;
	pthread_mutex_unlock(&s->lock);
	return top;
}
