/* Fuzz target: journal entries (src/store/journal.c), which every index of
 * a store reads, from every node.  Each input is parsed as it is, and again
 * with its last line replaced by a checksum line that matches, which takes
 * the mutations into the grammar.  A parse fails with -EBADMSG, -EINVAL,
 * -E2BIG or -EPROTONOSUPPORT and a reason, or succeeds on text that the
 * writer reproduces byte for byte (there is one spelling of each entry). */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "store/journal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CSUM_PREFIX "checksum xxh3-128="

static void check(const char *text, size_t len)
{
	struct ck_error err = { { 0 } };
	struct ck_buf again = CK_BUF_INIT;
	struct ck_journal_entry e;
	int rc = ck_journal_parse(text, len, &e, &err);

	if (rc) {
		if (!err.msg[0] || (rc != -EBADMSG && rc != -EINVAL && rc != -E2BIG && rc != -EPROTONOSUPPORT))
			abort();
		return;
	}
	if (ck_journal_format(&again, &e) || again.len != len || memcmp(again.data, text, len))
		abort();
	ck_buf_free(&again);
	ck_journal_entry_clear(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text;
	size_t body = size;
	XXH128_hash_t h;

	if (size > CK_JOURNAL_MAX_BYTES)
		return 0;
	check((const char *)data, size);
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
