/* The packed store over real torch checkpoints (written by $TORCH_PYTHON,
 * seeded; skip 77 without torch): compaction, reads back through
 * ck_packed_pread equal to the raw files, dedup of identical checkpoints,
 * chains never longer than the anchor interval, chain steps kept in a
 * readers' cache (exact chains only), reindex after the index
 * is lost, and damage (bit flips, truncation of packs and raw files)
 * answered with -EIO and reported by ck_store_verify_packs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/pack.h"
#include "ckptfs/torchzip.h"
#include "packstore/packstore_int.h"
#include "t_packstore_util.h"
#include "testutil.h"

#define K 3

static char store[512];

static void make_series(const char *tmp, const char *name, int n, int seed, const char *extra)
{
	char cmd[2048];
	const char *src = getenv("CKPT_SRCDIR");

	snprintf(cmd, sizeof(cmd), "'%s' '%s/tests/py/packs_make.py' '%s/%s' %d %d %s", test_python(),
		 src ? src : ".", tmp, name, n, seed, extra);
	SETUP(run_command(cmd, NULL) == 0);
}

static int count_progress;

static void on_progress(void *ctx, const char *series, const char *ckpt, const char *relpath,
			const struct ck_compact_stats *s)
{
	(void)ctx, (void)series, (void)ckpt, (void)relpath;
	count_progress++;
	CHECK(s->files == (uint64_t)count_progress, "progress after each file: %d vs %" PRIu64, count_progress,
	      s->files);
}

static void import(struct ck_store *st, const char *dir, const char *series)
{
	struct ck_import_opts o = { .series = series };
	struct ck_error err = { { 0 } };

	SETUP(ck_store_import(st, dir, &o, NULL, NULL, &err) > 0);
}

static void readback(struct ck_store *st, const char *when, uint64_t want_packed)
{
	struct ck_chunk_cache *cache;
	struct pk_readback rb;
	uint64_t hits, misses, bytes;

	SETUP(ck_chunk_cache_new(8u << 20, &cache) == 0);
	CHECK(pk_readback(st, cache, K, 11, &rb) == 0, "%s: walk the store", when);
	CHECK(rb.failures == 0, "%s: %" PRIu64 " packed reads failed or differed", when, rb.failures);
	CHECK(rb.packed == want_packed, "%s: %" PRIu64 " files packed, want %" PRIu64, when, rb.packed, want_packed);
	CHECK(rb.max_depth >= 2 && rb.max_depth <= K, "%s: longest chain %u (anchor interval %d)", when,
	      rb.max_depth, K);
	ck_chunk_cache_counters(cache, &hits, &misses, &bytes);
	CHECK(bytes <= (8u << 20), "%s: the cache holds %" PRIu64 " bytes over its bound", when, bytes);
	CHECK(hits > 0 && misses > 0, "%s: cache hits %" PRIu64 " misses %" PRIu64, when, hits, misses);
	printf("%s: %" PRIu64 " files, %" PRIu64 " packed, %" PRIu64 " bytes equal, longest chain %u\n", when,
	       rb.files, rb.packed, rb.bytes, rb.max_depth);
	ck_chunk_cache_free(cache);
}

/* The file of series/ckpt/relpath. */
static struct ck_file_info *find_file(struct ck_store *st, const char *series, const char *ckpt, const char *relpath)
{
	struct ck_ckpt_info *c;
	struct ck_file_info *f, *one = NULL;
	size_t n;

	SETUP(ck_store_find_checkpoint(st, series, ckpt, &c) == 0);
	SETUP(ck_store_list_files(st, c->id, &f, &n) == 0);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(f[i].relpath, relpath) == 0) {
			one = calloc(1, sizeof(*one));
			SETUP(one);
			*one = f[i];
			f[i] = (struct ck_file_info){ 0 };
		}
	}
	ck_file_info_free(f, n);
	ck_ckpt_info_free(c, 1);
	SETUP(one);
	return one;
}

/* Compacts series (files packed: want) and checks that checkpoint-10's
 * layers.1.weight (1.31 MB, left out of some newer saves) was stored as a
 * delta: more delta bytes than the rest of its model.pt holds. */
static void compact_layer1_delta(struct ck_store *st, struct ck_compact_opts *opts, const char *series,
				 uint64_t want)
{
	struct ck_error err = { { 0 } };
	struct ck_compact_stats s;
	struct ck_file_pack_info pi;
	struct ck_file_info *f;

	opts->series = series;
	CHECK(ck_store_compact(st, opts, NULL, NULL, &s, &err) == 0 && s.files == want,
	      "compact %s: %" PRIu64 " files (%s)", series, s.files, err.msg);
	f = find_file(st, series, "checkpoint-10", "model.pt");
	CHECK(ck_store_file_pack_info(st, f->id, &pi) == 0 && pi.packed && pi.delta_bytes > 640 * 512 * 4,
	      "%s: checkpoint-10/model.pt has %" PRIu64 " delta bytes", series, pi.delta_bytes);
	ck_file_info_free(f, 1);
}

/* The deepest chunk (most deltas from its anchor) of relpath in run1's
 * checkpoint-10 .. checkpoint-last, only of lossy records when lossy:
 * its hash, its depth in *most, and its file's id and size. */
static struct ck_hash128 deepest_chunk(struct ck_store *st, MDB_txn *txn, const char *relpath, int last, int lossy,
				       unsigned *most, uint64_t *file_id, uint64_t *size)
{
	struct ck_hash128 none = { 0, 0 }, deepest = none;
	unsigned depth;
	int meets;

	*most = 0;
	for (int step = 10; step <= last; step += 10) {
		char ckpt[32];
		struct ck_file_info *f;
		struct ck_fmap m;

		snprintf(ckpt, sizeof(ckpt), "checkpoint-%d", step);
		f = find_file(st, "run1", ckpt, relpath);
		SETUP(ck_fmap_lookup(txn, st, f->id, &m) == 0);
		for (uint32_t i = 0; i < m.nchunks; i++) {
			struct ck_chunk_loc l = { 0 };

			SETUP(ck_chunk_lookup(txn, st, m.chunks[i].hash, &l) == 0);
			SETUP(ck_chunk_depth(txn, st, m.chunks[i].hash, none, &depth, &meets) == 0);
			if ((!lossy || ck_codec_lossy(l.codec)) && depth > *most) {
				*most = depth;
				deepest = m.chunks[i].hash;
				*file_id = f->id;
				*size = m.size;
			}
			ck_chunk_loc_clear(&l);
		}
		ck_fmap_clear(&m);
		ck_file_info_free(f, 1);
	}
	return deepest;
}

/* The deepest chunk of run1's packed files (K deltas from its anchor),
 * resolved keeping its steps, leaves the chunks its chain passed through
 * (the same chunk of newer checkpoints) in the cache: the next newer one
 * then costs one delta, not a decode from the anchor again.  Resolved
 * without keep_steps (compaction, verify) it leaves nothing.  Read through
 * ck_packed_pread, a file keeps its steps in a cache eight times its size
 * or more, and none in a smaller one. */
static void chain_steps_cached(struct ck_store *st)
{
	struct ck_hash128 deepest, ref;
	uint64_t deep_file = 0, deep_size = 0;
	struct ck_chunk_cache *lru, *fifo;
	struct ck_error err = { { 0 } };
	struct ck_pack_fds fds;
	struct ck_decoder d;
	struct ck_chunk_loc l = { 0 };
	unsigned most, got;
	uint32_t len;
	MDB_txn *txn;

	ck_pack_fds_init(&fds);
	SETUP(ck_decoder_init(&d) == 0);
	SETUP(ck_chunk_cache_new(64u << 20, &lru) == 0 && ck_chunk_cache_new_fifo(64u << 20, &fifo) == 0);
	SETUP(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) == 0);
	deepest = deepest_chunk(st, txn, "optimizer.pt", 60, 0, &most, &deep_file, &deep_size);
	CHECK(most == K, "run1's optimizer.pt files: longest chain %u", most);
	SETUP(ck_chunk_lookup(txn, st, deepest, &l) == 0);
	ref = l.ref;
	ck_chunk_loc_clear(&l);

	CHECK(ck_chunk_resolve(txn, st, &fds, &d, fifo, 0, deepest, d.out, &len, &got, &err) == 0 &&
	      got == most && !ck_chunk_cache_has(fifo, ref), "without keep_steps: depth %u, step kept %d (%s)", got,
	      ck_chunk_cache_has(fifo, ref), err.msg);
	CHECK(ck_chunk_resolve(txn, st, &fds, &d, lru, 1, deepest, d.out, &len, &got, &err) == 0 &&
	      got == most && ck_chunk_cache_has(lru, ref), "keeping steps: depth %u, step kept %d (%s)",
	      got, ck_chunk_cache_has(lru, ref), err.msg);
	/* The step below ref is kept too: ref itself now costs one delta. */
	SETUP(ck_chunk_lookup(txn, st, ref, &l) == 0);
	CHECK(ck_chunk_cache_has(lru, l.ref), "the second step of the chain is kept too");
	CHECK(ck_chunk_resolve(txn, st, &fds, &d, lru, 1, ref, d.out, &len, &got, &err) == 0 && got == 1,
	      "the next newer chunk: %u deltas decoded (%s)", got, err.msg);
	/* Through ck_packed_pread: by the file's size against the cache. */
	for (int big = 0; big < 2; big++) {
		struct ck_chunk_cache *c;
		struct ck_packed_file *pf;
		uint8_t *all = malloc(deep_size);

		SETUP(all && ck_chunk_cache_new(deep_size * (big ? 16 : 4), &c) == 0);
		SETUP(ck_packed_open(st, deep_file, c, &pf, &err) == 0);
		CHECK(ck_packed_pread(pf, all, deep_size, 0, &err) == (ssize_t)deep_size, "read whole: %s", err.msg);
		ck_packed_close(pf);
		CHECK(ck_chunk_cache_has(c, ref) == big, "a file of %" PRIu64 " bytes, cache %s: step %s", deep_size,
		      big ? "16 times that" : "4 times that", big ? "kept" : "not kept");
		ck_chunk_cache_free(c);
		free(all);
	}
	printf("chain steps: a chunk %u deltas from its anchor leaves its chain's steps in a readers' cache\n", most);
	ck_chunk_loc_clear(&l);
	mdb_txn_abort(txn);
	ck_pack_fds_close(&fds);
	ck_chunk_cache_free(lru);
	ck_chunk_cache_free(fifo);
	ck_decoder_clear(&d);
}

/* Reads the whole packed file: 0, or the -errno of the first failure (err). */
static int read_packed(struct ck_store *st, uint64_t id, struct ck_error *err)
{
	struct ck_packed_file *pf;
	uint8_t *buf = malloc(1u << 20);
	uint64_t off = 0;
	ssize_t got = 0;

	SETUP(buf && ck_packed_open(st, id, NULL, &pf, err) == 0);
	while ((got = ck_packed_pread(pf, buf, 1u << 20, off, err)) > 0)
		off += (uint64_t)got;
	ck_packed_close(pf);
	free(buf);
	return got < 0 ? (int)got : 0;
}

static void count_bad(void *ctx, uint64_t file_id, uint64_t off, uint64_t len, const char *why)
{
	uint64_t *n = ctx;

	(void)file_id, (void)off, (void)len, (void)why;
	(*n)++;
}

static uint64_t verify_bad(struct ck_store *st)
{
	struct ck_error err = { { 0 } };
	uint64_t bad = 0, checked = 0;

	CHECK(ck_store_verify_packs(st, count_bad, &bad, &checked, &err) == 0, "verify: %s", err.msg);
	CHECK(checked > 0, "verify decoded nothing");
	return bad;
}

static void flip(const char *path, uint64_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	SETUP(fd >= 0 && pread(fd, &b, 1, (off_t)off) == 1);
	b ^= 0x10;
	SETUP(pwrite(fd, &b, 1, (off_t)off) == 1);
	close(fd);
}

/* Where the first chunk of file id that is stored in a pack lives. */
static void first_packed_chunk(struct ck_store *st, uint64_t id, struct ck_chunk_loc *loc)
{
	MDB_txn *txn;
	struct ck_fmap m;
	int found = 0;

	SETUP(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) == 0);
	SETUP(ck_fmap_lookup(txn, st, id, &m) == 0);
	for (uint32_t i = 0; i < m.nchunks && !found; i++) {
		SETUP(ck_chunk_lookup(txn, st, m.chunks[i].hash, loc) == 0);
		found = loc->where == CK_CHUNK_PACKED && loc->enc_len > 16;
		if (!found)
			ck_chunk_loc_clear(loc);
	}
	ck_fmap_clear(&m);
	mdb_txn_abort(txn);
	SETUP(found);
}

static void damage_pack(struct ck_store *st)
{
	struct ck_file_info *f = find_file(st, "run1", "checkpoint-10", "model.pt");
	struct ck_error err = { { 0 } };
	struct ck_chunk_loc loc;
	char pack[600];
	uint64_t mid;
	int rc;

	first_packed_chunk(st, f->id, &loc);
	pathf(pack, sizeof(pack), "%s/packs/pack-%08u.ckpack", store, loc.pack_id);
	/* the middle of the record's payload, past its header */
	mid = loc.offset + ck_pack_rec_header_len(&(struct ck_chunk_desc){ .codec = loc.codec,
		.raw_len = loc.raw_len, .enc_len = loc.enc_len }) + loc.enc_len / 2;
	flip(pack, mid);
	rc = read_packed(st, f->id, &err);
	CHECK(rc == -EIO, "a bit flip in a record: %d (%s)", rc, err.msg);
	CHECK(strstr(err.msg, "pack-00000000.ckpack") && strstr(err.msg, "chunk "),
	      "the error names the chunk and the pack: %s", err.msg);
	printf("bit flip: %s\n", err.msg);
	CHECK(verify_bad(st) > 0, "verify finds the flipped record");
	flip(pack, mid);
	CHECK(read_packed(st, f->id, &err) == 0, "flipped back: %s", err.msg);
	CHECK(verify_bad(st) == 0, "flipped back: verify is clean");

	/* Truncated to just before that record: it and all after it are gone. */
	{
		struct stat sb;
		size_t len;
		uint8_t *all = read_file(pack, &len);

		SETUP(all && stat(pack, &sb) == 0);
		SETUP(truncate(pack, (off_t)loc.offset + 10) == 0);
		rc = read_packed(st, f->id, &err);
		CHECK(rc == -EIO, "a truncated pack: %d (%s)", rc, err.msg);
		CHECK(verify_bad(st) > 0, "verify finds the truncated pack");
		write_bytes(pack, all, len);
		free(all);
		CHECK(verify_bad(st) == 0, "restored: verify is clean");
	}
	ck_chunk_loc_clear(&loc);
	ck_file_info_free(f, 1);
}

/* The newest checkpoint stays raw and is the reference of the deltas of
 * the one before: damage there shows through the chain. */
static void damage_raw(struct ck_store *st)
{
	struct ck_file_info *f = find_file(st, "run1", "checkpoint-70", "optimizer.pt");
	struct ck_file_info *g = find_file(st, "run1", "checkpoint-60", "optimizer.pt");
	struct ck_error err = { { 0 } };
	int rc;

	CHECK(ck_store_file_packed(st, f->id) == 0 && ck_store_file_packed(st, g->id) == 1,
	      "the newest stays raw, the one before is packed");
	flip(f->src_path, f->size / 2);
	rc = read_packed(st, g->id, &err);
	CHECK(rc == -EIO, "a flipped reference: %d (%s)", rc, err.msg);
	CHECK(strstr(err.msg, f->src_path) != NULL, "the error names the raw file: %s", err.msg);
	printf("raw flip: %s\n", err.msg);
	CHECK(verify_bad(st) > 0, "verify finds the flipped reference");
	flip(f->src_path, f->size / 2);
	CHECK(verify_bad(st) == 0, "flipped back: verify is clean");

	/* Truncated: the chunks past the cut are gone. */
	{
		size_t len;
		uint8_t *all = read_file(f->src_path, &len);

		SETUP(all && truncate(f->src_path, (off_t)(len / 3)) == 0);
		rc = read_packed(st, g->id, &err);
		CHECK(rc == -EIO && strstr(err.msg, f->src_path), "a truncated reference: %d (%s)", rc, err.msg);
		CHECK(verify_bad(st) > 0, "verify finds the truncated reference");
		write_bytes(f->src_path, all, len);
		free(all);
		CHECK(verify_bad(st) == 0, "restored: verify is clean");
	}
	ck_file_info_free(f, 1);
	ck_file_info_free(g, 1);
}

/* Compacting after every save: a frozen tensor (embed.weight, 128 KiB)
 * moves along with the newest raw version and is never stored in a pack. */
/* Rewrites pack id's file header as version 1 (a pack written before
 * version 2); returns the file's size. */
static off_t make_version1(const char *st_path, uint32_t id)
{
	char *path = ck_pack_path(st_path, id);
	uint8_t h[CK_PACK_HEADER];
	struct stat sb;
	uint32_t crc;
	int fd;

	SETUP(path && (fd = open(path, O_RDWR)) >= 0);
	SETUP(pread(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h) && fstat(fd, &sb) == 0);
	h[8] = 1, h[9] = h[10] = h[11] = 0;
	crc = ck_crc32(0, h, 12);
	for (int i = 0; i < 4; i++)
		h[12 + i] = (uint8_t)(crc >> (8 * i));
	SETUP(pwrite(fd, h, sizeof(h), 0) == (ssize_t)sizeof(h));
	close(fd);
	free(path);
	return sb.st_size;
}

static off_t size_of_pack(const char *st_path, uint32_t id, uint32_t *version)
{
	char *path = ck_pack_path(st_path, id);
	struct ck_error err = { { 0 } };
	struct stat sb;
	int fd;

	SETUP(path);
	fd = open(path, O_RDONLY);
	free(path);
	if (fd < 0)
		return -1;
	SETUP(fstat(fd, &sb) == 0 && ck_pack_check_header(fd, version, &err) == 0);
	close(fd);
	return sb.st_size;
}

static void incremental(const char *tmp)
{
	struct ck_compact_opts opts = { .anchor_k = K };
	struct ck_compact_stats s;
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char st3[600], path[600];
	off_t v1_size = 0;

	pathf(st3, sizeof(st3), "%s/store3", tmp);
	SETUP(ck_store_init(st3, &err) == 0);
	SETUP(ck_store_open(st3, 0, &st, &err) == 0);
	for (int step = 10; step <= 40; step += 10) {
		struct ck_import_opts o = { .series = "inc" };

		pathf(path, sizeof(path), "%s/run1/checkpoint-%d", tmp, step);
		SETUP(ck_store_import(st, path, &o, NULL, NULL, &err) == 1);
		CHECK(ck_store_compact(st, &opts, NULL, NULL, &s, &err) == 0, "compact after step %d: %s", step,
		      err.msg);
		if (step == 20) {
			/* a store packed by an older ckptfs: its pack stays as it
			 * is, the next records go to a new one */
			v1_size = make_version1(st3, 0);
			SETUP(size_of_pack(st3, 1, NULL) < 0);
		}
	}
	{
		uint32_t v0 = 0, v1 = 0;
		struct pk_readback rb;

		CHECK(size_of_pack(st3, 0, &v0) == v1_size && v0 == 1, "a version 1 pack was appended to");
		CHECK(size_of_pack(st3, 1, &v1) > CK_PACK_HEADER && v1 == CK_PACK_VERSION,
		      "no version %d pack took the newer records", CK_PACK_VERSION);
		CHECK(pk_readback(st, NULL, K, 5, &rb) == 0 && rb.failures == 0 && rb.packed > 0,
		      "versions 1 and 2 packs read back: %" PRIu64 " failures", rb.failures);
	}
	for (int step = 10; step <= 30; step += 10) {
		struct ck_file_pack_info pi;
		char name[32];
		struct ck_file_info *f;

		snprintf(name, sizeof(name), "checkpoint-%d", step);
		f = find_file(st, "inc", name, "model.pt");
		CHECK(ck_store_file_pack_info(st, f->id, &pi) == 0 && pi.packed && pi.dedup_bytes >= 512 * 64 * 4,
		      "incremental: %s/model.pt dedup %" PRIu64 " bytes", name, pi.dedup_bytes);
		ck_file_info_free(f, 1);
	}

	/* checkpoint-20 imported again with a changed file of the same size:
	 * its packmap maps the old version, which recovery must not apply to
	 * the new one (that would serve the old bytes). */
	{
		struct ck_import_opts o = { .series = "inc" };
		struct ck_packed_file *pf;
		struct ck_file_info *f;
		uint8_t *text;
		size_t len;
		char *at;

		pathf(path, sizeof(path), "%s/run1/checkpoint-20/trainer_state.json", tmp);
		text = read_file(path, &len);
		SETUP(text && (at = strstr((char *)text, "\"global_step\": 20")) != NULL);
		at[strlen("\"global_step\": 2")] = '1';
		write_bytes(path, text, len);
		free(text);
		pathf(path, sizeof(path), "%s/run1/checkpoint-20", tmp);
		SETUP(ck_store_import(st, path, &o, NULL, NULL, &err) == 1);
		ck_store_close(st);
		SETUP(ck_store_open(st3, 0, &st, &err) == 0);   /* recovery applies packmaps */
		f = find_file(st, "inc", "checkpoint-20", "trainer_state.json");
		CHECK(ck_store_file_packed(st, f->id) == 0 && ck_packed_open(st, f->id, NULL, &pf, &err) == -ENOENT,
		      "a packmap of an older version of the file is not applied to the new one");
		ck_file_info_free(f, 1);
	}
	ck_store_close(st);
}

/* A reader opened on an index made before packs (no chunks or fmaps
 * databases; a reader that may write the index makes them, one that may
 * not has none) sees packed files once a compaction created them. */
static void late_packs(const char *tmp)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	struct ck_file_info *f;
	struct pk_readback rb;
	char st2[600], path[600], cmd[1400];
	MDB_txn *txn;

	pathf(st2, sizeof(st2), "%s/store2", tmp);
	SETUP(ck_store_init(st2, &err) == 0);
	SETUP(ck_store_open(st2, 0, &st, &err) == 0);
	import(st, pathf(path, sizeof(path), "%s/same", tmp), "same");
	SETUP(mdb_txn_begin(st->env, NULL, 0, &txn) == 0);
	SETUP(mdb_drop(txn, st->chunks, 1) == 0 && mdb_drop(txn, st->fmaps, 1) == 0 && mdb_txn_commit(txn) == 0);
	ck_store_close(st);

	SETUP(ck_store_open(st2, 1, &st, &err) == 0);
	f = find_file(st, "same", "checkpoint-10", "model.pt");
	CHECK(ck_store_file_packed(st, f->id) == 0, "an older index: nothing packed");
	snprintf(cmd, sizeof(cmd), "'%s/ckptctl' compact -q '%s'", getenv("CKPT_BUILDDIR") ? getenv("CKPT_BUILDDIR") : ".",
		 st2);
	CHECK(run_command(cmd, NULL) == 0, "%s", cmd);
	CHECK(ck_store_file_packed(st, f->id) == 1, "the reader sees the file packed");
	CHECK(pk_readback(st, NULL, CK_PACK_DEFAULT_ANCHOR_K, 3, &rb) == 0 && rb.packed == 9 && rb.failures == 0,
	      "the reader reads the packed files: %" PRIu64 " packed, %" PRIu64 " failures", rb.packed, rb.failures);
	ck_file_info_free(f, 1);
	ck_store_close(st);
}

/* A lossy series: its chains run forward from the anchor, so the steps
 * below a residual are older versions, which a reader going from old to
 * new has read already.  Resolved keeping steps, the deepest residual
 * leaves none of them in the cache (an exact chain's steps stay:
 * chain_steps_cached). */
static void lossy_steps_not_kept(const char *tmp)
{
	struct ck_lossy_policy pol = { .bound = 0.05, .keep_newest = 2 };
	struct ck_compact_opts opts = { .anchor_k = K, .lossy = &pol };
	struct ck_hash128 deepest;
	struct ck_chunk_cache *lru;
	struct ck_compact_stats s;
	struct ck_error err = { { 0 } };
	struct ck_chunk_loc l = { 0 };
	struct ck_pack_fds fds;
	struct ck_decoder d;
	struct ck_store *st;
	uint64_t file_id = 0, size = 0;
	unsigned most, got;
	char st3[600], path[600];
	uint32_t len;
	MDB_txn *txn;

	pathf(st3, sizeof(st3), "%s/store-lossy", tmp);
	SETUP(ck_store_init(st3, &err) == 0);
	SETUP(ck_store_open(st3, 0, &st, &err) == 0);
	import(st, pathf(path, sizeof(path), "%s/run1", tmp), "run1");
	CHECK(ck_store_compact(st, &opts, NULL, NULL, &s, &err) == 0, "lossy compaction: %s", err.msg);
	ck_pack_fds_init(&fds);
	SETUP(ck_decoder_init(&d) == 0);
	SETUP(ck_chunk_cache_new(64u << 20, &lru) == 0);
	SETUP(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) == 0);
	deepest = deepest_chunk(st, txn, "model.pt", 50, 1, &most, &file_id, &size);
	CHECK(most >= 2, "run1 coded lossily: deepest residual %u deep", most);
	SETUP(ck_chunk_lookup(txn, st, deepest, &l) == 0);
	CHECK(ck_chunk_resolve(txn, st, &fds, &d, lru, 1, deepest, d.out, &len, &got, &err) == 0 && got == most,
	      "the deepest residual resolved: %u deltas (%s)", got, err.msg);
	CHECK(!ck_chunk_cache_has(lru, l.ref), "a lossy chain's step below it is not kept");
	printf("lossy chain: a residual %u deep leaves no step in a readers' cache\n", most);
	ck_chunk_loc_clear(&l);
	mdb_txn_abort(txn);
	ck_pack_fds_close(&fds);
	ck_chunk_cache_free(lru);
	ck_decoder_clear(&d);
	ck_store_close(st);
}

/* A policy's chain bounds its lossy residuals below the compaction's
 * anchor interval (which lets them go K deep: lossy_steps_not_kept). */
static void lossy_chain_of_policy(const char *tmp)
{
	struct ck_lossy_policy pol = { .bound = 0.05, .keep_newest = 2, .chain = 1 };
	struct ck_compact_opts opts = { .anchor_k = K, .lossy = &pol };
	struct ck_compact_stats s;
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	uint64_t file_id = 0, size = 0;
	unsigned most;
	char st4[600], path[600];
	MDB_txn *txn;

	pathf(st4, sizeof(st4), "%s/store-lossy-chain", tmp);
	SETUP(ck_store_init(st4, &err) == 0);
	SETUP(ck_store_open(st4, 0, &st, &err) == 0);
	import(st, pathf(path, sizeof(path), "%s/run1", tmp), "run1");
	CHECK(ck_store_compact(st, &opts, NULL, NULL, &s, &err) == 0, "lossy compaction, chain 1: %s", err.msg);
	SETUP(mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) == 0);
	deepest_chunk(st, txn, "model.pt", 50, 1, &most, &file_id, &size);
	CHECK(most == 1, "a policy of chain 1 left a lossy residual %u deep", most);
	mdb_txn_abort(txn);
	ck_store_close(st);
}

int main(void)
{
	struct ck_compact_opts opts = { .anchor_k = K };
	struct ck_compact_stats s;
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char tmp[] = "/tmp/t_packstore.XXXXXX", path[600], cmd[700];
	uint64_t packed_files;

	if (access(test_python(), X_OK) != 0)
		return 77;
	snprintf(cmd, sizeof(cmd), "'%s' -c 'import torch' 2>/dev/null", test_python());
	if (run_command(cmd, NULL) != 0) {
		printf("SKIP: %s cannot import torch\n", test_python());
		return 77;
	}
	SETUP(mkdtemp(tmp));
	make_series(tmp, "run1", 7, 1, "");
	make_series(tmp, "same", 4, 2, "--same");
	make_series(tmp, "partial", 4, 3, "--partial");
	make_series(tmp, "sparse", 7, 4, "--every 6");
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(ck_store_init(store, &err) == 0);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	import(st, pathf(path, sizeof(path), "%s/run1", tmp), "run1");
	import(st, pathf(path, sizeof(path), "%s/same", tmp), "same");
	import(st, pathf(path, sizeof(path), "%s/partial", tmp), "partial");
	import(st, pathf(path, sizeof(path), "%s/sparse", tmp), "sparse");

	/* Identical checkpoints: everything but what names the step is dedup. */
	opts.series = "same";
	CHECK(ck_store_compact(st, &opts, NULL, NULL, &s, &err) == 0, "compact same: %s", err.msg);
	CHECK(s.files == 9, "same: %" PRIu64 " files packed", s.files);
	CHECK(s.stored_bytes * 50 < s.logical_bytes && s.dedup_bytes * 10 > s.logical_bytes * 9,
	      "same: stored %" PRIu64 " of %" PRIu64 ", dedup %" PRIu64, s.stored_bytes, s.logical_bytes,
	      s.dedup_bytes);

	/* A tensor left out of the next save takes its reference from the one
	 * after: checkpoint-10's layers.1.weight (1.31 MB) is a delta against
	 * checkpoint-30's, across the partial checkpoint-20. */
	compact_layer1_delta(st, &opts, "partial", 9);

	/* Saved one time in six (checkpoint-10 and -70 only): the reference
	 * is found six checkpoints on, past five saves without the tensor. */
	compact_layer1_delta(st, &opts, "sparse", 18);

	opts.series = "run1";
	opts.keep_raw = 1;   /* imported files are the user's: never removed */
	CHECK(ck_store_compact(st, &opts, on_progress, NULL, &s, &err) == 0, "compact: %s", err.msg);
	CHECK(s.files == 18 && count_progress == 18, "run1: %" PRIu64 " files packed, %d progress calls", s.files,
	      count_progress);
	CHECK(s.delta_chunks > 0 && s.plain_chunks > 0 && s.dedup_chunks > 0,
	      "deltas %" PRIu64 ", plain %" PRIu64 ", dedup %" PRIu64, s.delta_chunks, s.plain_chunks,
	      s.dedup_chunks);
	CHECK(s.stored_bytes < s.logical_bytes, "stored %" PRIu64 " of %" PRIu64, s.stored_bytes, s.logical_bytes);
	CHECK(s.raw_removed_bytes == 0, "imported files removed: %" PRIu64 " bytes", s.raw_removed_bytes);
	printf("run1: logical %" PRIu64 ", stored %" PRIu64 " (%.2fx), dedup %" PRIu64 " delta %" PRIu64
	       " plain %" PRIu64 "\n", s.logical_bytes, s.stored_bytes,
	       (double)s.logical_bytes / (double)s.stored_bytes, s.dedup_bytes, s.delta_bytes, s.plain_bytes);
	packed_files = 36 + 18;   /* run1, same, partial; sparse */
	readback(st, "compacted", packed_files);
	chain_steps_cached(st);

	CHECK(ck_store_compact(st, &opts, NULL, NULL, &s, &err) == 0 && s.files == 0,
	      "a second compaction has nothing to do: %" PRIu64 " files (%s)", s.files, err.msg);
	{
		struct ck_file_pack_info pi;
		struct ck_file_info *f = find_file(st, "run1", "checkpoint-20", "model.pt");

		CHECK(ck_store_file_pack_info(st, f->id, &pi) == 0 && pi.mapped && pi.packed &&
		      pi.size == f->size && pi.dedup_bytes + pi.delta_bytes + pi.plain_bytes == f->size &&
		      pi.stored_bytes > 0 && pi.stored_bytes < f->size, "per-file stats of a packed file");
		ck_file_info_free(f, 1);
		/* A version one save older than the raw newest: every tensor
		 * changed a little, and so did the zip header before it (the
		 * CRC) and the central directory; headers are deltas too, so
		 * nothing is stored self-contained. */
		f = find_file(st, "run1", "checkpoint-60", "model.pt");
		CHECK(ck_store_file_pack_info(st, f->id, &pi) == 0 && pi.packed && pi.plain_bytes == 0 &&
		      pi.delta_bytes > 0,
		      "checkpoint-60/model.pt: %" PRIu64 " bytes self-contained, %" PRIu64 " delta, %" PRIu64
		      " dedup", pi.plain_bytes, pi.delta_bytes, pi.dedup_bytes);
		ck_file_info_free(f, 1);
	}

	damage_pack(st);
	damage_raw(st);

	/* The index lost: reindex rebuilds it from manifests, packmaps, packs. */
	ck_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s/index'", store);
	SETUP(run_command(cmd, NULL) == 0);
	CHECK(ck_store_reindex(store, NULL, NULL, NULL, &err) == 4 + 4 + 7 + 7, "reindex: %s", err.msg);
	SETUP(ck_store_open(store, 1, &st, &err) == 0);
	readback(st, "reindexed", packed_files);
	CHECK(verify_bad(st) == 0, "reindexed: verify is clean");
	ck_store_close(st);

	late_packs(tmp);
	incremental(tmp);
	lossy_steps_not_kept(tmp);
	lossy_chain_of_policy(tmp);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	run_command(cmd, NULL);
	return test_result();
}
