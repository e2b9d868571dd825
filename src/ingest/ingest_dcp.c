/* Ingesting a torch DCP data file (*.distcp).
 *
 * torch.distributed.checkpoint's FileSystemWriter appends one whole
 * torch.save zip per item (a tensor, or an io.BytesIO of any object) to
 * the file, and only the .metadata beside it says where each begins
 * (docs/formats.md §4.1).  torch reads the file by offset, so it is served as it
 * is (kind other).  Its blobs are indexed anyway, so that compaction cuts
 * and codes its tensors as it does a torch.save file's (a storage per
 * chunk run, its element size, deltas against the same storage of the
 * previous save) and verify checks them.
 *
 * The blobs are found from the end: torch's zip writer always ends a zip
 * with a zip64 end record (56 bytes, right after the central directory),
 * its locator (20) and the end record (22, no comment), and the zip64 end
 * record gives the central directory's size and blob-relative offset, so
 * the blob starts at (its position - size - offset).  The walk repeats
 * from there to offset 0.  A file that does not walk to 0, or a blob that
 * does not parse as a torch.save, is only bytes (nothing indexed, nothing
 * refused: the next torch may write something else); a pickle that names
 * a dangerous global is refused, as in any torch.save. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingester.h"

#define Z64_END_LEN 56
#define Z64_LOCATOR_LEN 20
#define END_LEN 22
#define TAIL_LEN (Z64_END_LEN + Z64_LOCATOR_LEN + END_LEN)

struct blob {
	uint64_t start, end;
};

/* The start of the zip that ends at end, or -1 if none does. */
static int64_t blob_start(const struct ck_ingest_io *io, uint64_t end)
{
	uint8_t t[TAIL_LEN];
	const uint8_t *z64 = t, *loc = t + Z64_END_LEN, *eocd = loc + Z64_LOCATOR_LEN;
	uint64_t z64_pos, cd_size, cd_off, start;

	if (end < TAIL_LEN || ck_ingest_pread(io, t, sizeof(t), end - TAIL_LEN) < 0)
		return -1;
	if (ck_le32(eocd) != 0x06054b50 || eocd[20] || eocd[21] || ck_le32(loc) != 0x07064b50 ||
	    ck_le32(z64) != 0x06064b50 || ck_le64(z64 + 4) != Z64_END_LEN - 12)
		return -1;
	z64_pos = end - TAIL_LEN;
	cd_size = ck_le64(z64 + 40);
	cd_off = ck_le64(z64 + 48);
	if (cd_size > z64_pos || cd_off > z64_pos - cd_size)
		return -1;
	start = z64_pos - cd_size - cd_off;
	/* The locator points at the zip64 end record, blob-relative. */
	if (ck_le64(loc + 8) != z64_pos - start)
		return -1;
	return (int64_t)start;
}

/* The blobs of the file in order, or 0 of them if it is not made of zips. */
static int find_blobs(const struct ck_ingest_io *io, struct blob **out, size_t *n)
{
	struct blob *b = NULL;
	size_t nb = 0, cap = 0;
	uint64_t end = io->size;

	*out = NULL;
	*n = 0;
	while (end > 0) {
		int64_t start = blob_start(io, end);

		if (start < 0) {
			free(b);
			return 0;
		}
		if (nb == cap) {
			struct blob *v;

			cap = cap ? cap * 2 : 64;
			v = realloc(b, cap * sizeof(*v));
			if (!v) {
				free(b);
				return -ENOMEM;
			}
			b = v;
		}
		b[nb++] = (struct blob){ (uint64_t)start, end };
		end = (uint64_t)start;
	}
	for (size_t i = 0; i < nb / 2; i++) {
		struct blob x = b[i];

		b[i] = b[nb - 1 - i];
		b[nb - 1 - i] = x;
	}
	*out = b;
	*n = nb;
	return 0;
}

int ck_ingest_distcp(struct ck_ingest_io *io, struct ck_ingest *in)
{
	const uint64_t size = io->size;
	struct blob *b;
	size_t n, i;
	int rc;

	in->info.kind = CK_FILE_OTHER;
	rc = find_blobs(io, &b, &n);
	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++) {
		char prefix[32];

		snprintf(prefix, sizeof(prefix), "%zu/", i);
		io->base = b[i].start;
		io->size = b[i].end - b[i].start;
		io->prefix = prefix;
		io->st_from = in->nst;
		in->info.kind = CK_FILE_TORCH;
		rc = ck_ingest_torch(io, in);
		io->base = 0;
		io->size = size;
		io->prefix = NULL;
		io->st_from = 0;
		if (rc < 0 || in->info.kind != CK_FILE_TORCH)
			break;
	}
	if (rc == 0 && in->info.kind == CK_FILE_BAD && in->hostile) {
		char *why = in->info.error;

		in->info.error = NULL;
		rc = ck_ingest_bad(in, "item %zu (bytes %" PRIu64 "-%" PRIu64 "): %s", i, b[i].start, b[i].end,
				   why ? why : "refused");
		free(why);
	} else if (rc == 0 && i < n) {
		ck_ingest_as_bytes(in);   /* a blob that is not a torch.save: bytes only */
	} else if (rc == 0) {
		in->info.kind = CK_FILE_OTHER;
	}
	free(b);
	return rc;
}
