/* packs_check STORE K: the packed store's invariants, for shell tests
 * (tests/integration/packs_*.sh): every packed file reads back equal to
 * its raw file, no chain is longer than K, and ck_store_verify_packs finds
 * nothing.  Opens the store read-only (no recovery).  Prints what it
 * checked; exit 0 when all holds, 1 otherwise, 99 when it cannot run. */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "t_packstore_util.h"
#include "testutil.h"

static void on_bad(void *ctx, uint64_t file_id, uint64_t off, uint64_t len, const char *why)
{
	uint64_t *n = ctx;

	printf("  verify: file %" PRIu64 " bytes %" PRIu64 "+%" PRIu64 ": %s\n", file_id, off, len, why);
	(*n)++;
}

int main(int argc, char **argv)
{
	struct ck_error err = { { 0 } };
	struct ck_chunk_cache *cache;
	struct pk_readback rb;
	struct ck_store *st;
	uint64_t bad = 0, checked = 0;

	if (argc != 3) {
		fprintf(stderr, "usage: packs_check STORE K\n");
		return 99;
	}
	SETUP(ck_store_open(argv[1], 1, &st, &err) == 0);
	SETUP(ck_chunk_cache_new(64u << 20, &cache) == 0);
	SETUP(pk_readback(st, cache, (unsigned)atoi(argv[2]), 7, &rb) == 0);
	SETUP(ck_store_verify_packs(st, on_bad, &bad, &checked, &err) == 0);
	printf("%" PRIu64 " files, %" PRIu64 " packed, %" PRIu64 " bytes equal, longest chain %u, "
	       "%" PRIu64 " chunks verified, %" PRIu64 " failures, %" PRIu64 " bad chunks\n",
	       rb.files, rb.packed, rb.bytes, rb.max_depth, checked, rb.failures, bad);
	ck_chunk_cache_free(cache);
	ck_store_close(st);
	return rb.failures || bad ? 1 : 0;
}
