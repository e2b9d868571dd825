/* ckptctl layers STORE [--add REGEX TEMPLATE | NAME...]: the layer rules in
 * effect, adding one to STORE/layers.conf, or the layer of given names. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct layers_args {
	int add;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct layers_args *a = ctx;

	if (c == 'a') {
		a->add = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static void print_rules(const struct ck_layer_rules *r, const char *store)
{
	size_t i, n = ck_layer_rules_count(r);
	int printed_builtin = 0, printed_user = 0;

	for (i = 0; i < n; i++) {
		const char *re, *tmpl;
		int user;

		if (ck_layer_rule_at(r, i, &re, &tmpl, &user) < 0)
			break;
		if (user && !printed_user) {
			printf("# user rules (%s/layers.conf), tried first\n", store);
			printed_user = 1;
		}
		if (!user && !printed_builtin) {
			printf("%s# built-in rules\n", printed_user ? "\n" : "");
			printed_builtin = 1;
		}
		printf("%s\t%s\n", re, tmpl);
	}
	printf("# no match: other\n");
}

static int add_rule(const char *store, const char *regex, const char *tmpl)
{
	struct ck_error err = { { 0 } };
	size_t n = strlen(store) + sizeof("/layers.conf");
	char *path = malloc(n);
	int rc;

	if (!path) {
		cli_error("layers: out of memory");
		return CK_EXIT_FAILURE;
	}
	snprintf(path, n, "%s/layers.conf", store);
	rc = ck_layer_rules_append_file(path, regex, tmpl, &err);
	if (rc < 0) {
		cli_error("layers: %s", err.msg);
		free(path);
		return CK_EXIT_FAILURE;
	}
	printf("added to %s: %s\t%s\n", path, regex, tmpl);
	printf("note: the index records layers at import; import again to update those of imported tensors\n");
	free(path);
	return CK_EXIT_OK;
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "add", no_argument, NULL, 'a' },
		{ 0, 0, 0, 0 },
	};
	struct layers_args a = { 0 };
	const struct ck_layer_rules *r;
	struct ck_store *st;
	int rc, i;

	rc = cli_getopt(cmd, argc, argv, "a", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind < 1)
		return cli_usage_error(cmd, "expected STORE");
	if (a.add && argc - optind != 3)
		return cli_usage_error(cmd, "--add takes a REGEX and a TEMPLATE");
	/* Opening checks that STORE is a store and that its layers.conf reads. */
	st = cli_open_store(argv[optind], 1);
	if (!st)
		return CK_EXIT_FAILURE;
	r = ck_store_layer_rules(st);
	if (a.add) {
		rc = add_rule(argv[optind], argv[optind + 1], argv[optind + 2]);
	} else if (argc - optind == 1) {
		print_rules(r, argv[optind]);
		rc = CK_EXIT_OK;
	} else {
		rc = CK_EXIT_OK;
		for (i = optind + 1; i < argc; i++) {
			char layer[256];

			if (ck_layer_of(r, argv[i], layer, sizeof(layer)) < 0) {
				cli_error("layers: %s: layer name too long", argv[i]);
				rc = CK_EXIT_FAILURE;
				continue;
			}
			printf("%s\t%s\n", argv[i], layer);
		}
	}
	ck_store_close(st);
	return rc;
}

const struct cli_cmd cli_cmd_layers = {
	.name = "layers",
	.args = "STORE [--add REGEX TEMPLATE | NAME...]",
	.summary = "show the layer rules, add one, or show the layer of tensor names",
	.help = "A rule is a POSIX extended regex and a template; the first rule whose regex matches\n"
		"a tensor name gives its layer, with \\1..\\9 replaced by the regex's groups.  User\n"
		"rules (STORE/layers.conf, one \"REGEX TEMPLATE\" per line) come before the built-ins.\n"
		"\n"
		"  -a, --add REGEX TEMPLATE  append a rule to STORE/layers.conf (checked first)\n"
		"  NAME...                   print the layer of each tensor name\n",
	.run = run,
};
