/* Helpers shared by the ckptctl commands: messages, option parsing, store
 * opening and a small JSON writer for --json output. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
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

	if (rc < 0) {
		cli_error("%s", err.msg[0] ? err.msg : strerror(-rc));
		return NULL;
	}
	return st;
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

/* ---- JSON writer ---- */

static void jw_sep(struct jw *w)
{
	if (w->err)
		return;
	if (w->after_key) {
		w->after_key = 0;
		return;
	}
	if (w->depth > 0) {
		if (!w->first[w->depth - 1] && ck_buf_putc(&w->b, ',') < 0)
			w->err = -ENOMEM;
		w->first[w->depth - 1] = 0;
	}
}

static void jw_open(struct jw *w, char c)
{
	jw_sep(w);
	if (w->err)
		return;
	if (w->depth == (int)(sizeof(w->first) / sizeof(w->first[0]))) {
		w->err = -E2BIG;
		return;
	}
	if (ck_buf_putc(&w->b, (uint8_t)c) < 0)
		w->err = -ENOMEM;
	w->first[w->depth++] = 1;
}

static void jw_close(struct jw *w, char c)
{
	if (w->err)
		return;
	w->depth--;
	if (ck_buf_putc(&w->b, (uint8_t)c) < 0)
		w->err = -ENOMEM;
}

void jw_begin_obj(struct jw *w) { jw_open(w, '{'); }
void jw_begin_arr(struct jw *w) { jw_open(w, '['); }
void jw_end_obj(struct jw *w) { jw_close(w, '}'); }
void jw_end_arr(struct jw *w) { jw_close(w, ']'); }

void jw_key(struct jw *w, const char *key)
{
	jw_sep(w);
	if (!w->err && (js_put_string(&w->b, key, strlen(key)) < 0 || ck_buf_putc(&w->b, ':') < 0))
		w->err = -ENOMEM;
	w->after_key = 1;
}

void jw_str(struct jw *w, const char *s)
{
	jw_sep(w);
	if (!w->err && js_put_string(&w->b, s, strlen(s)) < 0)
		w->err = -ENOMEM;
}

void jw_int(struct jw *w, int64_t v)
{
	jw_sep(w);
	if (!w->err && ck_buf_printf(&w->b, "%" PRId64, v) < 0)
		w->err = -ENOMEM;
}

void jw_uint(struct jw *w, uint64_t v)
{
	jw_sep(w);
	if (!w->err && ck_buf_printf(&w->b, "%" PRIu64, v) < 0)
		w->err = -ENOMEM;
}

/* A finite number with 17 significant digits (it reads back exactly); null otherwise. */
void jw_double(struct jw *w, double v)
{
	if (!isfinite(v)) {
		jw_null(w);
		return;
	}
	jw_sep(w);
	if (!w->err && ck_buf_printf(&w->b, "%.17g", v) < 0)
		w->err = -ENOMEM;
}

void jw_bool(struct jw *w, int v)
{
	jw_sep(w);
	if (!w->err && ck_buf_puts(&w->b, v ? "true" : "false") < 0)
		w->err = -ENOMEM;
}

void jw_null(struct jw *w)
{
	jw_sep(w);
	if (!w->err && ck_buf_puts(&w->b, "null") < 0)
		w->err = -ENOMEM;
}

int jw_finish(struct jw *w)
{
	int rc = CK_EXIT_OK;

	if (w->err) {
		cli_error("cannot write JSON output: %s", strerror(-w->err));
		rc = CK_EXIT_FAILURE;
	} else if (fwrite(w->b.data, 1, w->b.len, stdout) != w->b.len || putchar('\n') == EOF) {
		cli_error("cannot write output: %s", strerror(errno));
		rc = CK_EXIT_FAILURE;
	}
	ck_buf_free(&w->b);
	return rc;
}
