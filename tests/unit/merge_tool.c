/* Test tool: merges pickles newest-first with the view's merge and writes
 * the result as a protocol-2 pickle.
 *   merge_tool OUT NEWEST.pkl [OLDER.pkl ...]
 * Prints "merged" when older entries survived, "newest" otherwise. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "view/view_internal.h"
#include "testutil.h"

int main(int argc, char **argv)
{
	struct pk_doc *docs[16], *out_doc;
	struct pk_node *roots[16], *merged;
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };
	int n = argc - 2, used = 0, rc = 1;
	FILE *f;

	if (n < 1 || n > 16) {
		fprintf(stderr, "usage: merge_tool OUT NEWEST [OLDER...]\n");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		size_t len = 0;
		uint8_t *bytes = read_file(argv[i + 2], &len);

		if (!bytes || pk_parse(bytes, len, NULL, &docs[i], &err)) {
			fprintf(stderr, "%s: %s\n", argv[i + 2], err.msg);
			return 1;
		}
		free(bytes);
		roots[i] = pk_doc_root(docs[i]);
	}
	out_doc = pk_doc_new();
	if (!out_doc || merge_trees(out_doc, roots, (size_t)n, &merged, &used, &err) ||
	    pk_emit(merged, NULL, &out, &err)) {
		fprintf(stderr, "merge: %s\n", err.msg);
		goto done;
	}
	f = fopen(argv[1], "wb");
	if (!f || fwrite(out.data, 1, out.len, f) != out.len || fclose(f)) {
		perror(argv[1]);
		goto done;
	}
	printf("%s\n", used ? "merged" : "newest");
	rc = 0;
done:
	ck_buf_free(&out);
	pk_doc_free(out_doc);
	for (int i = 0; i < n; i++)
		pk_doc_free(docs[i]);
	return rc;
}
