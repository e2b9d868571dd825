/* Fuzz target: the packed store's parsers of stored bytes.
 *
 * Input: a packmap (STORE/manifests/SERIES/CKPT.packmap).  It is parsed;
 * whatever parses is written back and must parse to the same maps (a
 * lossy map's bound and per-storage errors included).  The
 * same bytes also go to the file map and chunk location decoders of the
 * index records (a damaged index is untrusted too).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "packstore/packstore_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void need(int ok)
{
	if (!ok)
		abort();
}

static void same_map(const struct ck_fmap *a, const struct ck_fmap *b)
{
	need(a->flags == b->flags && a->size == b->size && a->nchunks == b->nchunks &&
	     a->stored_bytes == b->stored_bytes);
	for (uint32_t i = 0; i < a->nchunks; i++)
		need(ck_hash128_eq(a->chunks[i].hash, b->chunks[i].hash) && a->chunks[i].len == b->chunks[i].len);
	need(a->nlossy == b->nlossy && (!a->nlossy || (a->lossy_bound == b->lossy_bound &&
						       a->lossy_method == b->lossy_method)));
	for (uint32_t i = 0; i < a->nlossy; i++)
		need(a->lossy[i].storage == b->lossy[i].storage && a->lossy[i].max_err == b->lossy[i].max_err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ck_error err = { "" };
	struct ck_packmap pm;
	struct ck_fmap m;
	struct ck_chunk_loc l;
	MDB_val v = { size, (void *)data };

	if (ck_packmap_parse(data, size, &pm, &err) == 0) {
		/* Written back (ck_fmap_put) and parsed again: the same maps. */
		for (size_t i = 0; i < pm.nfiles; i++) {
			struct ck_buf b = CK_BUF_INIT;
			struct ck_fmap again;

			need(ck_fmap_put(&b, &pm.files[i].map) == 0);
			need(ck_fmap_get(b.data, b.len, &again, &err) == 0);
			same_map(&pm.files[i].map, &again);
			ck_fmap_clear(&again);
			ck_buf_free(&b);
		}
		ck_packmap_clear(&pm);
	} else {
		need(err.msg[0] != '\0');
	}
	if (ck_fmap_get(data, size, &m, &err) == 0)
		ck_fmap_clear(&m);
	if (ck_chunk_loc_get(&v, &l) == 0) {
		struct ck_buf b = CK_BUF_INIT;
		struct ck_chunk_loc again;
		MDB_val w;

		need(ck_chunk_loc_put(&b, &l) == 0);
		w.mv_size = b.len;
		w.mv_data = b.data;
		need(ck_chunk_loc_get(&w, &again) == 0 && again.offset == l.offset && again.raw_len == l.raw_len);
		ck_chunk_loc_clear(&again);
		ck_buf_free(&b);
		ck_chunk_loc_clear(&l);
	}
	return 0;
}
