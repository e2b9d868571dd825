/* ckptctl recipe add|ls|show|rm STORE [NAME [FILE.yaml]]: MergeKit /
 * LLMTailor recipes kept in the store, served by a mount as checkpoints
 * under MNT/.ckptfs/recipes/NAME/ (include/ckptfs/recipe.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/catalog.h"
#include "ckptfs/fileio.h"
#include "ckptfs/recipe.h"
#include "ckptfs/view.h"
#include "cli.h"

/* Catalogs built for one check, freed together. */
struct cat_cache {
	const struct ck_vnode **node;
	struct ck_catalog **cat;
	size_t n;
	struct ck_view *v;
};

static int cat_get(void *ctx, const struct ck_vnode *ckpt, struct ck_catalog **out)
{
	struct cat_cache *cc = ctx;
	const struct ck_vnode **nn;
	struct ck_catalog **nc;
	int rc;

	for (size_t i = 0; i < cc->n; i++)
		if (cc->node[i] == ckpt) {
			*out = cc->cat[i];
			return 0;
		}
	nn = realloc(cc->node, (cc->n + 1) * sizeof(*nn));
	if (nn)
		cc->node = nn;
	nc = nn ? realloc(cc->cat, (cc->n + 1) * sizeof(*nc)) : NULL;
	if (!nc)
		return -ENOMEM;
	cc->cat = nc;
	rc = ck_catalog_build(cc->v, ckpt, 0, out);
	if (rc)
		return rc;
	cc->node[cc->n] = ckpt;
	cc->cat[cc->n++] = *out;
	return 0;
}

static void cat_cache_free(struct cat_cache *cc)
{
	for (size_t i = 0; i < cc->n; i++)
		ck_catalog_free(cc->cat[i]);
	free(cc->node);
	free(cc->cat);
}

/* Parses text and checks it against the store's checkpoints: CK_EXIT_OK (and,
 * verbose, where each part comes from), or CK_EXIT_FAILURE after printing
 * "LABEL:LINE: reason". */
static int check(struct ck_view *v, const char *label, const char *text, size_t len, int verbose)
{
	struct cat_cache cc = { NULL, NULL, 0, v };
	struct ck_catalog_source cats = { cat_get, &cc };
	struct ck_error err = { { 0 } };
	struct ck_recipe *r = NULL;
	struct ck_recipe_plan *plan = NULL;
	unsigned line = 0;
	int rc = ck_recipe_parse(text, len, &r, &line, &err);

	if (!rc)
		rc = ck_recipe_check(v, r, &cats, &plan, &line, &err);
	if (rc) {
		if (line)
			cli_error("%s:%u: %s", label, line, ck_error_text(&err, rc));
		else
			cli_error("%s: %s", label, ck_error_text(&err, rc));
	} else if (verbose) {
		int64_t at = 0;

		printf("base: %s/%s (param_groups, scheduler, config and file layout)\n", r->base.series, r->base.ckpt);
		for (size_t s = 0; s < r->nslices; s++) {
			const struct ck_recipe_slice *sl = &r->slices[s];

			printf("blocks %lld-%lld: %s/%s blocks %lld-%lld\n", (long long)at,
			       (long long)(at + sl->end - sl->start - 1), sl->model.series, sl->model.ckpt,
			       (long long)sl->start, (long long)sl->end - 1);
			at += sl->end - sl->start;
		}
		for (size_t w = 0; w < r->nweights; w++)
			printf("%s: %s/%s\n", r->weights[w].name, r->weights[w].model.series, r->weights[w].model.ckpt);
	}
	ck_recipe_plan_free(plan);
	ck_recipe_free(r);
	cat_cache_free(&cc);
	return rc ? CK_EXIT_FAILURE : CK_EXIT_OK;
}

static char *read_text(const char *path, size_t *len)
{
	uint8_t *buf = NULL;
	int rc = ck_read_file(path, CK_RECIPE_MAX_BYTES, &buf, len);

	if (rc == -EFBIG)
		cli_error("recipe: %s: %zu bytes: a recipe is at most %u bytes", path, *len, CK_RECIPE_MAX_BYTES);
	else if (rc)
		cli_error("recipe: %s: %s", path, strerror(-rc));
	return rc ? NULL : (char *)buf;
}

static struct ck_view *open_view(const char *store)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	int rc = ck_view_open(store, NULL, &v, &err);

	if (rc < 0) {
		cli_error("recipe: %s", ck_error_text(&err, rc));
		return NULL;
	}
	return v;
}

static int cmd_add(const char *store, const char *name, const char *file)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	size_t len = 0;
	char *text;
	int rc;

	if (!ck_recipe_name_ok(name)) {
		cli_error("recipe: '%s': a name is 1 to %d letters, digits, '.', '_' or '-', not starting with '.'", name,
			  CK_RECIPE_MAX_NAME);
		return CK_EXIT_USAGE;
	}
	text = read_text(file, &len);
	if (!text)
		return CK_EXIT_FAILURE;
	v = open_view(store);
	rc = v ? check(v, file, text, len, 0) : CK_EXIT_FAILURE;
	if (v)
		ck_view_close(v);
	if (rc == CK_EXIT_OK && ck_store_recipe_add(store, name, text, len, &err) < 0) {
		cli_error("recipe: %s", err.msg);
		rc = CK_EXIT_FAILURE;
	}
	if (rc == CK_EXIT_OK)
		printf("added recipe %s: MNT/.ckptfs/recipes/%s/\n", name, name);
	free(text);
	return rc;
}

static int cmd_ls(const char *store)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v = open_view(store);
	char **names = NULL, label[512];
	size_t n = 0;
	int rc;

	if (!v)
		return CK_EXIT_FAILURE;
	rc = ck_store_recipe_list(store, &names, &n);
	if (rc < 0) {
		cli_error("recipe: %s: %s", store, strerror(-rc));
		ck_view_close(v);
		return CK_EXIT_FAILURE;
	}
	for (size_t i = 0; i < n; i++) {
		char *text = NULL;
		size_t len = 0;

		snprintf(label, sizeof(label), "recipe %s", names[i]);
		if (ck_store_recipe_read(store, names[i], &text, &len, &err) < 0) {
			printf("%-24s unreadable: %s\n", names[i], err.msg);
			continue;
		}
		/* check() says why on stderr when it does not check any more. */
		printf("%-24s %s\n", names[i], check(v, label, text, len, 0) == CK_EXIT_OK ? "ok" : "does not check");
		free(text);
	}
	ck_strv_free(names, n);
	ck_view_close(v);
	return CK_EXIT_OK;
}

static int cmd_show(const char *store, const char *name)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	char *text = NULL, label[512];
	size_t len = 0;
	int rc;

	if (ck_store_recipe_read(store, name, &text, &len, &err) < 0) {
		cli_error("recipe: %s", err.msg);
		return CK_EXIT_FAILURE;
	}
	fwrite(text, 1, len, stdout);
	if (len && text[len - 1] != '\n')
		putchar('\n');
	printf("---\n");
	fflush(stdout);
	snprintf(label, sizeof(label), "recipe %s", name);
	v = open_view(store);
	rc = v ? check(v, label, text, len, 1) : CK_EXIT_FAILURE;
	if (v)
		ck_view_close(v);
	free(text);
	return rc;
}

static int cmd_rm(const char *store, const char *name)
{
	struct ck_error err = { { 0 } };

	if (ck_store_recipe_remove(store, name, &err) < 0) {
		cli_error("recipe: %s", err.msg);
		return CK_EXIT_FAILURE;
	}
	printf("removed recipe %s\n", name);
	return CK_EXIT_OK;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	const char *sub;
	int rc, nargs;

	rc = cli_getopt(cmd, argc, argv, "", NULL, NULL, NULL);
	if (rc >= 0)
		return rc;
	nargs = argc - optind;
	if (nargs < 2)
		return cli_usage_error(cmd, "expected add, ls, show or rm, and STORE");
	sub = argv[optind];
	if (!strcmp(sub, "add")) {
		if (nargs != 4)
			return cli_usage_error(cmd, "add: expected STORE NAME FILE.yaml");
		return cmd_add(argv[optind + 1], argv[optind + 2], argv[optind + 3]);
	}
	if (!strcmp(sub, "ls")) {
		if (nargs != 2)
			return cli_usage_error(cmd, "ls: expected STORE");
		return cmd_ls(argv[optind + 1]);
	}
	if (!strcmp(sub, "show") || !strcmp(sub, "rm")) {
		if (nargs != 3)
			return cli_usage_error(cmd, "%s: expected STORE NAME", sub);
		return sub[0] == 's' ? cmd_show(argv[optind + 1], argv[optind + 2])
				     : cmd_rm(argv[optind + 1], argv[optind + 2]);
	}
	return cli_usage_error(cmd, "unknown subcommand '%s' (add, ls, show, rm)", sub);
}

const struct cli_cmd cli_cmd_recipe = {
	.name = "recipe",
	.args = "add|ls|show|rm STORE [NAME [FILE.yaml]]",
	.summary = "keep MergeKit/LLMTailor recipes that a mount serves as checkpoints",
	.help = "A recipe is a MergeKit passthrough configuration (slices of blocks, each from a\n"
		"checkpoint SERIES/CKPT of the store) with LLMTailor's pre_weights/post_weights\n"
		"(embeddings, final norm, head, each from a checkpoint).  A mount serves it as\n"
		"MNT/.ckptfs/recipes/NAME/, a complete resumable checkpoint (each block's weights\n"
		"and optimizer moments from its checkpoint; param_groups, scheduler and config\n"
		"from base_model, by default the last slice's model), and its weights under\n"
		"MNT/.ckptfs/weights/@recipes/NAME/; nothing is copied.\n"
		"\n"
		"  add STORE NAME FILE.yaml  check FILE against the store and keep it as NAME;\n"
		"                            a refusal says FILE:LINE: why\n"
		"  ls STORE                  the recipes, and whether each still checks\n"
		"  show STORE NAME           the recipe's text and where each part comes from\n"
		"  rm STORE NAME             forget the recipe (its sources are untouched)\n"
		"\n"
		"Refused: unknown checkpoints, layer ranges outside their model, overlapping or\n"
		"missing blocks, tensors whose dtype or shape differ from the base's, merge\n"
		"methods other than passthrough (averaging computes new bytes: out of scope),\n"
		"alias explosions and documents over 1 MiB.  See docs/format.md, \"Recipes\".\n",
	.run = run,
};
