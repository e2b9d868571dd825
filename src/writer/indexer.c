/* Parsing files written through the mount at their last close.
 *
 * A worker thread takes the paths of files whose last writable handle was
 * released, parses, verifies and hashes each as a commit would
 * (ck_preparse_file), and keeps the result keyed by the file's identity
 * (device and inode: a rename, of the file or of its directory on commit,
 * keeps it).  The commit that follows reuses those hashes for every file
 * that has not changed since, so committing after the completion marker
 * re-reads headers only: the heavy reading overlaps with the trainer
 * writing its next file; so does flushing it to disk, which the commit
 * would otherwise wait for.  `getfattr -n user.ckptfs.state` on an
 * in-progress file tells what the parse found.
 *
 * The commit runs in a forked child (child.c): ckw_indexer_fork() forks
 * with the table locked, so the child sees it whole and reads it without
 * locks (no other thread exists there).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/clock.h"
#include "ckptfs/ingest.h"
#include "ckptfs/log.h"
#include "ckptfs/records.h"
#include "indexer.h"

struct job {
	char *path;
	struct job *next;
};

struct entry {
	uint64_t dev, ino;
	char *path;                    /* where it was parsed */
	struct ck_preparsed *parsed;
	struct entry *next;            /* hash chain */
};

#define NBUCKETS 1024u

struct ckw_indexer {
	const struct ck_layer_rules *rules;
	size_t prefix_len;             /* of STORE/staging/, cut from paths in messages */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;           /* a job was queued, or stop */
	pthread_cond_t done;           /* a job finished */
	struct job *head, *tail;
	const char *current;           /* the path being parsed, or NULL */
	struct entry *buckets[NBUCKETS];
	int stop;
};

static size_t bucket_of(uint64_t dev, uint64_t ino)
{
	return (size_t)((ino * 0x9E3779B97F4A7C15ull) ^ dev) % NBUCKETS;
}

static void entry_free(struct entry *e)
{
	ck_preparsed_free(e->parsed);
	free(e->path);
	free(e);
}

/* Keeps parsed as the newest parse of its file, lock held. */
static void keep(struct ckw_indexer *ix, const char *path, struct ck_preparsed *parsed)
{
	const struct ck_file_info *fi = ck_preparsed_info(parsed);
	struct entry **link = &ix->buckets[bucket_of(fi->dev, fi->ino)], *e;

	for (e = *link; e; e = e->next) {
		if (e->dev == fi->dev && e->ino == fi->ino) {
			char *copy = strdup(path);

			if (!copy) {
				ck_preparsed_free(parsed);
				return;
			}
			ck_preparsed_free(e->parsed);
			free(e->path);
			e->parsed = parsed;
			e->path = copy;
			return;
		}
	}
	e = calloc(1, sizeof(*e));
	if (!e || !(e->path = strdup(path))) {
		free(e);
		ck_preparsed_free(parsed);
		return;	/* out of memory: the commit parses it itself */
	}
	e->dev = fi->dev;
	e->ino = fi->ino;
	e->parsed = parsed;
	e->next = *link;
	*link = e;
}

static void flush_to_disk(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		fdatasync(fd);
		close(fd);
	}
}

static void parse_one(struct ckw_indexer *ix, const char *path)
{
	const char *rel = strlen(path) > ix->prefix_len ? path + ix->prefix_len : path;
	struct ck_preparsed *parsed;
	const struct ck_file_info *fi;

	if (ck_preparse_file(ix->rules, path, rel, &parsed) < 0)
		return;	/* out of memory: the commit parses it itself */
	fi = ck_preparsed_info(parsed);
	if (fi->kind == CK_FILE_BAD)
		ck_info("%s: does not parse (yet): %s", rel, fi->error ? fi->error : "refused");
	else
		ck_debug("%s: parsed at its last close: %s, %u tensors", rel, ck_file_kind_name(fi->kind),
			 fi->ntensors);
	if (!fi->ino) {
		ck_preparsed_free(parsed);	/* could not even open it: gone */
		return;
	}
	/* The commit fsyncs every file; flushing now, in the background,
	 * leaves it little to wait for. */
	if (fi->kind != CK_FILE_BAD)
		flush_to_disk(path);
	pthread_mutex_lock(&ix->lock);
	keep(ix, path, parsed);
	pthread_mutex_unlock(&ix->lock);
}

static void *indexer_main(void *arg)
{
	struct ckw_indexer *ix = arg;

	pthread_mutex_lock(&ix->lock);
	for (;;) {
		struct job *j;

		while (!ix->stop && !ix->head)
			pthread_cond_wait(&ix->wake, &ix->lock);
		if (ix->stop)
			break;
		j = ix->head;
		ix->head = j->next;
		if (!ix->head)
			ix->tail = NULL;
		ix->current = j->path;
		pthread_mutex_unlock(&ix->lock);
		parse_one(ix, j->path);
		pthread_mutex_lock(&ix->lock);
		ix->current = NULL;
		pthread_cond_broadcast(&ix->done);
		free(j->path);
		free(j);
	}
	pthread_mutex_unlock(&ix->lock);
	return NULL;
}

int ckw_indexer_start(struct ckw_indexer **out, const struct ck_layer_rules *rules, const char *staging_dir)
{
	struct ckw_indexer *ix = calloc(1, sizeof(*ix));
	int rc;

	if (!ix)
		return -ENOMEM;
	ix->rules = rules;
	ix->prefix_len = strlen(staging_dir);
	if (ix->prefix_len && staging_dir[ix->prefix_len - 1] != '/')
		ix->prefix_len++;
	pthread_mutex_init(&ix->lock, NULL);
	pthread_cond_init(&ix->wake, NULL);
	pthread_cond_init(&ix->done, NULL);
	rc = pthread_create(&ix->thread, NULL, indexer_main, ix);
	if (rc) {
		pthread_cond_destroy(&ix->done);
		pthread_cond_destroy(&ix->wake);
		pthread_mutex_destroy(&ix->lock);
		free(ix);
		return -rc;
	}
	*out = ix;
	return 0;
}

void ckw_indexer_stop(struct ckw_indexer *ix)
{
	if (!ix)
		return;
	pthread_mutex_lock(&ix->lock);
	ix->stop = 1;
	pthread_cond_signal(&ix->wake);
	pthread_mutex_unlock(&ix->lock);
	pthread_join(ix->thread, NULL);
	while (ix->head) {
		struct job *j = ix->head;

		ix->head = j->next;
		free(j->path);
		free(j);
	}
	for (size_t b = 0; b < NBUCKETS; b++) {
		while (ix->buckets[b]) {
			struct entry *e = ix->buckets[b];

			ix->buckets[b] = e->next;
			entry_free(e);
		}
	}
	pthread_cond_destroy(&ix->done);
	pthread_cond_destroy(&ix->wake);
	pthread_mutex_destroy(&ix->lock);
	free(ix);
}

void ckw_indexer_enqueue(struct ckw_indexer *ix, const char *path)
{
	struct job *j;

	if (!ix)
		return;
	j = calloc(1, sizeof(*j));
	if (!j || !(j->path = strdup(path))) {
		free(j);
		return;	/* the commit parses it itself */
	}
	pthread_mutex_lock(&ix->lock);
	for (struct job *q = ix->head; q; q = q->next) {
		if (strcmp(q->path, path) == 0) {	/* already waiting: parse once */
			pthread_mutex_unlock(&ix->lock);
			free(j->path);
			free(j);
			return;
		}
	}
	if (ix->tail)
		ix->tail->next = j;
	else
		ix->head = j;
	ix->tail = j;
	pthread_cond_signal(&ix->wake);
	pthread_mutex_unlock(&ix->lock);
}

static int under(const char *path, const char *dir, size_t dlen)
{
	return strncmp(path, dir, dlen) == 0 && path[dlen] == '/';
}

void ckw_indexer_wait(struct ckw_indexer *ix, const char *dir)
{
	size_t dlen = strlen(dir);

	if (!ix)
		return;
	pthread_mutex_lock(&ix->lock);
	for (;;) {
		int pending = ix->current && under(ix->current, dir, dlen);

		for (struct job *q = ix->head; q && !pending; q = q->next)
			pending = under(q->path, dir, dlen);
		if (!pending)
			break;
		pthread_cond_wait(&ix->done, &ix->lock);
	}
	pthread_mutex_unlock(&ix->lock);
}

void ckw_indexer_forget(struct ckw_indexer *ix, const char *dir)
{
	size_t dlen = strlen(dir);

	if (!ix)
		return;
	pthread_mutex_lock(&ix->lock);
	for (size_t b = 0; b < NBUCKETS; b++) {
		struct entry **link = &ix->buckets[b];

		while (*link) {
			struct entry *e = *link;

			if (under(e->path, dir, dlen)) {
				*link = e->next;
				entry_free(e);
			} else {
				link = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&ix->lock);
}

/* Lock held, or in the forked child. */
static const struct ck_preparsed *find(struct ckw_indexer *ix, const char *path)
{
	struct stat sb;

	if (stat(path, &sb) != 0)
		return NULL;
	for (struct entry *e = ix->buckets[bucket_of((uint64_t)sb.st_dev, (uint64_t)sb.st_ino)]; e; e = e->next)
		if (e->dev == (uint64_t)sb.st_dev && e->ino == (uint64_t)sb.st_ino)
			return e->parsed;
	return NULL;
}

const struct ck_preparsed *ckw_indexer_find_in_child(void *ctx, const char *path)
{
	return ctx ? find(ctx, path) : NULL;
}

pid_t ckw_indexer_fork(struct ckw_indexer *ix)
{
	pid_t pid;

	if (ix) {
		pthread_mutex_lock(&ix->lock);
		/* Not while a file is parsed: the parse allocates, and a child
		 * forked while it holds a lock of an allocator without fork
		 * handlers (AddressSanitizer's) hangs at its first malloc. */
		while (ix->current)
			pthread_cond_wait(&ix->done, &ix->lock);
	}
	pid = fork();
	if (pid != 0 && ix)
		pthread_mutex_unlock(&ix->lock);
	return pid;
}

int ckw_indexer_state(struct ckw_indexer *ix, const char *path, struct ck_buf *out)
{
	const struct ck_preparsed *p;
	struct stat sb;
	int rc;

	if (!ix)
		return ck_buf_puts(out, "in progress");
	pthread_mutex_lock(&ix->lock);
	p = find(ix, path);
	if (!p) {
		int queued = ix->current && strcmp(ix->current, path) == 0;

		for (struct job *q = ix->head; q && !queued; q = q->next)
			queued = strcmp(q->path, path) == 0;
		rc = ck_buf_puts(out, queued ? "in progress: being parsed" : "in progress: being written");
	} else {
		const struct ck_file_info *fi = ck_preparsed_info(p);

		if (stat(path, &sb) != 0 || (uint64_t)sb.st_size != fi->size ||
		    ck_timespec_ns(sb.st_mtim) != fi->mtime_ns)
			rc = ck_buf_puts(out, "in progress: changed since its last parse");
		else if (fi->kind == CK_FILE_BAD)
			rc = ck_buf_printf(out, "in progress: does not parse: %s", fi->error ? fi->error : "refused");
		else
			rc = ck_buf_printf(out, "in progress: parsed: %s, %u tensors", ck_file_kind_name(fi->kind),
					   fi->ntensors);
	}
	pthread_mutex_unlock(&ix->lock);
	return rc;
}
