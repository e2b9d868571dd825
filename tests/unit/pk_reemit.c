/* Test tool: parses a pickle with pk_parse and writes it again with pk_emit.
 *   pk_reemit [-p PROTOCOL] IN OUT     (IN or OUT may be "-" for stdin / stdout;
 *                                      PROTOCOL 2 by default, "same": the source's)
 * Exits 1 with the parser's or emitter's message on stderr when either
 * fails, so tests can check both the bytes and the refusals. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/pickle.h"

static unsigned char *slurp(FILE *f, size_t *len)
{
	unsigned char *buf = NULL, *p;
	size_t cap = 0, n = 0, got;

	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			p = realloc(buf, cap);
			if (!p) {
				free(buf);
				return NULL;
			}
			buf = p;
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	*len = n;
	return buf;
}

int main(int argc, char **argv)
{
	struct ck_buf out = CK_BUF_INIT;
	struct ck_error err = { "" };
	struct pk_emit_opts opts = { NULL, NULL, 0, 2 };
	int same = 0;
	struct pk_doc *doc = NULL;
	unsigned char *in;
	size_t len;
	FILE *f;
	int rc = 1;

	if (argc == 5 && !strcmp(argv[1], "-p")) {
		same = !strcmp(argv[2], "same");
		opts.protocol = same ? 2 : atoi(argv[2]);
		argv += 2;
		argc -= 2;
	}
	if (argc != 3) {
		fprintf(stderr, "usage: pk_reemit [-p PROTOCOL] IN OUT\n");
		return 2;
	}
	f = strcmp(argv[1], "-") ? fopen(argv[1], "rb") : stdin;
	if (!f) {
		perror(argv[1]);
		return 2;
	}
	in = slurp(f, &len);
	if (f != stdin)
		fclose(f);
	if (!in) {
		fprintf(stderr, "%s: out of memory\n", argv[1]);
		return 2;
	}
	if (pk_parse(in, len, NULL, &doc, &err) ||
	    (same && (opts.protocol = pk_doc_protocol(doc)) < 2 ? (opts.protocol = 2) : 0) ||
	    pk_emit(pk_doc_root(doc), &opts, &out, &err)) {
		fprintf(stderr, "%s: %s\n", argv[1], err.msg);
		goto done;
	}
	f = strcmp(argv[2], "-") ? fopen(argv[2], "wb") : stdout;
	if (!f || fwrite(out.data, 1, out.len, f) != out.len || (f != stdout && fclose(f))) {
		perror(argv[2]);
		goto done;
	}
	if (f == stdout)
		fflush(stdout);
	rc = 0;
done:
	pk_doc_free(doc);
	ck_buf_free(&out);
	free(in);
	return rc;
}
