/* Fuzz target: tombstones (src/store/tombstone.c).  Each input is parsed
 * as it is, which random bytes rarely get past the checksum of, and again
 * with its last line replaced by a checksum line that matches, which takes
 * the mutations into the grammar.  A parse fails with -EBADMSG or -EINVAL
 * and a reason, or succeeds on text that the writer reproduces byte for
 * byte (there is one spelling of each tombstone). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "store/delete.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CSUM_PREFIX "checksum xxh3-128="

static void check(const char *text, size_t len)
{
	struct ck_error err = { { 0 } };
	struct ck_buf again = CK_BUF_INIT;
	int64_t imported = 0, deleted = 0;
	int rc = ck_tombstone_parse(text, len, &imported, &deleted, &err);

	if (rc) {
		if (!err.msg[0] || (rc != -EBADMSG && rc != -EINVAL))
			abort();
		return;
	}
	if (ck_tombstone_format(&again, imported, deleted) || again.len != len || memcmp(again.data, text, len))
		abort();
	ck_buf_free(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	size_t body = size;
	XXH128_hash_t h;

	if (size > 8192)
		return 0;
	check((const char *)data, size);
	/* The body: everything up to the start of the last line. */
	while (body > 0 && data[body - 1] == '\n')
		body--;
	while (body > 0 && data[body - 1] != '\n')
		body--;
	text = malloc(body + sizeof(CSUM_PREFIX) + 34);
	if (!text)
		return 0;
	memcpy(text, data, body);
	h = XXH3_128bits(data, body);
	body += (size_t)snprintf(text + body, sizeof(CSUM_PREFIX) + 34, CSUM_PREFIX "%016" PRIx64 "%016" PRIx64 "\n",
				 h.high64, h.low64);
	check(text, body);
	free(text);
	return 0;
}
