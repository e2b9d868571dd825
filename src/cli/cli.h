/* ckptctl: one file per command, sharing these helpers. */
#ifndef CKPTFS_CLI_H
#define CKPTFS_CLI_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>

#include "ckptfs/buf.h"
#include "ckptfs/exitcodes.h"
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
extern const struct cli_cmd cli_cmd_diff, cli_cmd_recipe;

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

/* Opens a store or prints why not (NULL). */
struct ck_store *cli_open_store(const char *dir, int readonly);

/* The operands of a command taking "STORE [SERIES[/CKPT]]" (argv[optind..]):
 * opens STORE read-only into *st and splits the optional second operand in
 * place into *series (NULL when absent) and *ckpt (what follows the first
 * '/', NULL when nothing does: "run1/" is the series).  Returns -1 to go
 * on, or an exit status after saying why (bad operands, no store). */
int cli_open_target(const struct cli_cmd *cmd, int argc, char **argv, struct ck_store **st, char **series,
		    char **ckpt);

/* A minimal JSON writer that keeps track of commas.  Errors stick: after
 * ENOMEM every call is a no-op and jw_finish reports it. */
struct jw {
	struct ck_buf b;
	int depth;
	int first[64];
	int after_key;
	int err;
};

void jw_begin_obj(struct jw *w);
void jw_begin_arr(struct jw *w);
void jw_end_obj(struct jw *w);
void jw_end_arr(struct jw *w);
void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s);
void jw_int(struct jw *w, int64_t v);
void jw_uint(struct jw *w, uint64_t v);
/* %.17g, or null when v is not finite (JSON has no NaN or infinity). */
void jw_double(struct jw *w, double v);
void jw_bool(struct jw *w, int v);
void jw_null(struct jw *w);
/* Writes the document and a newline to stdout, frees it: CK_EXIT_OK or CK_EXIT_FAILURE. */
int jw_finish(struct jw *w);

/* "[2, 3]" */
void cli_format_shape(char *out, size_t size, int ndim, const uint64_t *shape);

#endif
