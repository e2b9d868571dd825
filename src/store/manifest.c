/* Manifest text: writer and strict parser (docs/format.md, "Manifests").
 *
 *   ckptfs-manifest 2
 *   series name="run1" pattern=none created-ns=1712...
 *   checkpoint name="checkpoint-20" step=20 single-file=no imported-ns=1712... source="/data/run1/checkpoint-20" files=2
 *   file path="model.pt" kind=torch physical="/data/..." dev=2049 ino=77 size=4567 mtime-ns=1712... uid=1000 gid=1000 mode=0640 storages=1 tensors=1 error=none
 *   storage key="0" offset=1024 length=256 xxh3-128=<32 hex digits>
 *   tensor name="lm_head.weight" layer="head" dtype=float32 shape=[8,8] storage="0" offset=0
 *   ...
 *   checksum xxh3-128=<32 hex digits: XXH3-128 of every byte before this line>
 *
 * The text has one spelling for each manifest: fields in a fixed order,
 * single spaces, numbers without leading zeros, strings quoted with only
 * the escapes \" \\ and \xHH (lowercase) for bytes outside ' '..'~'.  The
 * parser accepts nothing else, so parse(write(m)) == m and
 * write(parse(text)) == text, which the fuzz target checks.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "ckptfs/buf.h"
#include "index.h"
#include "manifest.h"

#define MAGIC "ckptfs-manifest "
#define CSUM_PREFIX "checksum xxh3-128="
#define HEX128_LEN 32
#define CSUM_LINE_LEN (sizeof(CSUM_PREFIX) - 1 + HEX128_LEN + 1)

/* ---- shared rules ---- */

int ck_manifest_check_name(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > CK_MANIFEST_MAX_NAME || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
		return -EINVAL;
	return 0;
}

/* A path inside a checkpoint directory: "a/b.pt", no empty, "." or ".." part. */
static int check_relpath(const char *p)
{
	const char *part = p;

	if (!*p)
		return -EINVAL;
	for (;;) {
		size_t n = strcspn(part, "/");

		if (n == 0 || (n == 1 && part[0] == '.') || (n == 2 && part[0] == '.' && part[1] == '.'))
			return -EINVAL;
		if (!part[n])
			return 0;
		part += n + 1;
	}
}

static int check_string(const char *s)
{
	return s && strlen(s) <= CK_MANIFEST_MAX_STRING ? 0 : -EINVAL;
}

/* Whether kind needs version 4. */
static int kind_v4(enum ck_file_kind kind)
{
	return kind == CK_FILE_SYMLINK || kind == CK_FILE_DIR;
}

/* The version m is written in: the one it was read in, else 4 when a file
 * needs it, 3, or 1 when its files have no owners recorded. */
static int manifest_version(const struct ck_manifest *m)
{
	if (m->version)
		return m->version;
	if (m->nfiles && !m->files[0].info.has_owner)
		return CK_MANIFEST_VERSION_NO_OWNER;
	for (size_t i = 0; i < m->nfiles; i++)
		if (kind_v4(m->files[i].info.kind))
			return CK_MANIFEST_VERSION;
	return CK_MANIFEST_VERSION_PLAIN;
}

/* A recorded path: absolute, or (version 3 on) relative to the store's
 * root with no empty, "." or ".." part. */
static int check_recorded_path(const struct ck_manifest *m, const char *p)
{
	if (check_string(p))
		return -EINVAL;
	if (p[0] == '/')
		return 0;
	return manifest_version(m) >= 3 ? check_relpath(p) : -EINVAL;
}

/* What every manifest, written or parsed, must satisfy for the index to be
 * rebuilt from it.  0 or -EINVAL with err. */
static int validate(const struct ck_manifest *m, struct ck_error *err)
{
	const struct ck_ckpt_info *c = &m->ckpt;
	size_t i, j;

	if (m->version && (m->version < CK_MANIFEST_OLDEST || m->version > CK_MANIFEST_VERSION))
		return ck_fail(err, EPROTONOSUPPORT, "manifest format %d", m->version);

	if (check_string(c->series) || ck_manifest_check_name(c->series))
		return ck_fail(err, EINVAL, "'%s' cannot name a series", c->series ? c->series : "(null)");
	if (check_string(c->name) || ck_manifest_check_name(c->name))
		return ck_fail(err, EINVAL, "'%s' cannot name a checkpoint", c->name ? c->name : "(null)");
	if (check_recorded_path(m, c->src_path))
		return ck_fail(err, EINVAL, "checkpoint source is not an absolute path%s",
			       manifest_version(m) >= 3 ? " or one inside the store" : "");
	if (m->pattern && check_string(m->pattern))
		return ck_fail(err, EINVAL, "step pattern too long");
	if (m->nfiles > CK_MANIFEST_MAX_FILES)
		return ck_fail(err, E2BIG, "%zu files (at most %u)", m->nfiles, CK_MANIFEST_MAX_FILES);
	for (i = 0; i < m->nfiles; i++) {
		const struct ck_ingest *f = &m->files[i];

		if (check_string(f->info.relpath) || (!c->is_file && check_relpath(f->info.relpath)))
			return ck_fail(err, EINVAL, "file path '%s' is not a path inside a checkpoint",
				       f->info.relpath ? f->info.relpath : "(null)");
		if (i && strcmp(m->files[i - 1].info.relpath, f->info.relpath) >= 0)
			return ck_fail(err, EINVAL, "file '%s' out of order or repeated", f->info.relpath);
		if (check_recorded_path(m, f->info.src_path))
			return ck_fail(err, EINVAL, "file '%s': physical path is not absolute%s", f->info.relpath,
				       manifest_version(m) >= 3 ? " or one inside the store" : "");
		if ((unsigned)f->info.kind > CK_FILE_KIND_LAST ||
		    (kind_v4(f->info.kind) && manifest_version(m) < CK_MANIFEST_VERSION))
			return ck_fail(err, EINVAL, "file '%s': kind %d in a manifest of version %d", f->info.relpath,
				       (int)f->info.kind, manifest_version(m));
		if (f->info.error && check_string(f->info.error))
			return ck_fail(err, EINVAL, "file '%s': error text too long", f->info.relpath);
		if ((f->info.kind == CK_FILE_SYMLINK) != !!f->info.target ||
		    (f->info.target && (check_string(f->info.target) || !f->info.target[0])))
			return ck_fail(err, EINVAL, "file '%s': a link target only and always for a symlink",
				       f->info.relpath);
		if (kind_v4(f->info.kind) && (f->nst || f->nt || f->info.error))
			return ck_fail(err, EINVAL, "file '%s': a %s holds no tensors", f->info.relpath,
				       ck_file_kind_name(f->info.kind));
		if (f->nst > UINT32_MAX || f->nt > UINT32_MAX)
			return ck_fail(err, E2BIG, "file '%s': too many storages or tensors", f->info.relpath);
		for (j = 0; j < f->nst; j++) {
			if (check_string(f->st[j].key))
				return ck_fail(err, EINVAL, "file '%s': storage key too long", f->info.relpath);
		}
		for (j = 0; j < f->nt; j++) {
			const struct ck_tensor_info *t = &f->t[j];

			if (check_string(t->name) || check_string(t->layer) || check_string(t->storage_key))
				return ck_fail(err, EINVAL, "file '%s': tensor string too long", f->info.relpath);
			if ((unsigned)t->dtype >= CK_DT__COUNT || t->ndim < 0 || t->ndim > CK_MAX_DIMS)
				return ck_fail(err, EINVAL, "file '%s': tensor '%s' has no valid dtype or shape",
					       f->info.relpath, t->name);
		}
	}
	for (i = 0; i < m->nfiles; i++)
		if (!m->files[i].info.has_owner != (manifest_version(m) < 2))
			return ck_fail(err, EINVAL, "file '%s': owner recorded for some files only, or in a version "
				       "without owners", m->files[i].info.relpath);
	if (c->is_file && (m->nfiles != 1 || m->files[0].info.relpath[0]))
		return ck_fail(err, EINVAL, "a single-file checkpoint has exactly one file, with an empty path");
	return 0;
}

static const char *dtype_token(enum ck_dtype dt)
{
	return ck_dtype_name(dt);
}

static int dtype_from_token(const char *s, size_t n, enum ck_dtype *out)
{
	int i;

	for (i = 0; i < CK_DT__COUNT; i++) {
		const char *name = dtype_token((enum ck_dtype)i);

		if (strlen(name) == n && memcmp(name, s, n) == 0) {
			*out = (enum ck_dtype)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int kind_from_token(const char *s, size_t n, enum ck_file_kind *out)
{
	int i;

	for (i = 0; i <= CK_FILE_KIND_LAST; i++) {
		const char *name = ck_file_kind_name((enum ck_file_kind)i);

		if (strlen(name) == n && memcmp(name, s, n) == 0) {
			*out = (enum ck_file_kind)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- writer ---- */

struct wr {
	struct ck_buf *b;
	int rc;
};

static void w_raw(struct wr *w, const char *s)
{
	if (!w->rc && ck_buf_puts(w->b, s) < 0)
		w->rc = -ENOMEM;
}

static void w_u64(struct wr *w, uint64_t v)
{
	if (!w->rc && ck_buf_printf(w->b, "%" PRIu64, v) < 0)
		w->rc = -ENOMEM;
}

static void w_i64(struct wr *w, int64_t v)
{
	if (!w->rc && ck_buf_printf(w->b, "%" PRId64, v) < 0)
		w->rc = -ENOMEM;
}

static void w_hex128(struct wr *w, uint64_t hi, uint64_t lo)
{
	if (!w->rc && ck_buf_printf(w->b, "%016" PRIx64 "%016" PRIx64, hi, lo) < 0)
		w->rc = -ENOMEM;
}

static void w_str(struct wr *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;

	if (w->rc || ck_buf_reserve(w->b, strlen(s) + 2) < 0) {
		w->rc = w->rc ? w->rc : -ENOMEM;
		return;
	}
	w_raw(w, "\"");
	for (; *p && !w->rc; p++) {
		char esc[5] = { '\\', (char)*p, 0 };

		if (*p < 0x20 || *p >= 0x7f) {
			esc[1] = 'x';
			esc[2] = hex[*p >> 4];
			esc[3] = hex[*p & 15];
			esc[4] = 0;
		} else if (*p != '"' && *p != '\\') {
			if (ck_buf_putc(w->b, *p) < 0)
				w->rc = -ENOMEM;
			continue;
		}
		w_raw(w, esc);
	}
	w_raw(w, "\"");
}

static void w_opt_str(struct wr *w, const char *s)
{
	if (s)
		w_str(w, s);
	else
		w_raw(w, "none");
}

static void w_file(struct wr *w, const struct ck_ingest *f)
{
	size_t i;
	int d;

	w_raw(w, "file path=");
	w_str(w, f->info.relpath);
	w_raw(w, " kind=");
	w_raw(w, ck_file_kind_name(f->info.kind));
	w_raw(w, " physical=");
	w_str(w, f->info.src_path);
	w_raw(w, " dev=");
	w_u64(w, f->info.dev);
	w_raw(w, " ino=");
	w_u64(w, f->info.ino);
	w_raw(w, " size=");
	w_u64(w, f->info.size);
	w_raw(w, " mtime-ns=");
	w_i64(w, f->info.mtime_ns);
	if (f->info.has_owner) {
		char mode[16];

		w_raw(w, " uid=");
		w_u64(w, f->info.owner.uid);
		w_raw(w, " gid=");
		w_u64(w, f->info.owner.gid);
		snprintf(mode, sizeof(mode), " mode=%04o", f->info.owner.mode & 07777);
		w_raw(w, mode);
	}
	w_raw(w, " storages=");
	w_u64(w, f->nst);
	w_raw(w, " tensors=");
	w_u64(w, f->nt);
	if (f->info.kind == CK_FILE_SYMLINK) {
		w_raw(w, " target=");
		w_str(w, f->info.target);
	} else {
		w_raw(w, " error=");
		w_opt_str(w, f->info.error);
	}
	w_raw(w, "\n");
	for (i = 0; i < f->nst; i++) {
		w_raw(w, "storage key=");
		w_str(w, f->st[i].key);
		w_raw(w, " offset=");
		w_u64(w, f->st[i].offset);
		w_raw(w, " length=");
		w_u64(w, f->st[i].length);
		w_raw(w, " xxh3-128=");
		w_hex128(w, f->st[i].hash_hi, f->st[i].hash_lo);
		w_raw(w, "\n");
	}
	for (i = 0; i < f->nt; i++) {
		const struct ck_tensor_info *t = &f->t[i];

		w_raw(w, "tensor name=");
		w_str(w, t->name);
		w_raw(w, " layer=");
		w_str(w, t->layer);
		w_raw(w, " dtype=");
		w_raw(w, dtype_token(t->dtype));
		w_raw(w, " shape=[");
		for (d = 0; d < t->ndim; d++) {
			if (d)
				w_raw(w, ",");
			w_u64(w, t->shape[d]);
		}
		w_raw(w, "] storage=");
		w_str(w, t->storage_key);
		w_raw(w, " offset=");
		w_u64(w, t->storage_offset);
		w_raw(w, "\n");
	}
}

int ck_manifest_write(struct ck_buf *out, const struct ck_manifest *m, struct ck_error *err)
{
	struct wr w = { .b = out };
	size_t start = out->len, i;
	XXH128_hash_t h;
	int rc;

	rc = validate(m, err);
	if (rc < 0)
		return rc;
	w_raw(&w, MAGIC);
	w_u64(&w, (uint64_t)manifest_version(m));
	w_raw(&w, "\nseries name=");
	w_str(&w, m->ckpt.series);
	w_raw(&w, " pattern=");
	w_opt_str(&w, m->pattern);
	w_raw(&w, " created-ns=");
	w_i64(&w, m->series_created_ns);
	w_raw(&w, "\ncheckpoint name=");
	w_str(&w, m->ckpt.name);
	w_raw(&w, " step=");
	w_i64(&w, m->ckpt.step);
	w_raw(&w, m->ckpt.is_file ? " single-file=yes" : " single-file=no");
	w_raw(&w, " imported-ns=");
	w_i64(&w, m->imported_ns);
	w_raw(&w, " source=");
	w_str(&w, m->ckpt.src_path);
	w_raw(&w, " files=");
	w_u64(&w, m->nfiles);
	w_raw(&w, "\n");
	for (i = 0; i < m->nfiles && !w.rc; i++)
		w_file(&w, &m->files[i]);
	if (!w.rc && out->len - start > CK_MANIFEST_MAX_BYTES - CSUM_LINE_LEN)
		w.rc = ck_fail(err, E2BIG, "manifest of %zu bytes (at most %u)", out->len - start,
			       CK_MANIFEST_MAX_BYTES);
	if (!w.rc) {
		h = XXH3_128bits(out->data + start, out->len - start);
		w_raw(&w, CSUM_PREFIX);
		w_hex128(&w, h.high64, h.low64);
		w_raw(&w, "\n");
	}
	if (w.rc == -ENOMEM)
		ck_fail(err, ENOMEM, "out of memory");
	if (w.rc)
		out->len = start;
	return w.rc;
}

/* ---- parser ---- */

struct cur {
	const char *p, *end;
	const char *line_start;
	size_t line;
	struct ck_error *err;
	int rc;                 /* the first error; every step is a no-op after it */
};

static void fail_at(struct cur *c, int errnum, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail_at(struct cur *c, int errnum, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	if (c->rc)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->rc = ck_fail(c->err, errnum, "line %zu, column %zu: %s", c->line, (size_t)(c->p - c->line_start) + 1,
			msg);
}

static void lit(struct cur *c, const char *s)
{
	size_t n = strlen(s);

	if (c->rc)
		return;
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) {
		fail_at(c, EINVAL, "expected '%s'", s[0] == '\n' ? "end of line" : s);
		return;
	}
	c->p += n;
}

static void eol(struct cur *c)
{
	if (c->rc)
		return;
	if (c->p == c->end || *c->p != '\n') {
		fail_at(c, EINVAL, "expected end of line");
		return;
	}
	c->p++;
	c->line++;
	c->line_start = c->p;
}

/* Digits of a number without sign: "0" or no leading zero, at most UINT64_MAX. */
static void u64(struct cur *c, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = c->p;

	if (c->rc)
		return;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');

		if (v > (UINT64_MAX - d) / 10) {
			fail_at(c, EINVAL, "number out of range");
			return;
		}
		v = v * 10 + d;
		c->p++;
	}
	if (c->p == start) {
		fail_at(c, EINVAL, "expected a number");
		return;
	}
	if (*start == '0' && c->p - start > 1) {
		c->p = start;
		fail_at(c, EINVAL, "number with a leading zero");
		return;
	}
	*out = v;
}

static void i64(struct cur *c, int64_t *out)
{
	const char *start = c->p;
	uint64_t v = 0;
	int neg = 0;

	if (c->rc)
		return;
	if (c->p < c->end && *c->p == '-') {
		neg = 1;
		c->p++;
	}
	u64(c, &v);
	if (c->rc)
		return;
	if (neg ? v == 0 || v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) {
		c->p = start;
		fail_at(c, EINVAL, "%s", v ? "number out of range" : "'-0'");
		return;
	}
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* 32 lowercase hex digits: high 64 bits first, as XXH128's canonical form. */
static void hex128(struct cur *c, uint64_t *hi, uint64_t *lo)
{
	uint64_t v[2] = { 0, 0 };
	int i;

	if (c->rc)
		return;
	if (c->end - c->p < HEX128_LEN) {
		fail_at(c, EINVAL, "expected 32 hex digits");
		return;
	}
	for (i = 0; i < HEX128_LEN; i++) {
		int x = hexval(c->p[i]);

		if (x < 0) {
			c->p += i;
			fail_at(c, EINVAL, "expected 32 lowercase hex digits");
			return;
		}
		v[i / 16] = v[i / 16] << 4 | (uint64_t)x;
	}
	c->p += HEX128_LEN;
	*hi = v[0];
	*lo = v[1];
}

/* A quoted string; *out is a new NUL-terminated copy. */
static void str(struct cur *c, char **out)
{
	const char *q;
	size_t n = 0;
	char *s, *d;

	*out = NULL;
	lit(c, "\"");
	if (c->rc)
		return;
	/* First pass: find the end and check the escapes. */
	for (q = c->p; q < c->end && *q != '"'; n++) {
		if (*q == '\n')
			break;
		if (*q != '\\') {
			q++;
			continue;
		}
		if (c->end - q >= 2 && (q[1] == '"' || q[1] == '\\')) {
			q += 2;
			continue;
		}
		if (c->end - q >= 4 && q[1] == 'x' && hexval(q[2]) >= 0 && hexval(q[3]) >= 0) {
			unsigned byte = (unsigned)(hexval(q[2]) << 4 | hexval(q[3]));

			if (byte == 0) {
				c->p = q;
				fail_at(c, EINVAL, "NUL byte in a string");
				return;
			}
			if (byte >= 0x20 && byte < 0x7f) {
				c->p = q;
				fail_at(c, EINVAL, "needless escape \\x%02x", byte);
				return;
			}
			q += 4;
			continue;
		}
		c->p = q;
		fail_at(c, EINVAL, "bad escape in a string (only \\\" \\\\ \\xHH)");
		return;
	}
	if (q == c->end || *q != '"') {
		c->p = q;
		fail_at(c, EINVAL, "unterminated string");
		return;
	}
	if (n > CK_MANIFEST_MAX_STRING) {
		fail_at(c, E2BIG, "string of %zu bytes (at most %u)", n, CK_MANIFEST_MAX_STRING);
		return;
	}
	s = malloc(n + 1);
	if (!s) {
		c->rc = ck_fail(c->err, ENOMEM, "out of memory");
		return;
	}
	for (d = s; c->p < q; d++) {
		if (*c->p != '\\') {
			*d = *c->p++;
		} else if (c->p[1] == 'x') {
			*d = (char)(hexval(c->p[2]) << 4 | hexval(c->p[3]));
			c->p += 4;
		} else {
			*d = c->p[1];
			c->p += 2;
		}
	}
	*d = '\0';
	c->p = q + 1;
	*out = s;
}

static void opt_str(struct cur *c, char **out)
{
	*out = NULL;
	if (c->rc)
		return;
	if (c->end - c->p >= 4 && memcmp(c->p, "none", 4) == 0)
		c->p += 4;
	else
		str(c, out);
}

/* A bare word up to the next space or end of line. */
static size_t word(struct cur *c, const char **w)
{
	const char *start = c->p;

	*w = start;
	while (c->p < c->end && *c->p != ' ' && *c->p != '\n')
		c->p++;
	return (size_t)(c->p - start);
}

static int grow(void **v, size_t *cap, size_t n, size_t elem)
{
	void *nv;

	if (n < *cap)
		return 0;
	nv = ck_grow(*v, cap, elem, 8);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	return 0;
}

static void parse_storage(struct cur *c, struct ck_ingest *f)
{
	struct ck_storage_info *s;

	if (c->rc)
		return;
	if (grow((void **)&f->st, &f->capst, f->nst, sizeof(*f->st)) < 0) {
		c->rc = ck_fail(c->err, ENOMEM, "out of memory");
		return;
	}
	s = &f->st[f->nst];
	memset(s, 0, sizeof(*s));
	lit(c, "storage key=");
	str(c, &s->key);
	lit(c, " offset=");
	u64(c, &s->offset);
	lit(c, " length=");
	u64(c, &s->length);
	lit(c, " xxh3-128=");
	hex128(c, &s->hash_hi, &s->hash_lo);
	eol(c);
	if (s->key)
		f->nst++;   /* owns its key from here on, even if the line failed later */
}

static void parse_shape(struct cur *c, struct ck_tensor_info *t)
{
	lit(c, "[");
	if (c->rc || (c->p < c->end && *c->p == ']')) {
		lit(c, "]");
		return;
	}
	for (;;) {
		if (t->ndim == CK_MAX_DIMS) {
			fail_at(c, EINVAL, "more than %d dimensions", CK_MAX_DIMS);
			return;
		}
		u64(c, &t->shape[t->ndim]);
		if (c->rc)
			return;
		t->ndim++;
		if (c->p < c->end && *c->p == ',') {
			c->p++;
			continue;
		}
		lit(c, "]");
		return;
	}
}

static void parse_tensor(struct cur *c, struct ck_ingest *f)
{
	struct ck_tensor_info *t;
	const char *w;
	size_t n;

	if (c->rc)
		return;
	if (grow((void **)&f->t, &f->capt, f->nt, sizeof(*f->t)) < 0) {
		c->rc = ck_fail(c->err, ENOMEM, "out of memory");
		return;
	}
	t = &f->t[f->nt];
	memset(t, 0, sizeof(*t));
	lit(c, "tensor name=");
	str(c, &t->name);
	lit(c, " layer=");
	str(c, &t->layer);
	lit(c, " dtype=");
	if (!c->rc) {
		n = word(c, &w);
		if (dtype_from_token(w, n, &t->dtype) < 0) {
			c->p = w;
			fail_at(c, EINVAL, "unknown dtype '%.*s'", (int)(n > 32 ? 32 : n), w);
		}
	}
	lit(c, " shape=");
	parse_shape(c, t);
	lit(c, " storage=");
	str(c, &t->storage_key);
	lit(c, " offset=");
	u64(c, &t->storage_offset);
	eol(c);
	if (t->name && t->layer && t->storage_key) {
		f->nt++;
		f->info.ntensors = (uint32_t)f->nt;
	} else {
		ck_tensor_info_clear(t);
	}
}

static void count(struct cur *c, uint64_t *n, uint64_t max, const char *what)
{
	const char *start = c->p;

	u64(c, n);
	if (!c->rc && *n > max) {
		c->p = start;
		fail_at(c, E2BIG, "%" PRIu64 " %s (at most %" PRIu64 ")", *n, what, max);
	}
}

/* Exactly four octal digits, at most 07777. */
static void mode4(struct cur *c, uint32_t *out)
{
	uint32_t v = 0;

	if (c->rc)
		return;
	for (int i = 0; i < 4; i++) {
		if (c->p >= c->end || *c->p < '0' || *c->p > '7') {
			fail_at(c, EINVAL, "expected a mode of four octal digits");
			return;
		}
		v = v << 3 | (uint32_t)(*c->p++ - '0');
	}
	*out = v;
}

static void u32(struct cur *c, uint32_t *out)
{
	const char *start = c->p;
	uint64_t v = 0;

	u64(c, &v);
	if (!c->rc && v > UINT32_MAX) {
		c->p = start;
		fail_at(c, EINVAL, "number out of range");
		return;
	}
	*out = (uint32_t)v;
}

static void parse_file(struct cur *c, struct ck_manifest *m, uint64_t version)
{
	uint64_t nst = 0, nt = 0, i;
	struct ck_ingest *f;
	const char *w;
	size_t n;

	if (c->rc)
		return;
	f = &m->files[m->nfiles++];
	memset(f, 0, sizeof(*f));
	lit(c, "file path=");
	str(c, &f->info.relpath);
	lit(c, " kind=");
	if (!c->rc) {
		n = word(c, &w);
		if (kind_from_token(w, n, &f->info.kind) < 0) {
			c->p = w;
			fail_at(c, EINVAL, "unknown file kind '%.*s'", (int)(n > 32 ? 32 : n), w);
		}
	}
	lit(c, " physical=");
	str(c, &f->info.src_path);
	lit(c, " dev=");
	u64(c, &f->info.dev);
	lit(c, " ino=");
	u64(c, &f->info.ino);
	lit(c, " size=");
	u64(c, &f->info.size);
	lit(c, " mtime-ns=");
	i64(c, &f->info.mtime_ns);
	if (version >= 2) {
		lit(c, " uid=");
		u32(c, &f->info.owner.uid);
		lit(c, " gid=");
		u32(c, &f->info.owner.gid);
		lit(c, " mode=");
		mode4(c, &f->info.owner.mode);
		f->info.has_owner = !c->rc;
	}
	lit(c, " storages=");
	count(c, &nst, UINT32_MAX, "storages");
	lit(c, " tensors=");
	count(c, &nt, UINT32_MAX, "tensors");
	if (f->info.kind == CK_FILE_SYMLINK) {
		lit(c, " target=");
		str(c, &f->info.target);
	} else {
		lit(c, " error=");
		opt_str(c, &f->info.error);
	}
	eol(c);
	for (i = 0; i < nst && !c->rc; i++)
		parse_storage(c, f);
	for (i = 0; i < nt && !c->rc; i++)
		parse_tensor(c, f);
}

/* The last line: "checksum xxh3-128=<hex>\n" over every byte before it. */
static int check_checksum(const char *text, size_t len, size_t *body_len, struct ck_error *err)
{
	struct cur c = { .err = err, .line = 0 };
	uint64_t hi = 0, lo = 0;
	XXH128_hash_t h;
	size_t body;

	if (len < CSUM_LINE_LEN || text[len - 1] != '\n' ||
	    memcmp(text + len - CSUM_LINE_LEN, CSUM_PREFIX, sizeof(CSUM_PREFIX) - 1) != 0 ||
	    (len > CSUM_LINE_LEN && text[len - CSUM_LINE_LEN - 1] != '\n'))
		return ck_fail(err, EBADMSG, "no checksum line at the end (torn or truncated manifest)");
	body = len - CSUM_LINE_LEN;
	c.p = c.line_start = text + body + sizeof(CSUM_PREFIX) - 1;
	c.end = text + len - 1;
	hex128(&c, &hi, &lo);
	if (c.rc)
		return ck_fail(err, EBADMSG, "malformed checksum line (damaged manifest)");
	h = XXH3_128bits(text, body);
	if (h.high64 != hi || h.low64 != lo)
		return ck_fail(err, EBADMSG,
			       "checksum mismatch: the content hashes to %016" PRIx64 "%016" PRIx64
			       ", its checksum line says %016" PRIx64 "%016" PRIx64 " (damaged or edited manifest)",
			       h.high64, h.low64, hi, lo);
	*body_len = body;
	return 0;
}

/* Only printable ASCII and newlines: everything else is escaped in strings. */
static int check_bytes(const char *text, size_t len, struct ck_error *err)
{
	size_t i, line = 1;

	for (i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)text[i];

		if (ch == '\n')
			line++;
		else if (ch < 0x20 || ch >= 0x7f)
			return ck_fail(err, EINVAL, "line %zu: byte 0x%02x outside printable ASCII", line, ch);
	}
	return 0;
}

static void parse_header(struct cur *c, struct ck_manifest *m)
{
	uint64_t version = 0, nfiles = 0;
	const char *w;
	size_t n;

	lit(c, MAGIC);
	if (c->rc) {
		c->rc = ck_fail(c->err, EINVAL, "not a ckptfs manifest (no '%s' line)", MAGIC "1");
		return;
	}
	u64(c, &version);
	if (!c->rc && (version < CK_MANIFEST_OLDEST || version > CK_MANIFEST_VERSION)) {
		c->rc = ck_fail(c->err, EPROTONOSUPPORT, "manifest format %" PRIu64 " (this ckptfs reads %d to %d)",
				version, CK_MANIFEST_OLDEST, CK_MANIFEST_VERSION);
		return;
	}
	m->version = (int)version;
	eol(c);
	lit(c, "series name=");
	str(c, &m->ckpt.series);
	lit(c, " pattern=");
	opt_str(c, &m->pattern);
	lit(c, " created-ns=");
	i64(c, &m->series_created_ns);
	eol(c);
	lit(c, "checkpoint name=");
	str(c, &m->ckpt.name);
	lit(c, " step=");
	i64(c, &m->ckpt.step);
	lit(c, " single-file=");
	if (!c->rc) {
		n = word(c, &w);
		if (n == 3 && !memcmp(w, "yes", 3)) {
			m->ckpt.is_file = 1;
		} else if (!(n == 2 && !memcmp(w, "no", 2))) {
			c->p = w;
			fail_at(c, EINVAL, "expected 'yes' or 'no'");
		}
	}
	lit(c, " imported-ns=");
	i64(c, &m->imported_ns);
	lit(c, " source=");
	str(c, &m->ckpt.src_path);
	lit(c, " files=");
	count(c, &nfiles, CK_MANIFEST_MAX_FILES, "files");
	eol(c);
	if (c->rc)
		return;
	/* Every file takes a line of more than 64 bytes: no allocation beyond what the text can fill. */
	if (nfiles > (uint64_t)(c->end - c->p) / 64) {
		fail_at(c, EINVAL, "%" PRIu64 " files announced, but the manifest ends first", nfiles);
		return;
	}
	m->files = calloc(nfiles ? nfiles : 1, sizeof(*m->files));
	if (!m->files) {
		c->rc = ck_fail(c->err, ENOMEM, "out of memory");
		return;
	}
	while (m->nfiles < nfiles && !c->rc)
		parse_file(c, m, version);
}

int ck_manifest_parse(const char *text, size_t len, struct ck_manifest *out, struct ck_error *err)
{
	struct cur c = { .err = err, .line = 1 };
	size_t body = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > CK_MANIFEST_MAX_BYTES)
		return ck_fail(err, E2BIG, "manifest of %zu bytes (at most %u)", len, CK_MANIFEST_MAX_BYTES);
	rc = check_checksum(text, len, &body, err);
	if (rc == 0)
		rc = check_bytes(text, body, err);
	if (rc < 0)
		return rc;
	c.p = c.line_start = text;
	c.end = text + body;
	parse_header(&c, out);
	if (!c.rc && c.p != c.end)
		fail_at(&c, EINVAL, "unexpected line after the last file (or more lines than announced)");
	rc = c.rc;
	if (rc == 0)
		rc = validate(out, err);
	if (rc < 0)
		ck_manifest_clear(out);
	return rc;
}

void ck_manifest_clear(struct ck_manifest *m)
{
	size_t i;

	ck_ckpt_info_clear(&m->ckpt);
	free(m->pattern);
	for (i = 0; m->files && i < m->nfiles; i++)
		ck_ingest_clear(&m->files[i]);
	free(m->files);
	memset(m, 0, sizeof(*m));
}
