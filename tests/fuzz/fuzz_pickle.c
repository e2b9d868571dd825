/* Fuzz target for the pickle VM and emitter.  Any input: parse (must not
 * crash, leak or hang); when it parses, emit it, parse the emitted bytes
 * (must succeed) and emit again: the second emission must equal the first,
 * since emitting is a fixpoint on its own output. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void poke(const struct pk_node *root)
{
	char path[64];

	/* The accessors a tensor walker uses, on the top level only. */
	for (size_t i = 0; i < root->n; i++) {
		pk_key_to_path(root->items[i], path, sizeof(path));
		pk_as_tensor(root->items[i]);
	}
	if (root->kind == PK_DICT && root->n >= 2)
		pk_dict_get(root, root->items[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Small limits keep each run fast; emission adds at most a few
	 * levels and nodes per source node (sets, bytes), hence the roomier
	 * limits for the second parse. */
	struct pk_limits lim = { 200, 200000, 1u << 20 };
	struct pk_limits lim2 = { 1000, 4000000, 1u << 24 };
	struct pk_doc *doc = NULL, *again = NULL;
	struct ck_buf a = CK_BUF_INIT, b = CK_BUF_INIT;
	struct ck_error err;

	if (pk_parse(data, size, &lim, &doc, &err))
		return 0;
	poke(pk_doc_root(doc));
	for (size_t i = 0; i < pk_doc_nglobals(doc); i++) {
		const struct pk_node *g = pk_doc_global(doc, i);

		pk_global_is_dangerous(g->v.global.module, g->v.global.name);
	}
	if (pk_emit(pk_doc_root(doc), NULL, &a, &err))
		goto out;   /* e.g. a global name with a newline, a set inside itself */
	if (pk_parse(a.data, a.len, &lim2, &again, &err)) {
		fprintf(stderr, "emitted pickle does not parse: %s\n", err.msg);
		abort();
	}
	if (pk_emit(pk_doc_root(again), NULL, &b, &err)) {
		fprintf(stderr, "re-parsed pickle does not emit: %s\n", err.msg);
		abort();
	}
	if (a.len != b.len || memcmp(a.data, b.data, a.len)) {
		fprintf(stderr, "emission is not a fixpoint (%zu vs %zu bytes)\n", a.len, b.len);
		abort();
	}
out:
	pk_doc_free(doc);
	pk_doc_free(again);
	ck_buf_free(&a);
	ck_buf_free(&b);
	return 0;
}
