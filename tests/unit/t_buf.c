/* src/common/buf.c: the growable byte buffer, and ck_grow for arrays
 * (first capacity, doubling, overflow refused with the array intact). */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "testutil.h"

static void grow(void)
{
	size_t cap = 0, n = 0;
	uint32_t *v = NULL, *p;

	for (uint32_t i = 0; i < 1000; i++) {
		if (n == cap) {
			size_t was = cap;

			p = ck_grow(v, &cap, sizeof(*v), 16);
			SETUP(p != NULL);
			CHECK(cap == (was ? was * 2 : 16), "capacity %zu after %zu", cap, was);
			v = p;
		}
		v[n++] = i * 7;
	}
	for (uint32_t i = 0; i < 1000; i++)
		CHECK(v[i] == i * 7, "item %u kept across growths", i);
	CHECK(cap == 1024, "1000 items in %zu slots", cap);

	/* A size whose doubling overflows: refused, nothing changed. */
	cap = SIZE_MAX / 8 + 1;
	CHECK(ck_grow(v, &cap, 4, 16) == NULL && cap == SIZE_MAX / 8 + 1 && v[999] == 999 * 7,
	      "overflow refused with the array and its capacity untouched");
	cap = 0;
	CHECK(ck_grow(NULL, &cap, SIZE_MAX / 2, 4) == NULL && cap == 0, "a first capacity that overflows");
	free(v);
}

static void buffer(void)
{
	struct ck_buf b = CK_BUF_INIT;
	uint8_t *bytes;
	size_t len;

	CHECK(ck_buf_puts(&b, "ab") == 0 && ck_buf_putc(&b, 'c') == 0 && ck_buf_put_le32(&b, 0x64636261u) == 0,
	      "puts, putc, le32");
	CHECK(b.len == 7 && memcmp(b.data, "abcabcd", 7) == 0, "bytes in order");
	CHECK(ck_buf_reserve(&b, SIZE_MAX) != 0 && b.len == 7, "an impossible reserve leaves the buffer");
	bytes = ck_buf_steal(&b, &len);
	CHECK(len == 7 && b.data == NULL && b.len == 0, "steal hands over and resets");
	free(bytes);
}

int main(void)
{
	grow();
	buffer();
	return test_result();
}
