/* Completeness of torch Distributed Checkpoint (DCP) directories.
 *
 * A DCP save writes its data files (*.distcp) first and the pickled
 * .metadata last: a directory with data files but no .metadata is a save
 * that did not finish.  What a .metadata says about the files beside it
 * (that they are there and hold its items) is checked when the files are
 * ingested (ck_ingest_dcp_names), which refuses the .metadata with the
 * reason. */
#include "config.h"

#include <string.h>

#include "ckptfs/dcp.h"
#include "ckptfs/str.h"
#include "staging.h"

/* Length of the directory part of rel ("a/b/x" -> 3, "x" -> 0). */
static size_t dir_len(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? (size_t)(slash - rel) : 0;
}

static int has_metadata(char *const *rel, size_t n, const char *dir, size_t dlen)
{
	for (size_t i = 0; i < n; i++) {
		const char *r = rel[i];

		if (dir_len(r) == dlen && !strncmp(r, dir, dlen) && !strcmp(r + dlen + (dlen > 0), CK_DCP_METADATA))
			return 1;
	}
	return 0;
}

int ck_dcp_check(char *const *rel, size_t n, struct ck_buf *reasons)
{
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++)
		if (ck_ends_with(rel[i], CK_DCP_DATA_SUFFIX) && !has_metadata(rel, n, rel[i], dir_len(rel[i])))
			rc = ck_reason_add(reasons, "%s: DCP data file without a .metadata beside it (save not finished)",
					   rel[i]);
	return rc;
}
