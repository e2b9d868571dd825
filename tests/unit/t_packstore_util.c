/* The packed store's read-back check, shared by t_packstore and
 * packs_check (see t_packstore_util.h). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packstore/packstore_int.h"
#include "t_packstore_util.h"
#include "testutil.h"

struct reader {
	struct ck_packed_file *pf;
	const uint8_t *want;
	uint64_t size;
	unsigned seed;
	int bad;
};

/* Reads the whole file in random pieces, in order or from a random start. */
static void *read_all(void *arg)
{
	struct reader *r = arg;
	uint8_t *buf = malloc(3u << 20);
	uint64_t off = 0;

	if (!buf) {
		r->bad = 1;
		return NULL;
	}
	while (off < r->size) {
		struct ck_error err = { { 0 } };
		size_t len = (size_t)(rand_r(&r->seed) % (3u << 20)) + 1;
		ssize_t got;

		if (rand_r(&r->seed) % 2) {
			ck_packed_prefetch(r->pf, off + len, 4u << 20);
		} else {
			/* A loader's hint: the rest of this piece's neighbourhood,
			 * then places elsewhere in the file, out of file order. */
			uint64_t far = r->size / 2 + (uint64_t)rand_r(&r->seed) % (r->size / 2 + 1);
			struct ck_byte_range next[3] = {
				{ off + len, 1u << 20 }, { far, 2u << 20 }, { far / 3, 1u << 20 },
			};

			ck_packed_prefetch_ranges(r->pf, next, 3);
		}
		got = ck_packed_pread(r->pf, buf, len, off, &err);
		if (got < 0 || (uint64_t)got != (len < r->size - off ? len : r->size - off) ||
		    memcmp(buf, r->want + off, (size_t)got) != 0) {
			printf("  read at %" PRIu64 " (+%zu): %s\n", off, len, got < 0 ? err.msg : "wrong bytes");
			r->bad = 1;
			break;
		}
		off += (uint64_t)got;
	}
	free(buf);
	return NULL;
}

static int check_file(struct ck_store *st, struct ck_chunk_cache *cache, const struct ck_file_info *f,
		      unsigned seed, struct pk_readback *out)
{
	struct ck_error err = { { 0 } };
	struct ck_packed_file *pf;
	uint8_t *want;
	size_t len;
	int rc;

	rc = ck_packed_open(st, f->id, cache, &pf, &err);
	if (rc == -ENOENT)
		return 0;
	if (rc < 0) {
		printf("  %s: open: %s\n", f->src_path, err.msg);
		out->failures++;
		return 0;
	}
	out->packed++;
	want = read_file(f->src_path, &len);
	if (!want || len != ck_packed_size(pf)) {
		printf("  %s: raw file unreadable or of another size\n", f->src_path);
		out->failures++;
	} else {
		struct reader r[4];
		pthread_t t[4];
		int nt = len > (2u << 20) ? 4 : 1, started = 0;

		for (int i = 0; i < nt; i++) {
			r[i] = (struct reader){ pf, want, len, seed + (unsigned)i, 0 };
			if (pthread_create(&t[i], NULL, read_all, &r[i]) != 0) {
				read_all(&r[i]);
				continue;
			}
			started |= 1 << i;
		}
		for (int i = 0; i < nt; i++) {
			if (started & (1 << i))
				pthread_join(t[i], NULL);
			if (r[i].bad) {
				printf("  %s: packed bytes differ from the raw file\n", f->src_path);
				out->failures++;
			}
		}
		out->bytes += len;
	}
	free(want);
	ck_packed_close(pf);
	return 0;
}

/* Every chunk of every map at most anchor_k deltas deep. */
static int check_depths(struct ck_store *st, unsigned anchor_k, struct pk_readback *out)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc;

	if (!st->packs_ready)
		return 0;
	if (mdb_txn_begin(st->env, NULL, MDB_RDONLY, &txn) != 0)
		return -EIO;
	if (mdb_cursor_open(txn, st->fmaps, &cur) != 0) {
		mdb_txn_abort(txn);
		return -EIO;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		struct ck_fmap m;

		if (ck_fmap_get(v.mv_data, v.mv_size, &m, NULL) < 0) {
			printf("  a file map does not parse\n");
			out->failures++;
			continue;
		}
		for (uint32_t i = 0; i < m.nchunks; i++) {
			struct ck_hash128 none = { 0, 0 };
			unsigned depth = 0;
			int meets;

			if (ck_chunk_depth(txn, st, m.chunks[i].hash, none, &depth, &meets) < 0 || depth > anchor_k) {
				printf("  chunk %u of file %" PRIu64 ": depth %u (anchor interval %u) or unlocated\n", i,
				       ck_key_get_id(k.mv_data), depth, anchor_k);
				out->failures++;
			}
			if (depth > out->max_depth)
				out->max_depth = depth;
		}
		ck_fmap_clear(&m);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return 0;
}

int pk_readback(struct ck_store *st, struct ck_chunk_cache *cache, unsigned anchor_k, unsigned seed,
		struct pk_readback *out)
{
	char **series;
	size_t ns;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = ck_store_list_series(st, &series, &ns);
	if (rc < 0)
		return rc;
	for (size_t s = 0; s < ns && rc == 0; s++) {
		struct ck_ckpt_info *c;
		size_t nc;

		rc = ck_store_list_checkpoints(st, series[s], &c, &nc);
		for (size_t i = 0; i < nc && rc == 0; i++) {
			struct ck_file_info *f;
			size_t nf;

			rc = ck_store_list_files(st, c[i].id, &f, &nf);
			for (size_t j = 0; j < nf && rc == 0; j++) {
				out->files++;
				rc = check_file(st, cache, &f[j], seed + (unsigned)(i * 31 + j), out);
			}
			if (rc == 0)
				ck_file_info_free(f, nf);
		}
		if (rc == 0)
			ck_ckpt_info_free(c, nc);
	}
	ck_strv_free(series, ns);
	if (rc == 0)
		rc = check_depths(st, anchor_k, out);
	return rc;
}
