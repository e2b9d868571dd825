/* ckptctl init STORE: make an empty store. */
#include "config.h"

#include <string.h>
#include <stdio.h>

#include "cli.h"

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	struct ck_error err = { { 0 } };
	int rc = cli_getopt(cmd, argc, argv, NULL, NULL, NULL, NULL);

	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage_error(cmd, "expected one STORE directory");
	rc = ck_store_init(argv[optind], &err);
	if (rc < 0) {
		cli_error("init: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	printf("initialized empty ckptfs store in %s\n", argv[optind]);
	return CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_init = {
	.name = "init",
	.args = "STORE",
	.summary = "create an empty store",
	.help = "Creates STORE (or uses it if it is an empty directory) with its marker file\n"
		"STORE/ckptfs-store and its LMDB index STORE/index/.\n",
	.run = run,
};
