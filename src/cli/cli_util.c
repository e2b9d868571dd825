/* Helpers shared by the ckptctl commands: messages, option parsing, store
 * opening and printing --json output. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "ckptfs/fileio.h"
#include "ckptfs/json.h"
#include "ckptfs/packstore.h"
#include "cli.h"

void cli_error(const char *fmt, ...)
{
	va_list ap;

	fputs("ckptctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_usage_error(const struct cli_cmd *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ckptctl %s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nusage: ckptctl %s %s\nTry 'ckptctl %s --help'.\n", cmd->name, cmd->args, cmd->name);
	return CK_EXIT_USAGE;
}

void cli_print_help(const struct cli_cmd *cmd)
{
	printf("usage: ckptctl %s %s\n\n%s\n", cmd->name, cmd->args, cmd->summary);
	if (cmd->help && *cmd->help)
		printf("\n%s", cmd->help);
	printf("\n  -h, --help  show this help\n");
}

int cli_getopt(const struct cli_cmd *cmd, int argc, char **argv, const char *shortopts,
	       const struct option *opts, int (*on_opt)(void *ctx, int c, const char *arg), void *ctx)
{
	struct option all[32];
	char sopts[64];
	size_t n = 0;
	int c, rc;

	while (opts && opts[n].name && n < 30) {
		all[n] = opts[n];
		n++;
	}
	all[n++] = (struct option){ "help", no_argument, NULL, 'h' };
	all[n] = (struct option){ 0, 0, 0, 0 };
	/* Leading ':' so a missing argument is told apart from an unknown option. */
	snprintf(sopts, sizeof(sopts), ":h%s", shortopts ? shortopts : "");
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, sopts, all, NULL)) != -1) {
		if (c == 'h') {
			cli_print_help(cmd);
			return CK_EXIT_OK;
		}
		if (c == ':')
			return cli_usage_error(cmd, "option '%s' needs an argument", argv[optind - 1]);
		if (c == '?')
			return cli_usage_error(cmd, "unknown option '%s'", argv[optind - 1]);
		rc = on_opt ? on_opt(ctx, c, optarg) : CK_EXIT_USAGE;
		if (rc != 0)
			return rc;
	}
	return -1;
}

struct ck_store *cli_open_store(const char *dir, int readonly)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st = NULL;
	int rc = ck_store_open(dir, readonly, &st, &err);

	if (rc == -EACCES)
		cli_error("%s (a store is its owner's alone: other users commit and delete through a mount, "
			  "`ckptctl commit|rm MOUNTPOINT ...`, see ckptctl(1))", ck_error_text(&err, rc));
	else if (rc < 0)
		cli_error("%s", ck_error_text(&err, rc));
	return rc < 0 ? NULL : st;
}

/* FUSE_SUPER_MAGIC (linux/magic.h) */
#define FUSE_MAGIC 0x65735546

int cli_is_mount(const char *path)
{
	char *marker = ck_path_join(path, CK_STORE_MARKER_NAME);
	struct statfs sf;
	struct stat sb;
	int store;

	if (!marker)
		return 0;
	store = stat(marker, &sb) == 0;
	free(marker);
	return !store && statfs(path, &sf) == 0 && sf.f_type == FUSE_MAGIC && stat(path, &sb) == 0 &&
	       S_ISDIR(sb.st_mode);
}

int cli_parse_bound(const char *arg, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v > 0 && v <= CK_LOSSY_BOUND_MAX))
		return -1;
	*out = v;
	return 0;
}

int cli_open_target(const struct cli_cmd *cmd, int argc, char **argv, struct ck_store **st, char **series,
		    char **ckpt)
{
	char *slash;

	if (argc - optind < 1 || argc - optind > 2)
		return cli_usage_error(cmd, "expected STORE and at most one SERIES[/CKPT]");
	*st = cli_open_store(argv[optind], 1);
	if (!*st)
		return CK_EXIT_FAILURE;
	*series = argc - optind == 2 ? argv[optind + 1] : NULL;
	*ckpt = NULL;
	slash = *series ? strchr(*series, '/') : NULL;
	if (slash) {
		*slash = '\0';
		if (slash[1])
			*ckpt = slash + 1;
	}
	return -1;
}

size_t cli_live_first(struct ck_ckpt_info *c, size_t n)
{
	size_t live = 0;

	for (size_t i = 0; i < n; i++) {
		if (!c[i].deleted) {
			struct ck_ckpt_info t = c[live];

			c[live++] = c[i];
			c[i] = t;
		}
	}
	return live;
}

void cli_format_shape(char *out, size_t size, int ndim, const uint64_t *shape)
{
	size_t len = 0;
	int i;

	len += (size_t)snprintf(out, size, "[");
	for (i = 0; i < ndim && len < size; i++)
		len += (size_t)snprintf(out + len, size - len, "%s%" PRIu64, i ? ", " : "", shape[i]);
	if (len < size)
		snprintf(out + len, size - len, "]");
}

/* ---- JSON output ---- */

int jw_finish(struct jw *w)
{
	int rc = CK_EXIT_OK;

	if (jw_error(w)) {
		cli_error("cannot write JSON output: %s", strerror(-jw_error(w)));
		rc = CK_EXIT_FAILURE;
	} else if (fwrite(w->b.data, 1, w->b.len, stdout) != w->b.len || putchar('\n') == EOF) {
		cli_error("cannot write output: %s", strerror(errno));
		rc = CK_EXIT_FAILURE;
	}
	jw_free(w);
	return rc;
}
