/* Checkpoint manifests (src/store/manifest.c, manifest_file.c): a manifest
 * with every kind of field and awkward strings survives write -> parse ->
 * write byte for byte; every truncation and every single bit flip is a
 * checksum error; text with a valid checksum but outside the grammar is
 * refused with its line; the writer refuses what the parser would; file
 * names stay within NAME_MAX; and storing a manifest is atomic with a
 * working rollback. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ingest/ingester.h"
#include "store/manifest.h"
#include "testutil.h"

static char *xstrdup(const char *s)
{
	char *p = strdup(s);

	SETUP(p);
	return p;
}

static void add_storage(struct ck_ingest *f, const char *key, uint64_t off, uint64_t len, uint64_t hi, uint64_t lo)
{
	SETUP(ck_ingest_add_storage(f, key, off, len) == 0);
	f->st[f->nst - 1].hash_hi = hi;
	f->st[f->nst - 1].hash_lo = lo;
}

static void file_init(struct ck_ingest *f, const char *relpath, enum ck_file_kind kind, const char *physical)
{
	memset(f, 0, sizeof(*f));
	f->info.relpath = xstrdup(relpath);
	f->info.src_path = xstrdup(physical);
	f->info.kind = kind;
	f->info.dev = 2049;
	f->info.ino = UINT64_MAX;
	f->info.size = 12345;
	f->info.mtime_ns = -1;
	f->info.has_owner = 1;
	f->info.owner.uid = UINT32_MAX;
	f->info.owner.gid = 0;
	f->info.owner.mode = 07640;
}

/* A checkpoint with one file of each kind, every dtype, 0 and 16
 * dimensions, extreme numbers and strings that need every escape. */
static void sample(struct ck_manifest *m)
{
	static const uint64_t shape16[CK_MAX_DIMS] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, UINT64_MAX };
	struct ck_ingest *f;
	int dt;

	memset(m, 0, sizeof(*m));
	m->ckpt.series = xstrdup("run \"1\" \\ é");
	m->ckpt.name = xstrdup("checkpoint-20");
	m->ckpt.step = INT64_MIN;
	m->ckpt.src_path = xstrdup("/data/run 1/checkpoint-20\n\t\x7f");
	m->imported_ns = INT64_MAX;
	m->pattern = xstrdup("^checkpoint-([0-9]+)$");
	m->series_created_ns = 0;
	m->nfiles = 4;
	m->files = calloc(m->nfiles, sizeof(*m->files));
	SETUP(m->files);

	f = &m->files[0];
	file_init(f, "a.pt", CK_FILE_TORCH, "/data/a.pt");
	add_storage(f, "0", 64, 128, UINT64_MAX, 0);
	add_storage(f, "", 0, 0, 0x0123456789abcdefULL, 0xfedcba9876543210ULL);
	for (dt = 0; dt < CK_DT__COUNT; dt++) {
		char name[32];

		snprintf(name, sizeof(name), "model.t%d.weight", dt);
		SETUP(ck_ingest_add_tensor(f, name, dt % 2 ? "layers.1" : "", (enum ck_dtype)dt, dt % 3,
					   shape16, "0", (uint64_t)dt) == 0);
	}
	SETUP(ck_ingest_add_tensor(f, "", "other", CK_DT_F32, 0, shape16, "", UINT64_MAX) == 0);
	SETUP(ck_ingest_add_tensor(f, "deep", "other", CK_DT_BF16, CK_MAX_DIMS, shape16, "0", 0) == 0);

	f = &m->files[1];
	file_init(f, "b/c d.safetensors", CK_FILE_SAFETENSORS, "/data/b/c d.safetensors");
	add_storage(f, "w\"q\"", 8, 16, 1, 2);
	SETUP(ck_ingest_add_tensor(f, "w\"q\"", "head", CK_DT_F16, 2, shape16, "w\"q\"", 0) == 0);

	f = &m->files[2];
	file_init(f, "bad.pt", CK_FILE_BAD, "/data/bad.pt");
	f->info.error = xstrdup("legacy \x01 format \\ \xc3\xa9");

	f = &m->files[3];
	file_init(f, "z/y/x.json", CK_FILE_SAFETENSORS_INDEX, "/data/z/y/x.json");
	f->info.error = xstrdup("");
}

static int same_str(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/* Everything but ids, which manifests do not hold. */
static int same_manifest(const struct ck_manifest *a, const struct ck_manifest *b)
{
	size_t i, j;

	if (!same_str(a->ckpt.series, b->ckpt.series) || !same_str(a->ckpt.name, b->ckpt.name) ||
	    a->ckpt.step != b->ckpt.step || a->ckpt.is_file != b->ckpt.is_file ||
	    !same_str(a->ckpt.src_path, b->ckpt.src_path) || a->imported_ns != b->imported_ns ||
	    !same_str(a->pattern, b->pattern) || a->series_created_ns != b->series_created_ns ||
	    a->nfiles != b->nfiles)
		return 0;
	for (i = 0; i < a->nfiles; i++) {
		const struct ck_ingest *x = &a->files[i], *y = &b->files[i];

		if (!same_str(x->info.relpath, y->info.relpath) || x->info.kind != y->info.kind ||
		    !same_str(x->info.src_path, y->info.src_path) || x->info.dev != y->info.dev ||
		    x->info.ino != y->info.ino || x->info.size != y->info.size ||
		    x->info.mtime_ns != y->info.mtime_ns || x->info.ntensors != y->info.ntensors ||
		    x->info.has_owner != y->info.has_owner || x->info.owner.uid != y->info.owner.uid ||
		    x->info.owner.gid != y->info.owner.gid || x->info.owner.mode != y->info.owner.mode ||
		    !same_str(x->info.error, y->info.error) || !same_str(x->info.target, y->info.target) ||
		    x->nst != y->nst || x->nt != y->nt)
			return 0;
		for (j = 0; j < x->nst; j++) {
			if (!same_str(x->st[j].key, y->st[j].key) || x->st[j].offset != y->st[j].offset ||
			    x->st[j].length != y->st[j].length || x->st[j].hash_lo != y->st[j].hash_lo ||
			    x->st[j].hash_hi != y->st[j].hash_hi)
				return 0;
		}
		for (j = 0; j < x->nt; j++) {
			const struct ck_tensor_info *s = &x->t[j], *t = &y->t[j];

			if (!same_str(s->name, t->name) || !same_str(s->layer, t->layer) || s->dtype != t->dtype ||
			    s->ndim != t->ndim || memcmp(s->shape, t->shape, sizeof(s->shape[0]) * (size_t)s->ndim) ||
			    !same_str(s->storage_key, t->storage_key) || s->storage_offset != t->storage_offset)
				return 0;
		}
	}
	return 1;
}

static void round_trip(const struct ck_manifest *m, struct ck_buf *text)
{
	struct ck_error err = { { 0 } };
	struct ck_buf again = CK_BUF_INIT;
	struct ck_manifest back;
	int rc;

	rc = ck_manifest_write(text, m, &err);
	CHECK(rc == 0, "write: %d %s", rc, err.msg);
	CHECK(text->len && text->data[text->len - 1] == '\n', "manifest does not end with a newline");
	for (size_t i = 0; i < text->len; i++)
		CHECK((text->data[i] >= 0x20 && text->data[i] < 0x7f) || text->data[i] == '\n',
		      "byte 0x%02x at %zu is not printable ASCII", text->data[i], i);
	rc = ck_manifest_parse((const char *)text->data, text->len, &back, &err);
	CHECK(rc == 0, "parse of what was written: %d %s", rc, err.msg);
	if (rc)
		return;
	CHECK(same_manifest(m, &back), "parsed manifest differs from the written one");
	CHECK(ck_manifest_write(&again, &back, &err) == 0 && again.len == text->len &&
	      !memcmp(again.data, text->data, text->len), "write(parse(text)) != text");
	ck_manifest_clear(&back);
	ck_buf_free(&again);
}

static void truncations_and_flips(const struct ck_buf *text)
{
	struct ck_error err;
	struct ck_manifest m;
	char *copy = malloc(text->len);
	size_t i, bad = 0;
	int bit, rc;

	SETUP(copy);
	for (i = 0; i < text->len; i++) {
		err.msg[0] = '\0';
		rc = ck_manifest_parse((const char *)text->data, i, &m, &err);
		if (rc != -EBADMSG || !strstr(err.msg, "checksum")) {
			if (!bad++)
				test_fail(__FILE__, __LINE__, "truncated to %zu bytes: %d %s", i, rc, err.msg);
			if (rc == 0)
				ck_manifest_clear(&m);
		}
	}
	CHECK(!bad, "%zu of %zu truncations not reported as a checksum error", bad, text->len);
	bad = 0;
	memcpy(copy, text->data, text->len);
	for (i = 0; i < text->len; i++) {
		for (bit = 0; bit < 8; bit++) {
			copy[i] ^= (char)(1 << bit);
			err.msg[0] = '\0';
			rc = ck_manifest_parse(copy, text->len, &m, &err);
			if (rc != -EBADMSG || !strstr(err.msg, "checksum")) {
				if (!bad++)
					test_fail(__FILE__, __LINE__, "bit %d of byte %zu flipped: %d %s", bit, i, rc,
						  err.msg);
				if (rc == 0)
					ck_manifest_clear(&m);
			}
			copy[i] ^= (char)(1 << bit);
		}
	}
	CHECK(!bad, "%zu of %zu bit flips not reported as a checksum error", bad, text->len * 8);
	free(copy);
}

/* The body of text (without its checksum line) with `from` replaced by
 * `to` (first occurrence), and a checksum line that matches. */
static char *edited(const struct ck_buf *text, const char *from, const char *to, size_t *len)
{
	size_t body = text->len - (sizeof("checksum xxh3-128=") - 1 + 32 + 1);
	const char *at = memmem(text->data, body, from, strlen(from));
	size_t n, pre;
	XXH128_hash_t h;
	char *out;

	SETUP(at);
	pre = (size_t)(at - (const char *)text->data);
	n = body - strlen(from) + strlen(to);
	out = malloc(n + 64);
	SETUP(out);
	memcpy(out, text->data, pre);
	memcpy(out + pre, to, strlen(to));
	memcpy(out + pre + strlen(to), at + strlen(from), body - pre - strlen(from));
	h = XXH3_128bits(out, n);
	n += (size_t)sprintf(out + n, "checksum xxh3-128=%016" PRIx64 "%016" PRIx64 "\n", h.high64, h.low64);
	*len = n;
	return out;
}

static void expect_refused(const struct ck_buf *text, const char *from, const char *to, int want, const char *why)
{
	struct ck_error err = { { 0 } };
	struct ck_manifest m;
	size_t len;
	char *t = edited(text, from, to, &len);
	int rc = ck_manifest_parse(t, len, &m, &err);

	CHECK(rc == want, "%s: parse returned %d (%s), expected %d", why, rc, err.msg, want);
	CHECK(rc == 0 || err.msg[0], "%s: no reason given", why);
	if (rc == 0)
		ck_manifest_clear(&m);
	free(t);
}

static void strictness(const struct ck_buf *text)
{
	struct ck_error err = { { 0 } };
	struct ck_manifest m;
	size_t len;
	char *t;

	/* The helper itself: an edit that changes nothing parses. */
	t = edited(text, "step=", "step=", &len);
	CHECK(ck_manifest_parse(t, len, &m, &err) == 0, "re-checksummed original: %s", err.msg);
	ck_manifest_clear(&m);
	free(t);

	expect_refused(text, "ckptfs-manifest 3", "ckptfs-manifest 5", -EPROTONOSUPPORT, "future version");
	expect_refused(text, "ckptfs-manifest 3", "ckptfs-manifest 0", -EPROTONOSUPPORT, "version 0");
	expect_refused(text, "ckptfs-manifest 3", "ckptfs-manifesto 3", -EINVAL, "not a manifest");
	expect_refused(text, "ckptfs-manifest 3", "ckptfs-manifest 1", -EINVAL, "owners in a version 1 manifest");
	expect_refused(text, " uid=4294967295", "", -EINVAL, "version 2 without an owner");
	expect_refused(text, "uid=4294967295", "uid=4294967296", -EINVAL, "uid over u32");
	expect_refused(text, "mode=7640", "mode=640", -EINVAL, "mode of three digits");
	expect_refused(text, "mode=7640", "mode=7680", -EINVAL, "mode with an 8");
	expect_refused(text, "mode=7640", "mode=17640", -EINVAL, "mode of five digits");
	expect_refused(text, "size=12345", "size=012345", -EINVAL, "leading zero");
	expect_refused(text, "created-ns=0", "created-ns=-0", -EINVAL, "-0");
	expect_refused(text, "dev=2049", "dev=18446744073709551616", -EINVAL, "u64 overflow");
	expect_refused(text, "imported-ns=9223372036854775807", "imported-ns=9223372036854775808", -EINVAL,
		       "i64 overflow");
	expect_refused(text, "step=-9223372036854775808", "step=-9223372036854775809", -EINVAL, "i64 underflow");
	expect_refused(text, "name=\"checkpoint-20\"", "name=\"\\x63heckpoint-20\"", -EINVAL, "needless escape");
	expect_refused(text, "\\x7f", "\\x7F", -EINVAL, "uppercase hex escape");
	expect_refused(text, "\\x7f", "\\n", -EINVAL, "C escape");
	expect_refused(text, "\\x7f", "\\x00", -EINVAL, "NUL byte");
	expect_refused(text, "\\x7f", "\x80", -EINVAL, "raw non-ASCII byte");
	expect_refused(text, "checkpoint-20\"", "checkpoint-20", -EINVAL, "unterminated string");
	expect_refused(text, "files=4", "files=5", -EINVAL, "more files announced");
	expect_refused(text, "files=4", "files=3", -EINVAL, "fewer files announced");
	expect_refused(text, "storages=2", "storages=3", -EINVAL, "more storages announced");
	expect_refused(text, "storages=2", "storages=1", -EINVAL, "fewer storages announced");
	expect_refused(text, "storages=2", "storages=4294967296", -E2BIG, "storage count over u32");
	expect_refused(text, "dtype=float32", "dtype=float33", -EINVAL, "unknown dtype");
	expect_refused(text, "kind=torch", "kind=pickle", -EINVAL, "unknown kind");
	expect_refused(text, "single-file=no", "single-file=yes", -EINVAL, "single file with four files");
	expect_refused(text, "single-file=no", "single-file=maybe", -EINVAL, "bad boolean");
	expect_refused(text, "path=\"a.pt\"", "path=\"../a.pt\"", -EINVAL, "relpath with ..");
	expect_refused(text, "path=\"b/c d", "path=\"b//c d", -EINVAL, "relpath with //");
	expect_refused(text, "path=\"a.pt\"", "path=\"/a.pt\"", -EINVAL, "absolute relpath");
	expect_refused(text, "path=\"a.pt\"", "path=\"c.pt\"", -EINVAL, "files out of order");
	expect_refused(text, "path=\"bad.pt\"", "path=\"b/c d.safetensors\"", -EINVAL, "repeated file");
	/* Version 3 records paths inside the store relative to it; versions 1 and 2 only absolute ones. */
	expect_refused(text, "physical=\"/data/a.pt\"", "physical=\"data/a.pt\"", 0, "store-relative physical");
	expect_refused(text, "source=\"/data", "source=\"data", 0, "store-relative source");
	expect_refused(text, "physical=\"/data/a.pt\"", "physical=\"../a.pt\"", -EINVAL, "physical outside the store");
	expect_refused(text, "physical=\"/data/a.pt\"", "physical=\"data//a.pt\"", -EINVAL, "physical with //");
	expect_refused(text, "source=\"/data", "source=\"./data", -EINVAL, "source with .");
	{
		char *v1 = edited(text, "ckptfs-manifest 3", "ckptfs-manifest 2", &len);
		struct ck_buf b1 = { .data = (uint8_t *)v1, .len = len };
		struct ck_manifest old;

		CHECK(ck_manifest_parse(v1, len, &old, &err) == 0 && old.version == 2, "version 2: %s", err.msg);
		if (old.version == 2) {
			struct ck_buf again = CK_BUF_INIT;

			CHECK(ck_manifest_write(&again, &old, &err) == 0 && again.len == len &&
			      !memcmp(again.data, v1, len), "a version 2 manifest is not written back as it was");
			ck_buf_free(&again);
			ck_manifest_clear(&old);
		}
		expect_refused(&b1, "physical=\"/data/a.pt\"", "physical=\"data/a.pt\"", -EINVAL,
			       "relative physical in version 2");
		expect_refused(&b1, "source=\"/data", "source=\"data", -EINVAL, "relative source in version 2");
		free(v1);
	}
	expect_refused(text, "series name=\"run", "series name=\"a/run", -EINVAL, "series with a slash");
	expect_refused(text, "name=\"checkpoint-20\"", "name=\"..\"", -EINVAL, "checkpoint named ..");
	expect_refused(text, "name=\"checkpoint-20\"", "name=\"\"", -EINVAL, "empty checkpoint name");
	expect_refused(text, "shape=[]", "shape=[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]", -EINVAL, "17 dims");
	expect_refused(text, "shape=[]", "shape=[1,]", -EINVAL, "trailing comma");
	expect_refused(text, "shape=[]", "shape=[ ]", -EINVAL, "blank in shape");
	expect_refused(text, " kind=", "  kind=", -EINVAL, "double blank");
	expect_refused(text, "error=none\n", "error=none\r\n", -EINVAL, "CR");
	expect_refused(text, "error=none\n", "error=none \n", -EINVAL, "trailing blank");
	expect_refused(text, "error=none\n", "error=none\nextra\n", -EINVAL, "unknown line");
	expect_refused(text, "xxh3-128=0123456789abcdef", "xxh3-128=0123456789ABCDEF", -EINVAL, "uppercase hash");
	expect_refused(text, "pattern=\"", "pattern=none \"", -EINVAL, "none and a string");
	expect_refused(text, "ckptfs-manifest 3\n", "", -EINVAL, "no header line");

	/* Nothing but a valid checksum line, and an empty text. */
	{
		XXH128_hash_t h = XXH3_128bits("", 0);
		char only[64];

		snprintf(only, sizeof(only), "checksum xxh3-128=%016" PRIx64 "%016" PRIx64 "\n", h.high64, h.low64);
		CHECK(ck_manifest_parse(only, strlen(only), &m, &err) == -EINVAL, "checksum line alone: %s", err.msg);
	}
	CHECK(ck_manifest_parse("", 0, &m, &err) == -EBADMSG, "empty text");
}

static void writer_refusals(void)
{
	struct ck_error err = { { 0 } };
	struct ck_buf b = CK_BUF_INIT;
	struct ck_manifest m;
	char *keep;

	sample(&m);
	SETUP(ck_buf_puts(&b, "prefix") == 0);
	keep = m.ckpt.series;
	m.ckpt.series = "a/b";
	CHECK(ck_manifest_write(&b, &m, &err) == -EINVAL && b.len == 6, "series with a slash written");
	m.ckpt.series = keep;
	m.ckpt.is_file = 1;
	CHECK(ck_manifest_write(&b, &m, &err) == -EINVAL && strstr(err.msg, "single-file"),
	      "single-file checkpoint with four files written: %s", err.msg);
	m.ckpt.is_file = 0;
	keep = m.files[1].info.relpath;
	m.files[1].info.relpath = "a.pt";
	CHECK(ck_manifest_write(&b, &m, &err) == -EINVAL, "repeated relpath written");
	m.files[1].info.relpath = keep;
	m.files[0].t[0].ndim = CK_MAX_DIMS + 1;
	CHECK(ck_manifest_write(&b, &m, &err) == -EINVAL, "17 dimensions written");
	m.files[0].t[0].ndim = 0;
	m.files[2].info.has_owner = 0;
	CHECK(ck_manifest_write(&b, &m, &err) == -EINVAL && strstr(err.msg, "owner"),
	      "owners of some files only written: %s", err.msg);
	m.files[2].info.has_owner = 1;
	CHECK(ck_manifest_write(&b, &m, &err) == 0 && b.len > 6, "valid manifest refused: %s", err.msg);
	ck_manifest_clear(&m);
	ck_buf_free(&b);
}

/* A store imported before owners were recorded keeps its manifests: they
 * read as version 1 and write back the same. */
static void without_owners(void)
{
	struct ck_buf text = CK_BUF_INIT;
	struct ck_manifest m;

	sample(&m);
	for (size_t i = 0; i < m.nfiles; i++) {
		memset(&m.files[i].info.owner, 0, sizeof(m.files[i].info.owner));
		m.files[i].info.has_owner = 0;
	}
	round_trip(&m, &text);
	CHECK(text.len > 18 && !memcmp(text.data, "ckptfs-manifest 1\n", 18), "no owners: not written as version 1");
	CHECK(!memmem(text.data, text.len, " uid=", 5), "version 1 manifest with an owner");
	ck_manifest_clear(&m);
	ck_buf_free(&text);
}

static void single_file(void)
{
	struct ck_buf text = CK_BUF_INIT;
	struct ck_manifest m = { 0 };

	m.ckpt.series = xstrdup("files");
	m.ckpt.name = xstrdup("model_000500.pt");
	m.ckpt.step = 500;
	m.ckpt.is_file = 1;
	m.ckpt.src_path = xstrdup("/runs/model_000500.pt");
	m.nfiles = 1;
	m.files = calloc(1, sizeof(*m.files));
	SETUP(m.files);
	file_init(&m.files[0], "", CK_FILE_OTHER, "/runs/model_000500.pt");
	round_trip(&m, &text);
	ck_manifest_clear(&m);
	ck_buf_free(&text);
}

static void paths(void)
{
	char longname[301], tilde[] = "ckpt~1";
	char *a, *b, *c, *d;

	memset(longname, 'x', 300);
	longname[300] = '\0';
	a = ck_manifest_path("/s", "run", "checkpoint-5");
	b = ck_manifest_path("/s", "run", longname);
	longname[299] = 'y';
	c = ck_manifest_path("/s", "run", longname);
	d = ck_manifest_path("/s", "run", tilde);
	SETUP(a && b && c && d);
	CHECK(!strcmp(a, "/s/manifests/run/checkpoint-5.manifest"), "path: %s", a);
	CHECK(strlen(strrchr(b, '/') + 1) < 200 && strchr(b, '~'), "long name: %s", b);
	CHECK(strcmp(b, c) != 0, "two long names share a manifest: %s", b);
	CHECK(strcmp(d, "/s/manifests/run/ckpt~1.manifest") != 0 && strchr(strrchr(d, '/'), '~'),
	      "a name with '~' kept as is: %s", d);
	free(a);
	free(b);
	free(c);
	free(d);
}

static void store_and_rollback(void)
{
	struct ck_error err = { { 0 } };
	struct ck_manifest_txn tx;
	struct ck_manifest m, back;
	char dir[256], *path, cmd[600];
	struct stat sb;
	int rc;

	snprintf(dir, sizeof(dir), "%s/t_manifest.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(dir));
	sample(&m);
	path = ck_manifest_path(dir, m.ckpt.series, m.ckpt.name);
	SETUP(path);
	/* A new manifest, rolled back: gone. */
	CHECK(ck_manifest_store(dir, &m, &tx, &err) == 0, "store: %s", err.msg);
	CHECK(stat(path, &sb) == 0, "no manifest at %s", path);
	ck_manifest_store_rollback(&tx);
	CHECK(stat(path, &sb) < 0 && errno == ENOENT, "rolled back new manifest still there");
	/* Committed: there, and loads back. */
	CHECK(ck_manifest_store(dir, &m, &tx, &err) == 0, "store: %s", err.msg);
	ck_manifest_store_commit(&tx);
	rc = ck_manifest_load(NULL, path, &back, &err);
	CHECK(rc == 0 && same_manifest(&m, &back), "load: %d %s", rc, err.msg);
	if (rc == 0)
		ck_manifest_clear(&back);
	/* A replacement rolled back: the previous one is back. */
	m.ckpt.step = 7;
	CHECK(ck_manifest_store(dir, &m, &tx, &err) == 0, "store: %s", err.msg);
	rc = ck_manifest_load(NULL, path, &back, &err);
	CHECK(rc == 0 && back.ckpt.step == 7, "replacement not in place: %d %s", rc, err.msg);
	if (rc == 0)
		ck_manifest_clear(&back);
	ck_manifest_store_rollback(&tx);
	rc = ck_manifest_load(NULL, path, &back, &err);
	CHECK(rc == 0 && back.ckpt.step == INT64_MIN, "rollback did not restore the previous manifest: %d %s", rc,
	      err.msg);
	if (rc == 0)
		ck_manifest_clear(&back);
	/* Loading refuses what is not a regular manifest file. */
	*strrchr(path, '/') = '\0';
	CHECK(ck_manifest_load(NULL, path, &back, &err) == -EINVAL, "loaded a directory");
	ck_manifest_clear(&m);
	free(path);
	/* Only the manifest is left: no temporary or backup file. */
	snprintf(cmd, sizeof(cmd), "test $(find '%s' -type f | wc -l) = 1", dir);
	CHECK(system(cmd) == 0, "leftover files in %s", dir);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "cannot remove %s", dir);
}

/* Version 4: a symbolic link with its target and an empty directory, which
 * only version 4 holds; a version 3 manifest naming either is refused, and
 * so is a target on anything but a link. */
static void links_and_dirs(void)
{
	struct ck_buf text = CK_BUF_INIT;
	struct ck_manifest m;
	struct ck_ingest *f;

	sample(&m);
	f = realloc(m.files, (m.nfiles + 2) * sizeof(*m.files));
	SETUP(f);
	m.files = f;
	memmove(&m.files[2], &m.files[0], m.nfiles * sizeof(*m.files));   /* paths stay in order */
	m.nfiles += 2;
	file_init(&m.files[0], "\"last\" link", CK_FILE_SYMLINK, "/data/last");
	m.files[0].info.target = xstrdup("../checkpoint-10/a.pt\n\x7f");
	file_init(&m.files[1], "a.empty", CK_FILE_DIR, "/data/a.empty");
	round_trip(&m, &text);
	CHECK(text.len && !strncmp((const char *)text.data, "ckptfs-manifest 4\n", 18), "not written as version 4");
	CHECK(text.len && strstr((const char *)text.data, " kind=symlink ") &&
	      strstr((const char *)text.data, " target=\"../checkpoint-10/a.pt\\x0a\\x7f\"\n"), "no target field");
	expect_refused(&text, "ckptfs-manifest 4", "ckptfs-manifest 3", -EINVAL, "a link in version 3");
	expect_refused(&text, " kind=symlink ", " kind=other ", -EINVAL, "a target on a plain file");
	expect_refused(&text, " kind=dir ", " kind=symlink ", -EINVAL, "a link without a target");
	ck_buf_free(&text);
	ck_manifest_clear(&m);
}

int main(void)
{
	struct ck_buf text = CK_BUF_INIT;
	struct ck_manifest m;

	sample(&m);
	round_trip(&m, &text);
	ck_manifest_clear(&m);
	if (text.len) {
		printf("sample manifest: %zu bytes\n", text.len);
		truncations_and_flips(&text);
		strictness(&text);
	}
	ck_buf_free(&text);
	writer_refusals();
	without_owners();
	single_file();
	paths();
	store_and_rollback();
	links_and_dirs();
	return test_result();
}
