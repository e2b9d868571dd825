/* Fuzz target: checkpoint manifests (src/store/manifest.c).  Each input is
 * parsed as it is, which random bytes rarely get past the checksum of, and
 * again with its last line replaced by a checksum line that matches, which
 * takes the mutations into the grammar.  A parse fails with a documented
 * error and a reason, or succeeds on text that the writer reproduces byte
 * for byte (there is one spelling of each manifest). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "store/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CSUM_PREFIX "checksum xxh3-128="

static void check(const char *text, size_t len)
{
	struct ck_error err = { { 0 } };
	struct ck_buf again = CK_BUF_INIT;
	struct ck_manifest m;
	int rc = ck_manifest_parse(text, len, &m, &err);

	if (rc) {
		if (!err.msg[0] || (rc != -EBADMSG && rc != -EINVAL && rc != -EPROTONOSUPPORT && rc != -E2BIG &&
				    rc != -ENOMEM))
			abort();
		return;
	}
	if (ck_manifest_write(&again, &m, &err) || again.len != len || memcmp(again.data, text, len))
		abort();
	ck_buf_free(&again);
	ck_manifest_clear(&m);
}

/* The input up to its last line when that is a checksum line, then a fresh one. */
static void check_resummed(const uint8_t *data, size_t size)
{
	size_t body = size, n;
	XXH128_hash_t h;
	char *text;

	if (body && data[body - 1] == '\n') {
		const uint8_t *nl = body > 1 ? memrchr(data, '\n', body - 1) : NULL;
		size_t start = nl ? (size_t)(nl - data) + 1 : 0;

		if (body - start >= sizeof(CSUM_PREFIX) - 1 &&
		    !memcmp(data + start, CSUM_PREFIX, sizeof(CSUM_PREFIX) - 1))
			body = start;
	}
	text = malloc(body + 64);
	if (!text)
		return;
	memcpy(text, data, body);
	h = XXH3_128bits(text, body);
	n = body + (size_t)sprintf(text + body, CSUM_PREFIX "%016" PRIx64 "%016" PRIx64 "\n", h.high64, h.low64);
	check(text, n);
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check((const char *)data, size);
	check_resummed(data, size);
	return 0;
}
