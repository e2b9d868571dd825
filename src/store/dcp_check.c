/* Completeness of torch Distributed Checkpoint (DCP) directories.
 *
 * A DCP save writes its data files (*.distcp) first and the pickled
 * .metadata last: a directory with data files but no .metadata is a save
 * that did not finish, and a .metadata naming a data file that is not
 * there describes bytes that do not exist.  The .metadata is parsed with
 * the symbolic pickle VM (nothing is executed); the data files it names
 * are the strings of the document that end in ".distcp" (the
 * relative_path of each _StorageInfo). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/pickle.h"
#include "ckptfs/ingest.h"
#include "ckptfs/str.h"
#include "staging.h"

#define METADATA ".metadata"
#define MAX_METADATA (256u << 20)
#define MAX_VISITS 10000000u   /* nodes walked in one .metadata (the memo can share subtrees) */

static const char *base_of(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? slash + 1 : rel;
}

/* Length of the directory part of rel ("a/b/x" -> 3, "x" -> 0). */
static size_t dir_len(const char *rel)
{
	const char *slash = strrchr(rel, '/');

	return slash ? (size_t)(slash - rel) : 0;
}

static int listed(char *const *rel, size_t n, const char *dir, size_t dlen, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (dir_len(rel[i]) == dlen && strncmp(rel[i], dir, dlen) == 0 && strcmp(base_of(rel[i]), name) == 0)
			return 1;
	}
	return 0;
}

struct names {
	char *const *rel;
	size_t n;
	const char *meta_rel;
	size_t dlen;
	size_t visits;
	struct ck_buf *reasons;
	int missing;
};

static int visit(struct names *nm, const struct pk_node *node, size_t depth)
{
	size_t i;
	int rc = 0;

	if (!node)
		return 0;
	if (++nm->visits > MAX_VISITS || depth > 2000)
		return -E2BIG;
	if (node->kind == PK_STR && ck_ends_with(node->v.str.s, CK_DCP_DATA_SUFFIX) && !nm->missing) {
		if (strchr(node->v.str.s, '/') || !listed(nm->rel, nm->n, nm->meta_rel, nm->dlen, node->v.str.s)) {
			nm->missing = 1;
			rc = ck_buf_printf(nm->reasons, "%s: names data file %.200s, which is not there\n",
					   nm->meta_rel, node->v.str.s);
		}
		return rc;
	}
	for (i = 0; i < node->n && rc == 0; i++)
		rc = visit(nm, node->items[i], depth + 1);
	if (rc == 0 && node->kind != PK_GLOBAL)
		rc = visit(nm, node->cls, depth + 1);
	if (rc == 0)
		rc = visit(nm, node->args, depth + 1);
	if (rc == 0)
		rc = visit(nm, node->kwargs, depth + 1);
	if (rc == 0)
		rc = visit(nm, node->state, depth + 1);
	return rc;
}

static int check_metadata(const char *root, char *const *rel, size_t n, const char *meta_rel, struct ck_buf *reasons)
{
	struct names nm = { .rel = rel, .n = n, .meta_rel = meta_rel, .dlen = dir_len(meta_rel), .reasons = reasons };
	struct ck_error perr = { { 0 } };
	const struct pk_node *g;
	struct pk_doc *doc = NULL;
	uint8_t *data = NULL;
	size_t len = 0;
	char *path = ck_path_join(root, meta_rel);
	int rc;

	if (!path)
		return -ENOMEM;
	rc = ck_read_file(path, MAX_METADATA, &data, &len);
	free(path);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_buf_printf(reasons, "%s: cannot read it: %s\n", meta_rel,
				     rc == -EFBIG ? "larger than 256 MiB" : rc == -EIO ? "shorter than its size" :
				     strerror(-rc));
	rc = pk_parse(data, len, NULL, &doc, &perr);
	free(data);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		return ck_buf_printf(reasons, "%s: not a complete pickle: %s\n", meta_rel, perr.msg);
	if (pk_doc_dangerous_global(doc, &g)) {
		rc = ck_buf_printf(reasons, "%s: refers to dangerous global %s.%s (never executed)\n", meta_rel,
				   g->v.global.module, g->v.global.name);
	} else {
		rc = visit(&nm, pk_doc_root(doc), 0);
		if (rc == -E2BIG)
			rc = ck_buf_printf(reasons, "%s: too large a document to check\n", meta_rel);
	}
	pk_doc_free(doc);
	return rc;
}

int ck_dcp_check(const char *root, char *const *rel, size_t n, struct ck_buf *reasons)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < n && rc == 0; i++) {
		const char *base = base_of(rel[i]);
		size_t dlen = dir_len(rel[i]);

		if (strcmp(base, METADATA) == 0)
			rc = check_metadata(root, rel, n, rel[i], reasons);
		else if (ck_ends_with(base, CK_DCP_DATA_SUFFIX) && !listed(rel, n, rel[i], dlen, METADATA))
			rc = ck_buf_printf(reasons, "%s: DCP data file without a .metadata beside it (save not finished)\n",
					   rel[i]);
	}
	return rc;
}
