/* The store's journal (journal.h; docs/format.md, "Journal"): entries,
 * their text, appending one and reading one back.
 *
 *   ckptfs-journal 1
 *   time=1712345679000000000
 *   ckpt series=72756e31 name=636865636b706f696e742d3230 manifest=<tag> tombstone=none packmap=none
 *   scan pack=3 from=16 to=1048576
 *   empty pack=1
 *   packs cur=3 end=1048576
 *   checksum xxh3-128=<32 hex digits: XXH3-128 of every byte before this line>
 *
 * Names are written as the lowercase hex of their bytes, so the text needs
 * no quoting; every line but the first, the time and the checksum is
 * optional, and they come in this order (scan and empty lines repeat).
 * Numbers are decimal without leading zeros.  One spelling per entry, as
 * for manifests: the parser accepts nothing else. */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/clock.h"
#include "ckptfs/fileio.h"
#include "journal.h"
#include "manifest.h"
#include "chunk_table.h"
#include "delete.h"

#define MAGIC "ckptfs-journal 1\n"
#define CSUM_PREFIX "checksum xxh3-128="
#define CSUM_LINE_LEN (sizeof(CSUM_PREFIX) - 1 + 32 + 1)
#define SEQ_DIGITS 16
#define TAG_TAIL 64

void ck_journal_entry_clear(struct ck_journal_entry *e)
{
	free(e->series);
	free(e->name);
	free(e->scans);
	free(e->emptied);
	memset(e, 0, sizeof(*e));
}

int ck_journal_tag(const char *path, char out[33])
{
	uint8_t buf[TAG_TAIL + 8];
	struct stat sb;
	uint64_t size;
	size_t n;
	XXH128_hash_t h;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		if (errno != ENOENT)
			return -errno;
		strcpy(out, CK_JOURNAL_TAG_NONE);
		return 0;
	}
	if (fstat(fd, &sb) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	size = (uint64_t)sb.st_size;
	n = size < TAG_TAIL ? (size_t)size : TAG_TAIL;
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(size >> (8 * i));
	rc = ck_pread_full(fd, buf + 8, n, size - n);
	close(fd);
	if (rc < 0)
		return rc;
	h = XXH3_128bits(buf, n + 8);
	snprintf(out, 33, "%016" PRIx64 "%016" PRIx64, h.high64, h.low64);
	return 0;
}

/* ---- text ---- */

static int put_hex(struct ck_buf *b, const char *s)
{
	static const char hex[] = "0123456789abcdef";

	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (ck_buf_putc(b, (uint8_t)hex[*p >> 4]) < 0 || ck_buf_putc(b, (uint8_t)hex[*p & 15]) < 0)
			return -ENOMEM;
	return 0;
}

static int valid_tag(const char *t)
{
	size_t n = strlen(t);

	if (!strcmp(t, CK_JOURNAL_TAG_NONE))
		return 1;
	if (n != 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((t[i] >= '0' && t[i] <= '9') || (t[i] >= 'a' && t[i] <= 'f')))
			return 0;
	return 1;
}

int ck_journal_format(struct ck_buf *out, const struct ck_journal_entry *e)
{
	size_t start = out->len;
	XXH128_hash_t h;
	int rc = 0;

	if (e->nscans > CK_JOURNAL_MAX_SCANS || e->nemptied > CK_JOURNAL_MAX_SCANS || !!e->series != !!e->name)
		return -EINVAL;
	if (e->series && (ck_manifest_check_name(e->series) || ck_manifest_check_name(e->name) ||
			  !valid_tag(e->manifest) || !valid_tag(e->tombstone) || !valid_tag(e->packmap)))
		return -EINVAL;
	rc |= ck_buf_printf(out, MAGIC "time=%" PRId64 "\n", e->time_ns);
	if (e->series) {
		rc |= ck_buf_puts(out, "ckpt series=");
		rc |= put_hex(out, e->series);
		rc |= ck_buf_puts(out, " name=");
		rc |= put_hex(out, e->name);
		rc |= ck_buf_printf(out, " manifest=%s tombstone=%s packmap=%s\n", e->manifest, e->tombstone,
				    e->packmap);
	}
	for (size_t i = 0; i < e->nscans; i++)
		rc |= ck_buf_printf(out, "scan pack=%" PRIu32 " from=%" PRIu64 " to=%" PRIu64 "\n", e->scans[i].pack,
				    e->scans[i].from, e->scans[i].to);
	for (size_t i = 0; i < e->nemptied; i++)
		rc |= ck_buf_printf(out, "empty pack=%" PRIu32 "\n", e->emptied[i]);
	if (e->has_pos)
		rc |= ck_buf_printf(out, "packs cur=%" PRIu32 " end=%" PRIu64 "\n", e->pack_cur, e->pack_end);
	if (rc)
		return -ENOMEM;
	h = XXH3_128bits(out->data + start, out->len - start);
	return ck_buf_printf(out, CSUM_PREFIX "%016" PRIx64 "%016" PRIx64 "\n", h.high64, h.low64) < 0 ? -ENOMEM : 0;
}

struct cur {
	const char *p, *end;
	size_t line;
	struct ck_error *err;
	int rc;
};

static int bad(struct cur *c, const char *what)
{
	if (!c->rc)
		c->rc = ck_fail(c->err, EINVAL, "line %zu: %s", c->line, what);
	return c->rc;
}

static int lit(struct cur *c, const char *s)
{
	size_t n = strlen(s);

	if (c->rc)
		return c->rc;
	if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n))
		return bad(c, "unexpected text");
	c->p += n;
	if (s[n - 1] == '\n')
		c->line++;
	return 0;
}

static int peek(const struct cur *c, const char *s)
{
	size_t n = strlen(s);

	return !c->rc && (size_t)(c->end - c->p) >= n && !memcmp(c->p, s, n);
}

static int u64(struct cur *c, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	const char *start = c->p;

	if (c->rc)
		return c->rc;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');

		if (v > (max - d) / 10)
			return bad(c, "number too large");
		v = v * 10 + d;
		c->p++;
	}
	if (c->p == start || (*start == '0' && c->p - start > 1))
		return bad(c, "expected a number without leading zeros");
	*out = v;
	return 0;
}

static int i64(struct cur *c, int64_t *out)
{
	uint64_t v;
	int neg = 0;

	if (peek(c, "-")) {
		neg = 1;
		c->p++;
	}
	if (u64(c, neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, &v))
		return c->rc;
	if (neg && v == 0)
		return bad(c, "-0");
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

/* A name as hex, up to the next blank. */
static int hexname(struct cur *c, char **out)
{
	const char *s = c->p;
	size_t n = 0;
	char *name;

	if (c->rc)
		return c->rc;
	while (s + n < c->end && s[n] != ' ' && s[n] != '\n')
		n++;
	if (n == 0 || n % 2 || n > 2 * CK_MANIFEST_MAX_NAME)
		return bad(c, "expected a name in hex");
	name = malloc(n / 2 + 1);
	if (!name)
		return c->rc = ck_fail(c->err, ENOMEM, "out of memory");
	for (size_t i = 0; i < n / 2; i++) {
		int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);

		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(name);
			return bad(c, "expected a name in lowercase hex");
		}
		name[i] = (char)(hi << 4 | lo);
	}
	name[n / 2] = '\0';
	c->p += n;
	*out = name;
	if (ck_manifest_check_name(name))
		return bad(c, "not a series or checkpoint name");
	return 0;
}

static int tag(struct cur *c, char out[33])
{
	size_t n = 0;

	if (c->rc)
		return c->rc;
	while (c->p + n < c->end && c->p[n] != ' ' && c->p[n] != '\n' && n < 33)
		n++;
	if (n > 32)
		return bad(c, "tag too long");
	memcpy(out, c->p, n);
	out[n] = '\0';
	if (strlen(out) != n || !valid_tag(out))
		return bad(c, "expected a tag (32 lowercase hex digits or none)");
	c->p += n;
	return 0;
}

static int grow(void **v, size_t n, size_t elem)
{
	void *nv;

	if (n >= CK_JOURNAL_MAX_SCANS)
		return -E2BIG;
	if (n & (n - 1) && n)
		return 0;   /* room until the next power of two */
	nv = realloc(*v, (n ? 2 * n : 1) * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	return 0;
}

static void parse_body(struct cur *c, struct ck_journal_entry *e)
{
	uint64_t v;

	lit(c, MAGIC);
	lit(c, "time=");
	i64(c, &e->time_ns);
	lit(c, "\n");
	if (peek(c, "ckpt ")) {
		lit(c, "ckpt series=");
		hexname(c, &e->series);
		lit(c, " name=");
		hexname(c, &e->name);
		lit(c, " manifest=");
		tag(c, e->manifest);
		lit(c, " tombstone=");
		tag(c, e->tombstone);
		lit(c, " packmap=");
		tag(c, e->packmap);
		lit(c, "\n");
	}
	while (peek(c, "scan ")) {
		struct ck_journal_scan s;
		int rc = grow((void **)&e->scans, e->nscans, sizeof(*e->scans));

		if (rc) {
			c->rc = ck_fail(c->err, -rc, "line %zu: %s", c->line, rc == -E2BIG ? "too many scans" :
					"out of memory");
			return;
		}
		lit(c, "scan pack=");
		u64(c, UINT32_MAX, &v);
		s.pack = (uint32_t)v;
		lit(c, " from=");
		u64(c, UINT64_MAX, &s.from);
		lit(c, " to=");
		u64(c, UINT64_MAX, &s.to);
		lit(c, "\n");
		if (!c->rc && s.to < s.from)
			bad(c, "a range that ends before it starts");
		if (!c->rc)
			e->scans[e->nscans++] = s;
	}
	while (peek(c, "empty ")) {
		int rc = grow((void **)&e->emptied, e->nemptied, sizeof(*e->emptied));

		if (rc) {
			c->rc = ck_fail(c->err, -rc, "line %zu: %s", c->line, rc == -E2BIG ? "too many packs" :
					"out of memory");
			return;
		}
		lit(c, "empty pack=");
		u64(c, UINT32_MAX, &v);
		lit(c, "\n");
		if (!c->rc)
			e->emptied[e->nemptied++] = (uint32_t)v;
	}
	if (peek(c, "packs ")) {
		lit(c, "packs cur=");
		u64(c, UINT32_MAX, &v);
		e->pack_cur = (uint32_t)v;
		lit(c, " end=");
		u64(c, UINT64_MAX, &e->pack_end);
		lit(c, "\n");
		e->has_pos = !c->rc;
	}
	if (!c->rc && c->p != c->end)
		bad(c, "unexpected line");
}

int ck_journal_parse(const char *text, size_t len, struct ck_journal_entry *out, struct ck_error *err)
{
	struct cur c = { .err = err, .line = 1 };
	char want[33], *csum;
	XXH128_hash_t h;
	size_t body;

	memset(out, 0, sizeof(*out));
	if (len > CK_JOURNAL_MAX_BYTES)
		return ck_fail(err, E2BIG, "journal entry of %zu bytes", len);
	if (len < CSUM_LINE_LEN || text[len - 1] != '\n')
		return ck_fail(err, EBADMSG, "torn: no checksum line");
	body = len - CSUM_LINE_LEN;
	csum = (char *)text + body;
	if ((body && text[body - 1] != '\n') || memcmp(csum, CSUM_PREFIX, sizeof(CSUM_PREFIX) - 1))
		return ck_fail(err, EBADMSG, "torn: no checksum line");
	h = XXH3_128bits(text, body);
	snprintf(want, sizeof(want), "%016" PRIx64 "%016" PRIx64, h.high64, h.low64);
	if (memcmp(csum + sizeof(CSUM_PREFIX) - 1, want, 32))
		return ck_fail(err, EBADMSG, "damaged: checksum mismatch");
	if (len >= sizeof("ckptfs-journal ") - 1 && !memcmp(text, "ckptfs-journal ", 15) &&
	    (body < sizeof(MAGIC) - 1 || memcmp(text, MAGIC, sizeof(MAGIC) - 1)))
		return ck_fail(err, EPROTONOSUPPORT, "journal entry of another format version");
	c.p = text;
	c.end = text + body;
	parse_body(&c, out);
	if (c.rc)
		ck_journal_entry_clear(out);
	return c.rc;
}

/* ---- appending and reading ---- */

static char *entry_path(const char *store, uint64_t seq)
{
	char *p = NULL;

	if (asprintf(&p, "%s/%s/%0*" PRIu64, store, CK_JOURNAL_DIR, SEQ_DIGITS, seq) < 0)
		return NULL;
	return p;
}

int ck_journal_append(struct ck_store *st, const struct ck_journal_entry *e, uint64_t *seq, struct ck_error *err)
{
	struct ck_journal_entry copy = *e;
	struct ck_buf text = CK_BUF_INIT;
	char *dir = ck_path_join(st->path, CK_JOURNAL_DIR), *tmp = NULL, *dst = NULL;
	uint64_t next;
	int fd = -1, rc;

	if (!dir)
		return ck_fail(err, ENOMEM, "out of memory");
	if (!copy.time_ns)
		copy.time_ns = ck_now_ns();
	rc = ck_journal_format(&text, &copy);
	if (rc < 0) {
		ck_fail(err, -rc, "cannot write a journal entry: %s", strerror(-rc));
		goto out;
	}
	if (mkdir(dir, 0755) == 0)
		ck_fsync_dir(st->path);
	else if (errno != EEXIST) {
		rc = ck_fail(err, errno, "%s: %s", dir, strerror(errno));
		goto out;
	}
	if (asprintf(&tmp, "%s/.tmp.%ld.%" PRIx64, dir, (long)getpid(), (uint64_t)ck_now_ns()) < 0) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		tmp = NULL;
		goto out;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = ck_fail(err, errno, "%s: %s", tmp, strerror(errno));
		goto out;
	}
	rc = ck_write_all(fd, text.data, text.len);
	if (rc < 0) {
		ck_fail(err, -rc, "%s: %s", tmp, strerror(-rc));
		goto out;
	}
	if (fsync(fd) < 0) {
		rc = ck_fail(err, errno, "%s: fsync: %s", tmp, strerror(errno));
		goto out;
	}
	/* link() fails with EEXIST when the number is taken, as O_EXCL would:
	 * the next free number after the last one this store handle saw. */
	next = st->journal_hint + 1;
	for (;;) {
		free(dst);
		dst = entry_path(st->path, next);
		if (!dst) {
			rc = ck_fail(err, ENOMEM, "out of memory");
			goto out;
		}
		if (link(tmp, dst) == 0)
			break;
		if (errno != EEXIST) {
			rc = ck_fail(err, errno, "%s: %s", dst, strerror(errno));
			goto out;
		}
		next++;
	}
	st->journal_hint = next;
	rc = ck_fsync_dir(dir);
	if (rc < 0) {
		ck_fail(err, -rc, "%s: fsync: %s", dir, strerror(-rc));
		goto out;
	}
	if (seq)
		*seq = next;
out:
	if (fd >= 0)
		close(fd);
	if (tmp)
		unlink(tmp);
	free(tmp);
	free(dst);
	free(dir);
	ck_buf_free(&text);
	return rc;
}

int ck_journal_note_ckpt(struct ck_store *st, const char *series, const char *name,
			 const struct ck_journal_entry *e_packs, uint64_t *seq, struct ck_error *err)
{
	struct ck_journal_entry e = { 0 };
	char *mpath = ck_manifest_path(st->path, series, name);
	char *tpath = mpath ? ck_tombstone_path(mpath) : NULL;
	char *ppath = ck_packmap_path(st->path, series, name);
	int rc;

	if (!mpath || !tpath || !ppath) {
		rc = ck_fail(err, ENOMEM, "out of memory");
		goto out;
	}
	if (e_packs)
		e = *e_packs;
	e.series = (char *)series;
	e.name = (char *)name;
	rc = ck_journal_tag(mpath, e.manifest);
	if (rc == 0)
		rc = ck_journal_tag(tpath, e.tombstone);
	if (rc == 0)
		rc = ck_journal_tag(ppath, e.packmap);
	if (rc < 0) {
		ck_fail(err, -rc, "%s/%s: cannot read its records back: %s", series, name, strerror(-rc));
		goto out;
	}
	rc = ck_journal_append(st, &e, seq, err);
out:
	free(mpath);
	free(tpath);
	free(ppath);
	return rc;
}

int ck_journal_read(const char *store, uint64_t seq, struct ck_journal_entry *out, struct ck_error *err)
{
	char *path = entry_path(store, seq), buf[CK_JOURNAL_MAX_BYTES + 1];
	ssize_t n;
	size_t got = 0;
	int fd;

	memset(out, 0, sizeof(*out));
	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(path);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT : ck_fail(err, errno, "journal entry %" PRIu64 ": %s", seq,
							   strerror(errno));
	while (got < sizeof(buf) && (n = read(fd, buf + got, sizeof(buf) - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;

			close(fd);
			return ck_fail(err, e, "journal entry %" PRIu64 ": %s", seq, strerror(e));
		}
		got += (size_t)n;
	}
	close(fd);
	return ck_journal_parse(buf, got, out, err);
}

int ck_journal_head(const char *store, uint64_t *head)
{
	char *dir = ck_path_join(store, CK_JOURNAL_DIR);
	struct dirent *de;
	DIR *d;

	*head = 0;
	if (!dir)
		return -ENOMEM;
	d = opendir(dir);
	free(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d)) != NULL) {
		char *end;
		uint64_t v;

		if (strlen(de->d_name) != SEQ_DIGITS || de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		v = strtoull(de->d_name, &end, 10);
		if (*end == '\0' && v > *head)
			*head = v;
	}
	closedir(d);
	return 0;
}

/* ---- the index's position ---- */

int ck_journal_applied(MDB_txn *txn, struct ck_store *st, uint64_t *seq)
{
	return ck_meta_get_u64(txn, st, CK_META_JOURNAL, seq);
}

int ck_journal_put_applied(MDB_txn *txn, struct ck_store *st, uint64_t seq)
{
	if (seq > st->journal_hint)
		st->journal_hint = seq;
	return ck_meta_put_u64(txn, st, CK_META_JOURNAL, seq);
}

int ck_journal_set_applied(struct ck_store *st, uint64_t seq, struct ck_error *err)
{
	MDB_txn *txn;
	int rc = ck_mdb_errno(mdb_txn_begin(st->env, NULL, 0, &txn));

	if (rc == 0) {
		rc = ck_journal_put_applied(txn, st, seq);
		if (rc == 0)
			rc = ck_mdb_errno(mdb_txn_commit(txn));
		else
			mdb_txn_abort(txn);
	}
	if (rc < 0)
		return ck_fail(err, -rc, "%s: cannot record the journal position: %s", st->path, strerror(-rc));
	return 0;
}

int ck_journal_mark_own(MDB_txn *txn, struct ck_store *st, uint64_t seq)
{
	uint64_t have;
	int rc = ck_journal_applied(txn, st, &have);

	if (rc == 0 && have + 1 == seq)
		rc = ck_journal_put_applied(txn, st, seq);
	return rc;
}
