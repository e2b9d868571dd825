/* ckptctl: one file per command, sharing these helpers. */
#ifndef CKPTFS_CLI_H
#define CKPTFS_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "ckptfs/buf.h"
#include "ckptfs/exitcodes.h"
#include "ckptfs/json.h"
#include "ckptfs/store.h"

struct cli_cmd {
	const char *name;
	const char *args;      /* synopsis after the name */
	const char *summary;   /* one line for `ckptctl --help` */
	const char *help;      /* the rest of `ckptctl CMD --help` */
	int (*run)(const struct cli_cmd *cmd, int argc, char **argv);
	int hidden;            /* not listed in `ckptctl --help` */
};

extern const struct cli_cmd cli_cmd_init, cli_cmd_import, cli_cmd_ls, cli_cmd_show,
	cli_cmd_layers, cli_cmd_verify, cli_cmd_reindex, cli_cmd_commit, cli_cmd_recover, cli_cmd_quarantine,
	cli_cmd_stats, cli_cmd_rm;
extern const struct cli_cmd cli_cmd_compact;
extern const struct cli_cmd cli_cmd_gc;
extern const struct cli_cmd cli_cmd_relocate;
extern const struct cli_cmd cli_cmd_diff, cli_cmd_recipe;
extern const struct cli_cmd cli_cmd_lossy;
extern const struct cli_cmd cli_cmd_resume_info;

/* "ckptctl: <msg>" on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints the error and a hint to use --help; returns CK_EXIT_USAGE. */
int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_print_help(const struct cli_cmd *cmd);

/* Parses a command's options: the usual -h/--help plus opts (terminated by
 * a zero entry).  Calls on_opt for the others; it returns 0 or an exit
 * status.  Returns -1 to go on with argv[optind..], or an exit status. */
int cli_getopt(const struct cli_cmd *cmd, int argc, char **argv, const char *shortopts,
	       const struct option *opts, int (*on_opt)(void *ctx, int c, const char *arg), void *ctx);

/* A lossy bound (ckptctl compact --lossy, ckptctl lossy): a number over 0
 * and at most CK_LOSSY_BOUND_MAX.  0 and *out, or -1. */
int cli_parse_bound(const char *arg, double *out);

/* Opens a store or prints why not (NULL). */
struct ck_store *cli_open_store(const char *dir, int readonly);

/* Whether path is a mount point of ckptfs (a FUSE filesystem that is not a
 * store itself): commit and rm then act through it, as the user running
 * ckptctl, who need not be able to open the store. */
int cli_is_mount(const char *path);

/* The operands of a command taking "STORE [SERIES[/CKPT]]" (argv[optind..]):
 * opens STORE read-only into *st and splits the optional second operand in
 * place into *series (NULL when absent) and *ckpt (what follows the first
 * '/', NULL when nothing does: "run1/" is the series).  Returns -1 to go
 * on, or an exit status after saying why (bad operands, no store). */
int cli_open_target(const struct cli_cmd *cmd, int argc, char **argv, struct ck_store **st, char **series,
		    char **ckpt);

/* --json output is built with jw_* (ckptfs/json.h); jw_finish writes the
 * document and a newline to stdout and frees it: CK_EXIT_OK, or
 * CK_EXIT_FAILURE after saying why (the writer failed, or stdout did). */
int jw_finish(struct jw *w);

/* Moves the live checkpoints of c (not deleted by ckptctl rm) to its
 * front, keeping their order, and the deleted ones after them; returns how
 * many are live. */
size_t cli_live_first(struct ck_ckpt_info *c, size_t n);

/* "[2, 3]" */
void cli_format_shape(char *out, size_t size, int ndim, const uint64_t *shape);

#endif
