/* ckptctl relocate STORE OLD_PREFIX NEW_PREFIX: files imported in place moved. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

struct relocate_args {
	int dry_run, quiet;
	size_t damaged;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct relocate_args *a = ctx;

	(void)arg;
	switch (c) {
	case 'n':
		a->dry_run = 1;
		return 0;
	case 'q':
		a->quiet = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct relocate_args *a = ctx;

	if (status < 0) {
		a->damaged++;
		cli_error("damaged manifest %s: %s; skipped", path, msg);
	} else if (!a->quiet) {
		printf("%s %s (%s)\n", a->dry_run ? "would relocate" : "relocated", path, msg);
	}
}

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "quiet", no_argument, NULL, 'q' },
		{ 0, 0, 0, 0 },
	};
	struct relocate_args a = { 0 };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc, n;

	rc = cli_getopt(cmd, argc, argv, "nq", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 3)
		return cli_usage_error(cmd, "expected STORE, OLD_PREFIX and NEW_PREFIX");
	if (argv[optind + 1][0] != '/' || argv[optind + 2][0] != '/')
		return cli_usage_error(cmd, "OLD_PREFIX and NEW_PREFIX must be absolute paths");
	st = cli_open_store(argv[optind], a.dry_run);
	if (!st)
		return CK_EXIT_FAILURE;
	n = ck_store_relocate(st, argv[optind + 1], argv[optind + 2], a.dry_run, on_report, &a, &err);
	ck_store_close(st);
	if (n < 0) {
		cli_error("relocate: %s", err.msg[0] ? err.msg : strerror(-n));
		return CK_EXIT_FAILURE;
	}
	if (!a.quiet)
		printf("%s %d checkpoint%s\n", a.dry_run ? "would relocate" : "relocated", n, n == 1 ? "" : "s");
	return a.damaged ? CK_EXIT_PARTIAL : CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_relocate = {
	.name = "relocate",
	.args = "STORE OLD_PREFIX NEW_PREFIX [--dry-run] [-q]",
	.summary = "record that files imported in place moved from OLD_PREFIX to NEW_PREFIX",
	.help = "Checkpoints written through a mount live inside the store and are recorded\n"
		"relative to it: the store can be copied, restored or moved as a whole (cp -a,\n"
		"tar, rsync -a) and serves at once.  Checkpoints imported in place keep the\n"
		"absolute paths of their files; when those files move, this rewrites every\n"
		"recorded path that is OLD_PREFIX or lies under it to lie under NEW_PREFIX, in the\n"
		"manifests (each rewrite journaled, so every node's index follows) and in this\n"
		"node's index.  Files that also got new inodes (copied rather than renamed) are\n"
		"read again once at their next use; a file whose bytes changed stays refused.\n"
		"\n"
		"  -n, --dry-run  list the checkpoints that would change; change nothing\n"
		"  -q, --quiet    no lines but errors\n"
		"\n"
		"Exit status: 0 done, 2 some manifests damaged (skipped), 1 error.\n",
	.run = run,
};
