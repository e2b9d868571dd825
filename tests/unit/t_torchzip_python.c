/* The container against real Python clients:
 *  - an archive written by tz_write (records of a real torch.save file,
 *    under another root) passes `python -m zipfile -t` (CRCs included) and
 *    torch.load gives the same objects as for the original file;
 *  - an archive written by Python's zipfile (deflated and stored entries,
 *    no data descriptors, an archive comment) is read by tz_read with the
 *    offsets, sizes, CRCs and methods Python reports.
 * Skips (77) without Python; the torch part is skipped without torch. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/torchzip.h"
#include "testutil.h"

static const char *python;
static char tmpdir[] = "/tmp/t_torchzip_python.XXXXXX";

static int mem_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct ck_buf *b = ctx;

	if (off > b->len || len > b->len - off)
		return -EIO;
	memcpy(buf, b->data + off, len);
	return 0;
}

struct copy_ctx {
	FILE *f;
	const uint8_t *src;
	const struct tz_archive *ar;
};

static int copy_emit(void *ctx, long record, const void *bytes, uint64_t len)
{
	struct copy_ctx *c = ctx;
	const void *p = record < 0 ? bytes : c->src + c->ar->entries[record].data_offset;

	return fwrite(p, 1, len, c->f) == len ? 0 : -EIO;
}

static void tz_write_for_python(const char *fixtures)
{
	char src[4096], dst[4200], cmd[9000];
	struct ck_buf out = CK_BUF_INIT;
	struct tz_archive ar;
	struct ck_error err = { "" };
	struct tz_record *recs = NULL;
	struct ck_buf file = CK_BUF_INIT;
	struct copy_ctx c;
	int rc;

	snprintf(src, sizeof(src), "%s/torch2x/burn_reader_checkpoint.pt", fixtures);
	snprintf(dst, sizeof(dst), "%s/rewritten.pt", tmpdir);
	file.data = read_file(src, &file.len);
	if (!file.data) {
		CHECK(0, "cannot read %s", src);
		return;
	}
	if (tz_read(mem_pread, &file, file.len, &ar, &err)) {
		CHECK(0, "%s: %s", src, err.msg);
		goto out;
	}
	/* The same records under another root (PyTorch readers take any root);
	 * CRCs computed here, not copied from the directory. */
	recs = calloc(ar.n, sizeof(*recs));
	if (!recs)
		goto out;
	for (size_t i = 0; i < ar.n; i++) {
		const struct tz_entry *e = &ar.entries[i];

		recs[i].name = e->name;
		recs[i].size = e->size;
		recs[i].crc32 = ck_crc32(0, file.data + e->data_offset, e->size);
	}
	c.f = fopen(dst, "wb");
	c.src = file.data;
	c.ar = &ar;
	if (!c.f) {
		CHECK(0, "cannot create %s", dst);
		goto out;
	}
	rc = tz_write("ckptfs_made_this", recs, ar.n, 64, copy_emit, &c);
	CHECK(fclose(c.f) == 0 && rc == 0, "writing %s", dst);

	snprintf(cmd, sizeof(cmd), "'%s' -m zipfile -t '%s' 2>&1", python, dst);
	rc = run_command(cmd, &out);
	CHECK(rc == 0, "python -m zipfile -t: status %d: %s", rc, out.data);
	ck_buf_free(&out);

	snprintf(cmd, sizeof(cmd),
		 "'%s' -c 'import sys\n"
		 "try:\n"
		 "    import torch\n"
		 "except ImportError:\n"
		 "    print(\"no torch\"); sys.exit(0)\n"
		 "a = torch.load(sys.argv[1]); b = torch.load(sys.argv[2])\n"
		 "def eq(x, y):\n"
		 "    if isinstance(x, torch.Tensor):\n"
		 "        return isinstance(y, torch.Tensor) and x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)\n"
		 "    if isinstance(x, dict):\n"
		 "        return type(x) == type(y) and list(x) == list(y) and all(eq(x[k], y[k]) for k in x)\n"
		 "    if isinstance(x, (list, tuple)):\n"
		 "        return type(x) == type(y) and len(x) == len(y) and all(eq(p, q) for p, q in zip(x, y))\n"
		 "    return x == y\n"
		 "print(\"equal\" if eq(a, b) else \"DIFFERENT: %%r %%r\" %% (a, b))' '%s' '%s' 2>&1",
		 python, src, dst);
	rc = run_command(cmd, &out);
	if (rc == 0 && !strcmp((char *)out.data, "no torch\n"))
		test_skip("%s has no torch: no torch.load", python);
	else
		CHECK(rc == 0 && !strcmp((char *)out.data, "equal\n"), "torch.load: status %d: %s", rc, out.data);
	ck_buf_free(&out);
out:
	free(recs);
	tz_archive_free(&ar);
	ck_buf_free(&file);
}

/* Python-written archive: "name method header_offset data_offset csize size crc" per entry. */
static void python_zip_for_tz_read(void)
{
	char path[4200], cmd[6000];
	struct ck_buf out = CK_BUF_INIT, file = CK_BUF_INIT;
	struct tz_archive ar;
	struct ck_error err = { "" };
	char *line, *save = NULL;
	size_t i = 0;
	int rc;

	snprintf(path, sizeof(path), "%s/python.zip", tmpdir);
	snprintf(cmd, sizeof(cmd),
		 "'%s' -c 'import sys, struct, zipfile\n"
		 "with zipfile.ZipFile(sys.argv[1], \"w\") as z:\n"
		 "    z.writestr(\"model/data.pkl\", b\"\\x80\\x02}q\\x00.\")\n"
		 "    z.writestr(zipfile.ZipInfo(\"model/data/0\"), bytes(range(256)) * 40, compress_type=zipfile.ZIP_DEFLATED)\n"
		 "    z.writestr(\"model/empty\", b\"\")\n"
		 "    z.writestr(\"model/version\", b\"3\\n\")\n"
		 "    z.comment = b\"made by Python\\x27s zipfile\"\n"
		 "f = open(sys.argv[1], \"rb\").read()\n"
		 "for i in zipfile.ZipFile(sys.argv[1]).infolist():\n"
		 "    n, m = struct.unpack(\"<HH\", f[i.header_offset + 26:i.header_offset + 30])\n"
		 "    print(i.filename, i.compress_type, i.header_offset, i.header_offset + 30 + n + m,\n"
		 "          i.compress_size, i.file_size, i.CRC)' '%s' 2>&1",
		 python, path);
	rc = run_command(cmd, &out);
	if (rc != 0) {
		CHECK(0, "python zipfile: status %d: %s", rc, out.data);
		goto out;
	}
	file.data = read_file(path, &file.len);
	if (!file.data || tz_read(mem_pread, &file, file.len, &ar, &err)) {
		CHECK(0, "tz_read of a Python zip: %s", err.msg);
		goto out;
	}
	CHECK(!strcmp(ar.root, "model") && ar.n == 4, "root '%s', %zu entries", ar.root, ar.n);
	for (line = strtok_r((char *)out.data, "\n", &save); line && i < ar.n; line = strtok_r(NULL, "\n", &save), i++) {
		const struct tz_entry *e = &ar.entries[i];
		char want[512];

		snprintf(want, sizeof(want), "model/%s %u %llu %llu %llu %llu %u", e->name, e->method,
			 (unsigned long long)e->lho, (unsigned long long)e->data_offset, (unsigned long long)e->csize,
			 (unsigned long long)e->size, e->crc32);
		CHECK(!strcmp(line, want), "Python sees '%s', tz_read '%s'", line, want);
	}
	CHECK(i == 4, "Python listed %zu entries", i);
	CHECK(tz_find(&ar, "data/0") && tz_find(&ar, "data/0")->method == 8, "deflated entry not reported as such");
	tz_archive_free(&ar);
out:
	ck_buf_free(&out);
	ck_buf_free(&file);
}

int main(void)
{
	const char *fixtures = test_fixtures();
	char cmd[4200];

	python = test_python();
	if (access(python, X_OK)) {
		printf("SKIP: no Python at %s\n", python);
		return 77;
	}
	if (!mkdtemp(tmpdir))
		return 99;
	if (fixtures)
		tz_write_for_python(fixtures);
	else
		test_skip("CKPT_FIXTURES unset: no torch.load of the fixtures");
	python_zip_for_tz_read();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "note: could not remove %s\n", tmpdir);
	return test_result();
}
