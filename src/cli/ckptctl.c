/* ckptctl: the operator's tool for ckptfs stores.  One file per command
 * (cmd_*.c), each with its synopsis and help; `ckptctl --help` lists the
 * table below, and ckptctl(1) documents each (tests/unit/t_man_options.sh
 * keeps the two in step). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ckptfs/log.h"
#include "ckptfs/memtune.h"
#include "cli.h"

static const struct cli_cmd *const commands[] = {
	&cli_cmd_init, &cli_cmd_import, &cli_cmd_ls, &cli_cmd_show, &cli_cmd_layers, &cli_cmd_reindex,
	&cli_cmd_verify, &cli_cmd_commit, &cli_cmd_quarantine, &cli_cmd_recover,
	&cli_cmd_stats, &cli_cmd_rm,
	&cli_cmd_compact,
	&cli_cmd_gc,
	&cli_cmd_relocate,
	&cli_cmd_lossy,
	&cli_cmd_diff,
	&cli_cmd_recipe,
	&cli_cmd_resume_info,
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
	size_t i;

	fprintf(out, "usage: ckptctl [-h|--help] [-V|--version] [--index-dir DIR] COMMAND [ARGS...]\n\n"
		     "Manage ckptfs checkpoint stores.\n\n"
		     "  --index-dir DIR  where this node keeps the index of a store on a network or\n"
		     "                   distributed filesystem (default /var/cache/ckptfs)\n\nCommands:\n");
	for (i = 0; i < NCOMMANDS; i++) {
		if (!commands[i]->hidden)
			fprintf(out, "  %-12s %s\n", commands[i]->name, commands[i]->summary);
	}
	fprintf(out, "\nRun 'ckptctl COMMAND --help' for a command's options; see ckptctl(1).\n");
}

static const struct cli_cmd *find(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++) {
		if (strcmp(commands[i]->name, name) == 0)
			return commands[i];
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const struct cli_cmd *cmd;

	ck_tune_malloc();
	ck_log_init("ckptctl", 0, CK_LOG_WARN);
	if (argc < 2) {
		usage(stderr);
		return CK_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return CK_EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version")) {
		printf("ckptctl (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
		return CK_EXIT_OK;
	}
	if (!strcmp(argv[1], "help")) {
		if (argc < 3) {
			usage(stdout);
			return CK_EXIT_OK;
		}
		cmd = find(argv[2]);
		if (!cmd) {
			cli_error("unknown command '%s'; try 'ckptctl --help'", argv[2]);
			return CK_EXIT_USAGE;
		}
		cli_print_help(cmd);
		return CK_EXIT_OK;
	}
	while (argc > 1 && !strncmp(argv[1], "--index-dir", 11)) {
		const char *dir = argv[1][11] == '=' ? argv[1] + 12 : argv[1][11] == '\0' && argc > 2 ? argv[2] : NULL;

		if (!dir || dir[0] != '/') {
			cli_error("--index-dir needs an absolute path; try 'ckptctl --help'");
			return CK_EXIT_USAGE;
		}
		if (ck_store_set_index_base(dir) < 0) {
			cli_error("out of memory");
			return CK_EXIT_FAILURE;
		}
		argc -= argv[1][11] == '=' ? 1 : 2;
		argv += argv[1][11] == '=' ? 1 : 2;
	}
	if (argc < 2) {
		usage(stderr);
		return CK_EXIT_USAGE;
	}
	if (argv[1][0] == '-') {
		cli_error("unknown option '%s'; try 'ckptctl --help'", argv[1]);
		return CK_EXIT_USAGE;
	}
	cmd = find(argv[1]);
	if (!cmd) {
		cli_error("unknown command '%s'; try 'ckptctl --help'", argv[1]);
		return CK_EXIT_USAGE;
	}
	return cmd->run(cmd, argc - 1, argv + 1);
}
