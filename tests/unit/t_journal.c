/* The store's journal (src/store/journal.c, follow.c), without FUSE:
 *   - entries: written and parsed back, one spelling, damage refused;
 *   - appends from racing writers (threads with handles of their own, as
 *     processes on several nodes) take every number once, with no gap;
 *   - two "nodes" (node-local indexes of one store, CKPT_TEST_SHARED_FS=1
 *     on a local disk): an import on one appears on the other after it
 *     follows, a deletion too, the store's own LMDB environment is never
 *     made; an entry whose files do not show its tags yet is waited for
 *     until a later entry supersedes it; a damaged entry is skipped. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/store.h"
#include "store/index.h"
#include "store/journal.h"
#include "testutil.h"

static char tmp[256];

static void entries(void)
{
	struct ck_journal_scan scans[2] = { { 3, 16, 4096 }, { 4, 16, 77 } };
	uint32_t emptied[2] = { 1, 2 };
	struct ck_journal_entry e = { .time_ns = 1712345679000000000LL, .series = "run1", .name = "checkpoint-20",
				      .scans = scans, .nscans = 2, .emptied = emptied, .nemptied = 2, .has_pos = 1,
				      .pack_cur = 4, .pack_end = 77 };
	struct ck_journal_entry back;
	struct ck_error err = { { 0 } };
	struct ck_buf text = CK_BUF_INIT, again = CK_BUF_INIT;
	char *t;

	strcpy(e.manifest, "0123456789abcdef0123456789abcdef");
	strcpy(e.tombstone, "none");
	strcpy(e.packmap, "fedcba9876543210fedcba9876543210");
	CHECK(ck_journal_format(&text, &e) == 0, "format");
	CHECK(ck_journal_parse((const char *)text.data, text.len, &back, &err) == 0, "parse: %s", err.msg);
	CHECK(back.series && !strcmp(back.series, "run1") && !strcmp(back.name, "checkpoint-20") &&
	      !strcmp(back.manifest, e.manifest) && !strcmp(back.tombstone, "none") && back.nscans == 2 &&
	      back.scans[1].pack == 4 && back.scans[1].to == 77 && back.nemptied == 2 && back.emptied[1] == 2 &&
	      back.has_pos && back.pack_cur == 4 && back.pack_end == 77 && back.time_ns == e.time_ns,
	      "the entry parsed back differs");
	CHECK(ck_journal_format(&again, &back) == 0 && again.len == text.len && !memcmp(again.data, text.data, text.len),
	      "format(parse(text)) != text");
	ck_journal_entry_clear(&back);
	t = malloc(text.len + 1);
	SETUP(t);
	memcpy(t, text.data, text.len);
	t[10] ^= 1;
	CHECK(ck_journal_parse(t, text.len, &back, &err) == -EBADMSG, "a flipped bit parsed");
	CHECK(ck_journal_parse(t, text.len - 1, &back, &err) == -EBADMSG, "a torn entry parsed");
	free(t);
	e.nscans = CK_JOURNAL_MAX_SCANS + 1;
	CHECK(ck_journal_format(&again, &e) == -EINVAL, "too many scans written");
	e.nscans = 0;
	e.series = "a/b";
	CHECK(ck_journal_format(&again, &e) == -EINVAL, "a series with a slash written");
	ck_buf_free(&text);
	ck_buf_free(&again);
}

/* ---- racing writers ---- */

#define WRITERS 4
#define EACH 25

static void *writer(void *arg)
{
	struct ck_store st = { .path = arg };
	struct ck_journal_entry e = { 0 };

	for (int i = 0; i < EACH; i++)
		CHECK(ck_journal_append(&st, &e, NULL, NULL) == 0, "append");
	return NULL;
}

static void races(void)
{
	char dir[300];
	pthread_t t[WRITERS];
	uint64_t head = 0;

	pathf(dir, sizeof(dir), "%s/race", tmp);
	SETUP(mkdir(dir, 0755) == 0);
	for (int i = 0; i < WRITERS; i++)
		SETUP(pthread_create(&t[i], NULL, writer, dir) == 0);
	for (int i = 0; i < WRITERS; i++)
		pthread_join(t[i], NULL);
	CHECK(ck_journal_head(dir, &head) == 0 && head == WRITERS * EACH, "head %" PRIu64 ", expected %d", head,
	      WRITERS * EACH);
	for (uint64_t s = 1; s <= WRITERS * EACH; s++) {
		struct ck_journal_entry e;
		struct ck_error err = { { 0 } };

		CHECK(ck_journal_read(dir, s, &e, &err) == 0, "entry %" PRIu64 ": %s", s, err.msg);
		ck_journal_entry_clear(&e);
	}
}

/* ---- two nodes ---- */

static struct ck_store *node(const char *name, const char *store)
{
	char base[300];
	struct ck_error err = { { 0 } };
	struct ck_store *st = NULL;

	SETUP(ck_store_set_index_base(pathf(base, sizeof(base), "%s/%s", tmp, name)) == 0);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	return st;
}

static size_t listed(struct ck_store *st, const char *series)
{
	struct ck_ckpt_info *c = NULL;
	size_t n = 0, live = 0;

	if (ck_store_list_checkpoints(st, series, &c, &n) < 0)
		return (size_t)-1;
	for (size_t i = 0; i < n; i++)
		live += !c[i].deleted;
	ck_ckpt_info_free(c, n);
	return live;
}

static void add_checkpoint(struct ck_store *st, int step)
{
	char dir[400], path[450];
	struct ck_import_opts o = { .series = "run" };
	struct ck_error err = { { 0 } };

	pathf(dir, sizeof(dir), "%s/runs/checkpoint-%d", tmp, step);
	SETUP(mkdir(dir, 0755) == 0 || errno == EEXIST);
	write_bytes(pathf(path, sizeof(path), "%s/config.json", dir), "{\"step\": 1}\n", 12);
	CHECK(ck_store_import(st, dir, &o, NULL, NULL, &err) == 1, "import: %s", err.msg);
}

static void nodes(void)
{
	char store[300], path[400], idx[400];
	struct ck_error err = { { 0 } };
	struct ck_store *a, *b;
	struct ck_journal_entry e = { 0 };
	uint64_t head;
	int changed = 0;

	setenv("CKPT_TEST_SHARED_FS", "1", 1);
	pathf(path, sizeof(path), "%s/runs", tmp);
	SETUP(mkdir(path, 0755) == 0);
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(ck_store_init(store, &err) == 0);
	CHECK(access(pathf(idx, sizeof(idx), "%s/index", store), F_OK) < 0, "a shared store got STORE/index");
	a = node("nodeA", store);
	b = node("nodeB", store);
	CHECK(ck_store_is_shared(a, NULL, NULL) == 1, "not taken for a shared store");

	add_checkpoint(a, 1);
	CHECK(listed(a, "run") == 1 && listed(b, "run") == 0, "before following: a %zu, b %zu", listed(a, "run"),
	      listed(b, "run"));
	CHECK(ck_store_follow(b, &changed, &err) == 0 && changed && listed(b, "run") == 1,
	      "b does not see a's import after following: %s", err.msg);
	CHECK(ck_store_follow(b, &changed, &err) == 0 && !changed, "following again changed something");

	/* b deletes; a follows. */
	CHECK(ck_store_delete_checkpoint(b, "run", "checkpoint-1", &err) == 0, "delete: %s", err.msg);
	CHECK(ck_store_follow(a, &changed, &err) == 0 && changed && listed(a, "run") == 0,
	      "a does not see b's deletion");

	/* An entry whose manifest is not what it says yet: waited for... */
	add_checkpoint(a, 2);
	SETUP(ck_journal_head(store, &head) == 0);
	e.series = "run";
	e.name = "checkpoint-2";
	strcpy(e.manifest, "0123456789abcdef0123456789abcdef");
	strcpy(e.tombstone, "none");
	strcpy(e.packmap, "none");
	SETUP(ck_journal_append(a, &e, NULL, &err) == 0);
	add_checkpoint(a, 3);   /* ...and what comes after it too */
	CHECK(ck_store_follow(b, &changed, &err) == 0 && listed(b, "run") == 1,
	      "b: %zu checkpoints, expected 1 (checkpoint-2 only, before the entry not visible yet)",
	      listed(b, "run"));
	/* ...until a later entry names the same checkpoint. */
	SETUP(ck_journal_note_ckpt(a, "run", "checkpoint-2", NULL, NULL, &err) == 0);
	CHECK(ck_store_follow(b, &changed, &err) == 0 && listed(b, "run") == 2, "b: %zu checkpoints, expected 2",
	      listed(b, "run"));

	/* A damaged entry is skipped. */
	SETUP(ck_journal_head(store, &head) == 0);
	write_bytes(pathf(path, sizeof(path), "%s/journal/%016" PRIu64, store, head + 1), "garbage\n", 8);
	add_checkpoint(a, 4);
	CHECK(ck_store_follow(b, &changed, &err) == 0 && listed(b, "run") == 3, "b: %zu checkpoints, expected 3",
	      listed(b, "run"));

	/* A third node builds its index from the manifests. */
	{
		struct ck_store *c = node("nodeC", store);

		CHECK(listed(c, "run") == 3, "a new node lists %zu checkpoints, expected 3", listed(c, "run"));
		ck_store_close(c);
	}
	CHECK(access(idx, F_OK) < 0, "a shared store got STORE/index");
	ck_store_close(a);
	ck_store_close(b);
	ck_store_set_index_base(NULL);
	unsetenv("CKPT_TEST_SHARED_FS");
}

int main(void)
{
	char cmd[300];

	snprintf(tmp, sizeof(tmp), "%s/t_journal.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	entries();
	races();
	nodes();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (!test_failures && system(cmd) != 0)
		printf("could not remove %s\n", tmp);
	return test_result();
}
