/* ckptctl quarantine STORE [--json]: the checkpoint directories set aside
 * by commits because a file did not parse completely, and why. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static int on_opt(void *ctx, int c, const char *arg)
{
	(void)arg;
	if (c == 'j') {
		*(int *)ctx = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static void print_text(const struct ck_quarantine_info *q, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		const char *line = q[i].reason;

		printf("%s/%s\n", q[i].series, q[i].name);
		while (*line) {
			size_t len = strcspn(line, "\n");

			printf("    %.*s\n", (int)len, line);
			line += len + (line[len] == '\n');
		}
	}
}

static int print_json(const struct ck_quarantine_info *q, size_t n)
{
	struct jw w = { .b = CK_BUF_INIT };
	size_t i;

	jw_begin_arr(&w);
	for (i = 0; i < n; i++) {
		const char *line = q[i].reason;

		jw_begin_obj(&w);
		jw_key(&w, "series");
		jw_str(&w, q[i].series);
		jw_key(&w, "name");
		jw_str(&w, q[i].name);
		jw_key(&w, "path");
		jw_str(&w, q[i].path);
		jw_key(&w, "reasons");
		jw_begin_arr(&w);
		while (*line) {
			size_t len = strcspn(line, "\n");
			char *one = strndup(line, len);   /* one entry per REASON line */

			if (!one)
				w.err = -ENOMEM;
			else
				jw_str(&w, one);
			free(one);
			line += len + (line[len] == '\n');
		}
		jw_end_arr(&w);
		jw_end_obj(&w);
	}
	jw_end_arr(&w);
	return jw_finish(&w);
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ 0, 0, 0, 0 },
	};
	struct ck_quarantine_info *q;
	struct ck_store *st;
	int json = 0, rc;
	size_t n;

	rc = cli_getopt(cmd, argc, argv, "j", opts, on_opt, &json);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage_error(cmd, "expected one STORE");
	st = cli_open_store(argv[optind], 1);
	if (!st)
		return CK_EXIT_FAILURE;
	rc = ck_store_list_quarantine(st, &q, &n);
	ck_store_close(st);
	if (rc < 0) {
		cli_error("%s: cannot list the quarantine: %s", argv[optind], strerror(-rc));
		return CK_EXIT_FAILURE;
	}
	if (json) {
		rc = print_json(q, n);
	} else {
		print_text(q, n);
		rc = CK_EXIT_OK;
	}
	ck_quarantine_info_free(q, n);
	return rc;
}

const struct cli_cmd cli_cmd_quarantine = {
	.name = "quarantine",
	.args = "STORE [--json]",
	.summary = "list checkpoint directories a commit set aside, and why",
	.help = "Lists STORE/quarantine/SERIES/DIR.TIME/: staged checkpoint directories that\n"
		"`ckptctl commit` (or the writable mount) refused because a file did not parse\n"
		"completely, each with the lines of its REASON file (\"FILE: why\").  Inspect them\n"
		"there; remove them with rm -r when done.\n"
		"\n"
		"  -j, --json   a JSON array of {series, name, path, reasons: [...]}\n",
	.run = run,
};
