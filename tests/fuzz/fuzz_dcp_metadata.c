/* Fuzz target: ck_dcp_parse.  What parses must hold together: every chunk
 * of every entry points back at it, check_files finds nothing past a file
 * whose size is the largest end named, and the save merged with itself
 * (the copy under a prefix) comes out as a .metadata that parses to the
 * same FQNs, each item under its own path. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ckptfs/dcp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t largest_end(void *ctx, const char *relpath)
{
	(void)relpath;
	return *(const int64_t *)ctx;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ck_dcp_meta *m = NULL, *back = NULL;
	struct ck_dcp_merged out;
	struct ck_error err;
	int64_t end = 0;

	if (ck_dcp_parse(data, size, &m, &err)) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	for (size_t i = 0; i < m->nentries; i++) {
		const struct ck_dcp_entry *e = &m->entries[i];

		if (ck_dcp_find(m, e->fqn) != e || !e->nchunks || (e->is_bytes && e->nchunks != 1))
			abort();
		for (size_t k = 0; k < e->nchunks; k++)
			if (m->chunks[e->chunks[k]].entry != i)
				abort();
	}
	for (size_t i = 0; i < m->nchunks; i++)
		if ((int64_t)(m->chunks[i].offset + m->chunks[i].length) > end)
			end = (int64_t)(m->chunks[i].offset + m->chunks[i].length);
	if (ck_dcp_check_files(m, largest_end, &end, &err))
		abort();
	{
		struct ck_dcp_source src[2] = { { m, NULL, NULL }, { m, "older/", NULL } };

		if (ck_dcp_merge(src, 2, CK_DCP_MERGE_ALWAYS_EMIT, &out, &err) == 0) {
			if (out.nmerged != 2 || out.npicks != m->nentries)
				abort();
			if (ck_dcp_parse(out.bytes.data, out.bytes.len, &back, &err) || back->nentries != m->nentries ||
			    back->nchunks != m->nchunks)
				abort();
			for (size_t i = 0; i < back->nchunks; i++)
				if (!strncmp(back->chunks[i].relpath, "older/", 6))
					abort();   /* every FQN is the newest's */
			ck_dcp_free(back);
			ck_dcp_merged_free(&out);
		}
	}
	ck_dcp_free(m);
	return 0;
}
