/* Fuzz target: bytes as a whole file through tz_read.  When an archive
 * parses, its invariants are checked and it is rebuilt with tz_write, which
 * must read back to the same records. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct mem {
	const uint8_t *data;
	size_t len;
};

static int mem_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct mem *m = ctx;

	if (off > m->len || len > m->len - off)
		return -EIO;
	memcpy(buf, m->data + off, len);
	return 0;
}

struct rebuild {
	struct ck_buf out;
	const uint8_t *src;
	const struct tz_archive *ar;
};

static int rebuild_emit(void *ctx, long record, const void *bytes, uint64_t len)
{
	struct rebuild *r = ctx;

	if (record < 0)
		return ck_buf_put(&r->out, bytes, len);
	return ck_buf_put(&r->out, r->src + r->ar->entries[record].data_offset, len);
}

static void check_and_rebuild(const uint8_t *data, size_t size, const struct tz_archive *ar)
{
	struct rebuild r = { CK_BUF_INIT, data, ar };
	struct tz_record *recs = calloc(ar->n, sizeof(*recs));
	struct tz_archive again;
	struct mem m;
	int stored = 1;

	if (!recs)
		return;
	for (size_t i = 0; i < ar->n; i++) {
		const struct tz_entry *e = &ar->entries[i];

		if (e->data_offset > size || e->csize > size - e->data_offset || tz_find(ar, e->name) != e)
			abort();
		stored &= e->method == 0;
		recs[i].name = e->name;
		recs[i].size = e->size;
		recs[i].crc32 = e->crc32;
	}
	if (stored && tz_write(ar->root, recs, ar->n, 64, rebuild_emit, &r) == 0) {
		m.data = r.out.data;
		m.len = r.out.len;
		if (tz_read(mem_pread, &m, m.len, &again, NULL))
			abort();
		if (again.n != ar->n || strcmp(again.root, ar->root))
			abort();
		for (size_t i = 0; i < ar->n; i++)
			if (strcmp(again.entries[i].name, ar->entries[i].name) ||
			    again.entries[i].size != ar->entries[i].size ||
			    again.entries[i].crc32 != ar->entries[i].crc32)
				abort();
		tz_archive_free(&again);
	}
	ck_buf_free(&r.out);
	free(recs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mem m = { data, size };
	struct tz_archive ar;
	struct ck_error err = { "" };

	(void)tz_is_zip(data, size);
	(void)tz_is_legacy_torch(data, size);
	if (tz_read(mem_pread, &m, size, &ar, &err) == 0) {
		check_and_rebuild(data, size, &ar);
		tz_archive_free(&ar);
	} else if (!err.msg[0]) {
		abort();   /* every failure explains itself */
	}
	return 0;
}
