/* Sweeping the packed store (ckptctl gc): dropping the chunk-table entries
 * and file maps nothing live uses, and giving back the pack bytes they held.
 *
 * Live chunks are those in the file maps of the file versions the index
 * still holds (deleted checkpoints' kept files included), plus, following
 * chains, the reference of every live delta: a chain keeps its reference
 * and anchor alive.  A pack whose live records fill less than a threshold
 * of it is rewritten: the live records are appended to a new pack that is
 * then fsynced, one index transaction points the chunk table at their new
 * offsets (and makes the new pack the one compaction appends to), and only
 * then is the old pack emptied.  An old pack is emptied, not unlinked:
 * packs are numbered without gaps (reindex scans them in order until one
 * is missing), so it is replaced by a bare pack header (temporary file,
 * fsync, rename).  A crash before the transaction leaves a new pack that
 * nothing references (removed by the next sweep), after it old packs that
 * nothing references (emptied by the next sweep): either state reads. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/fileio.h"
#include "ckptfs/pack.h"
#include "store/journal.h"
#include "store/manifest.h"
#include "packstore_int.h"
#include "store/staging.h"

#define GC_DEFAULT_PCT 50
#define GC_TMP_SUFFIX ".gc.tmp"
#define PACKS_PAST_CUR 64     /* chunk entries naming a pack further on are damage */

/* A set of chunk hashes: open addressing with a separate "used" byte, so
 * that every hash value (zero included) can be held. */
struct hset {
	struct ck_hash128 *v;
	uint8_t *used;
	size_t cap, n;
};

static size_t hset_slot(const struct hset *s, struct ck_hash128 h)
{
	size_t i = (size_t)(h.lo ^ (h.hi >> 7)) & (s->cap - 1);

	while (s->used[i] && !ck_hash128_eq(s->v[i], h))
		i = (i + 1) & (s->cap - 1);
	return i;
}

static int hset_has(const struct hset *s, struct ck_hash128 h)
{
	return s->cap && s->used[hset_slot(s, h)];
}

/* 1 when h was added, 0 when it was there, -ENOMEM. */
static int hset_add(struct hset *s, struct ck_hash128 h)
{
	size_t i;

	if ((s->n + 1) * 2 > s->cap) {
		struct hset g = { .cap = s->cap ? s->cap * 2 : 4096 };

		g.v = malloc(g.cap * sizeof(*g.v));
		g.used = calloc(g.cap, 1);
		if (!g.v || !g.used) {
			free(g.v);
			free(g.used);
			return -ENOMEM;
		}
		for (size_t j = 0; j < s->cap; j++)
			if (s->used[j]) {
				size_t k = hset_slot(&g, s->v[j]);

				g.v[k] = s->v[j];
				g.used[k] = 1;
			}
		g.n = s->n;
		free(s->v);
		free(s->used);
		*s = g;
	}
	i = hset_slot(s, h);
	if (s->used[i])
		return 0;
	s->v[i] = h;
	s->used[i] = 1;
	s->n++;
	return 1;
}

static void hset_free(struct hset *s)
{
	free(s->v);
	free(s->used);
}

/* A live packed record that may move. */
struct move {
	struct ck_hash128 h;
	uint32_t pack_id;
	uint64_t offset, new_offset;
};

/* What one pack holds, as the chunk table sees it. */
struct pack_use {
	uint64_t size;        /* the file's size; 0: missing or header only */
	uint64_t live;        /* bytes of records live chunks use (compact headers) */
	uint64_t live_v2;     /* the same with 52-byte headers (packs before version 3) */
	int rewrite;          /* below the threshold: rewritten (or emptied) */
};

struct sweep {
	struct ck_store *st;
	const struct ck_sweep_opts *opts;
	struct ck_sweep_stats *stats;
	struct ck_error *err;
	struct hset live;
	struct ck_hash128 *todo;       /* live hashes whose chains are still to follow */
	size_t ntodo, captodo;
	uint64_t *ids;                 /* file ids the index holds, sorted */
	size_t nids, capids;
	uint64_t *dead_fmaps;
	size_t ndead_fmaps, capdead_fmaps;
	struct ck_hash128 *dead;       /* chunk entries to drop */
	size_t ndead, capdead;
	struct move *moves;
	size_t nmoves, capmoves;
	struct pack_use *packs;
	uint32_t npacks;               /* packs 0 .. npacks - 1 are the store's */
	uint64_t pack_cur;
	uint32_t new_id;               /* the pack the sweep copied to (the last one to size) */
	int journaled;                 /* its moves are in the journal */
};

/* Appends one element of size sz to *v (n, cap). */
static int push(void **v, size_t *n, size_t *cap, size_t sz, const void *x)
{
	if (*n == *cap) {
		void *g = ck_grow(*v, cap, sz, 256);

		if (!g)
			return -ENOMEM;
		*v = g;
	}
	memcpy((char *)*v + *n * sz, x, sz);
	(*n)++;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int move_cmp(const void *a, const void *b)
{
	const struct move *x = a, *y = b;

	if (x->pack_id != y->pack_id)
		return x->pack_id < y->pack_id ? -1 : 1;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int mark_live(struct sweep *s, struct ck_hash128 h)
{
	int rc = hset_add(&s->live, h);

	if (rc == 1)
		rc = push((void **)&s->todo, &s->ntodo, &s->captodo, sizeof(h), &h);
	return rc;
}

static struct ck_hash128 hash_of_key(const MDB_val *k)
{
	struct ck_hash128 h = { 0, 0 };

	if (k->mv_size == 16) {
		h.hi = ck_key_get_id(k->mv_data);
		h.lo = ck_key_get_id((const uint8_t *)k->mv_data + 8);
	}
	return h;
}

/* The file ids of every file record, deleted checkpoints' included. */
static int collect_files(struct sweep *s, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = ck_mdb_errno(mdb_cursor_open(txn, s->st->files, &cur));

	if (rc < 0)
		return rc;
	for (int op = MDB_FIRST; rc == 0 && mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
		struct ck_file_info f = { 0 };

		rc = ck_rec_get_file(&k, &v, NULL, &f);
		if (rc == 0)
			rc = push((void **)&s->ids, &s->nids, &s->capids, sizeof(f.id), &f.id);
		ck_file_info_clear(&f);
	}
	mdb_cursor_close(cur);
	if (rc == 0 && s->nids)
		qsort(s->ids, s->nids, sizeof(*s->ids), u64_cmp);
	return rc;
}

/* Live roots: the chunks of the maps of those files; every other map is
 * a file the index dropped (reclaimed) and goes. */
static int collect_maps(struct sweep *s, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = ck_mdb_errno(mdb_cursor_open(txn, s->st->fmaps, &cur));

	if (rc < 0)
		return rc;
	for (int op = MDB_FIRST; rc == 0 && mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
		struct ck_error why = { { 0 } };
		struct ck_fmap m;
		uint64_t id;

		if (k.mv_size != 8) {
			rc = ck_fail(s->err, EIO, "index: a file map key of %zu bytes", k.mv_size);
			break;
		}
		id = ck_key_get_id(k.mv_data);
		if (!bsearch(&id, s->ids, s->nids, sizeof(id), u64_cmp)) {
			rc = push((void **)&s->dead_fmaps, &s->ndead_fmaps, &s->capdead_fmaps, sizeof(id), &id);
			continue;
		}
		rc = ck_fmap_get(v.mv_data, v.mv_size, &m, &why);
		if (rc < 0) {
			/* A map that does not parse: nothing it names may be dropped. */
			ck_fail(s->err, -rc, "index: file map of file %llu: %s", (unsigned long long)id, why.msg);
			break;
		}
		for (uint32_t i = 0; i < m.nchunks && rc == 0; i++)
			rc = mark_live(s, m.chunks[i].hash);
		ck_fmap_clear(&m);
	}
	mdb_cursor_close(cur);
	return rc;
}

/* Follows every live delta to its reference, and on down its chain. */
static int follow_chains(struct sweep *s, MDB_txn *txn)
{
	int rc = 0;

	while (s->ntodo && rc >= 0) {
		struct ck_hash128 h = s->todo[--s->ntodo];
		struct ck_chunk_loc l;

		rc = ck_chunk_lookup(txn, s->st, h, &l);
		if (rc == -ENOENT) {
			rc = 0;   /* damage verify reports; nothing to keep for it */
			continue;
		}
		if (rc < 0)
			break;
		if (l.where == CK_CHUNK_PACKED && ck_codec_needs_ref(l.codec))
			rc = mark_live(s, l.ref);
		ck_chunk_loc_clear(&l);
	}
	return rc < 0 ? rc : 0;
}

static struct pack_use *pack_use_at(struct sweep *s, uint32_t id)
{
	if (id >= s->npacks) {
		struct pack_use *g = realloc(s->packs, ((size_t)id + 1) * sizeof(*g));

		if (!g)
			return NULL;
		memset(g + s->npacks, 0, ((size_t)id + 1 - s->npacks) * sizeof(*g));
		s->packs = g;
		s->npacks = id + 1;
	}
	return &s->packs[id];
}

/* Sorts the chunk table into what stays (live packed records may move)
 * and what goes, and sums the live bytes of every pack. */
static int collect_chunks(struct sweep *s, MDB_txn *txn)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = ck_mdb_errno(mdb_cursor_open(txn, s->st->chunks, &cur));

	if (rc < 0)
		return rc;
	for (int op = MDB_FIRST; rc == 0 && mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
		struct ck_hash128 h = hash_of_key(&k);
		struct ck_chunk_loc l;
		int live = hset_has(&s->live, h);

		if (k.mv_size != 16 || ck_chunk_loc_get(&v, &l) < 0) {
			rc = ck_fail(s->err, EIO, "index: a chunk entry that does not parse");
			break;
		}
		if (l.where == CK_CHUNK_PACKED && l.pack_id > s->pack_cur + PACKS_PAST_CUR) {
			/* Compaction numbers packs from pack_cur on; a rebuild may
			 * find records in a few packs past it, never thousands. */
			rc = ck_fail(s->err, EIO, "index: a chunk in pack %u, the current pack is %llu", l.pack_id,
				     (unsigned long long)s->pack_cur);
		} else if (l.where == CK_CHUNK_PACKED && !pack_use_at(s, l.pack_id)) {
			rc = -ENOMEM;   /* every pack an entry names is the store's, dead or not */
		} else if (!live) {
			rc = push((void **)&s->dead, &s->ndead, &s->capdead, sizeof(h), &h);
		} else if (l.where == CK_CHUNK_PACKED) {
			struct move m = { .h = h, .pack_id = l.pack_id, .offset = l.offset };
			struct ck_chunk_desc d = { .codec = l.codec, .raw_len = l.raw_len, .enc_len = l.enc_len };

			s->packs[l.pack_id].live += ck_pack_rec_header_len(&d) + (uint64_t)l.enc_len;
			s->packs[l.pack_id].live_v2 += CK_PACK_REC_HEADER_V2 + (uint64_t)l.enc_len;
			rc = push((void **)&s->moves, &s->nmoves, &s->capmoves, sizeof(m), &m);
		}
		if (live)
			s->stats->live_chunks++;
		ck_chunk_loc_clear(&l);
	}
	mdb_cursor_close(cur);
	return rc;
}

static uint64_t file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISREG(sb.st_mode) ? (uint64_t)sb.st_size : 0;
}

/* The version in a pack's file header; 0 when it cannot be read (gc
 * then sizes its records as the newest version does: a pack that is
 * missing or damaged is verify's to report). */
static uint32_t pack_version(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	uint32_t version = 0;

	if (fd >= 0) {
		if (ck_pack_check_header(fd, &version, NULL) < 0)
			version = 0;
		close(fd);
	}
	return version;
}

/* Reads the gathered state in one read transaction. */
static int gather(struct sweep *s)
{
	MDB_txn *txn;
	int rc = ck_mdb_errno(mdb_txn_begin(s->st->env, NULL, MDB_RDONLY, &txn));

	if (rc < 0)
		return ck_fail(s->err, -rc, "index: %s", strerror(-rc));
	rc = ck_meta_get_u64(txn, s->st, CK_META_PACK_CUR, &s->pack_cur);
	if (rc == 0 && s->pack_cur > UINT32_MAX - PACKS_PAST_CUR - 2)
		rc = -EIO;
	if (rc == 0)
		rc = collect_files(s, txn);
	if (rc == 0)
		rc = collect_maps(s, txn);
	if (rc == 0)
		rc = follow_chains(s, txn);
	if (rc == 0)
		rc = collect_chunks(s, txn);
	mdb_txn_abort(txn);
	if (rc == 0 && !pack_use_at(s, (uint32_t)s->pack_cur))
		rc = -ENOMEM;
	if (rc < 0 && !s->err->msg[0])
		ck_fail(s->err, -rc, "%s: index: %s", s->st->path, strerror(-rc));
	return rc;
}

/* Sizes the packs and picks those to rewrite. */
static int plan(struct sweep *s)
{
	unsigned pct = s->opts && s->opts->rewrite_below_pct ? s->opts->rewrite_below_pct : GC_DEFAULT_PCT;

	for (uint32_t id = 0; id < s->npacks; id++) {
		struct pack_use *p = &s->packs[id];
		char *path = ck_pack_path(s->st->path, id);
		uint32_t version;
		uint64_t body;

		if (!path)
			return ck_fail(s->err, ENOMEM, "out of memory");
		p->size = file_size(path);
		version = p->size > CK_PACK_HEADER ? pack_version(path) : 0;
		if (version && version < 3)
			p->live = p->live_v2;   /* records with 52-byte headers */
		free(path);
		s->stats->packs++;
		s->stats->pack_bytes_before += p->size;
		if (p->size <= CK_PACK_HEADER)
			continue;   /* missing (verify says so) or empty already */
		body = p->size - CK_PACK_HEADER;
		p->rewrite = p->live * 100 < body * pct;
		if (!p->rewrite)
			continue;
		s->stats->packs_rewritten += p->live > 0;
		s->stats->packs_emptied += p->live == 0;
		s->stats->bytes_copied += p->live;
		s->stats->dead_bytes += body > p->live ? body - p->live : 0;
	}
	for (size_t i = 0; i < s->nmoves; i++)
		if (s->moves[i].pack_id < s->npacks && s->packs[s->moves[i].pack_id].rewrite)
			s->stats->records_copied++;
	s->stats->dropped_chunks = s->ndead;
	s->stats->dropped_fmaps = s->ndead_fmaps;
	return 0;
}

/* Whether the sweep must start a new pack: records to copy, or the pack
 * compaction appends to is being emptied. */
static int needs_new_pack(const struct sweep *s)
{
	return s->stats->records_copied || (s->pack_cur < s->npacks && s->packs[s->pack_cur].rewrite);
}

/* Removes what a sweep or compaction that died left: temporaries in
 * STORE/packs, and packs past every pack the index knows. */
static void remove_leftovers(struct sweep *s)
{
	char *dir = ck_path_join(s->st->path, CK_PACKS_DIR);
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;
	int removed = 0;

	while (d && (de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name), sl = strlen(GC_TMP_SUFFIX);

		if (n > sl && strcmp(de->d_name + n - sl, GC_TMP_SUFFIX) == 0 && unlinkat(dirfd(d), de->d_name, 0) == 0)
			removed = 1;
	}
	if (d)
		closedir(d);
	for (uint32_t id = s->npacks;; id++) {
		char *path = ck_pack_path(s->st->path, id);
		int gone = path && unlink(path) == 0;

		free(path);
		if (!gone)
			break;
		s->stats->leftovers_removed++;
		removed = 1;
	}
	if (removed && dir)
		ck_fsync_dir(dir);
	free(dir);
}

/* Copies the live records of the packs to rewrite into pack new_id. */
static int copy_records(struct sweep *s, uint32_t new_id, uint64_t *new_end)
{
	struct ck_error why = { { 0 } };
	struct ck_pack_writer *w = NULL;
	char *path = ck_pack_path(s->st->path, new_id);
	uint8_t *payload = malloc(CK_CHUNK_MAX);
	uint32_t fd_pack = UINT32_MAX;
	int fd = -1, rc;

	if (!path || !payload) {
		free(path);
		free(payload);
		return ck_fail(s->err, ENOMEM, "out of memory");
	}
	rc = ck_pack_writer_open(path, 0, &w, NULL, &why);
	if (rc < 0)
		ck_fail(s->err, -rc, "%s: %s", path, why.msg);
	qsort(s->moves, s->nmoves, sizeof(*s->moves), move_cmp);
	for (size_t i = 0; i < s->nmoves && rc == 0; i++) {
		struct move *m = &s->moves[i];
		struct ck_chunk_desc desc;

		if (!s->packs[m->pack_id].rewrite)
			continue;
		if (m->pack_id != fd_pack) {
			if (fd >= 0)
				close(fd);
			fd = ck_pack_open(s->st->path, m->pack_id);
			fd_pack = m->pack_id;
			rc = fd < 0 ? fd : ck_pack_check_header(fd, NULL, &why);
			if (rc < 0)
				ck_fail(s->err, -rc, "pack %u: %s", m->pack_id, fd < 0 ? strerror(-rc) : why.msg);
			if (rc < 0)
				break;
		}
		rc = ck_pack_read_record(fd, m->offset, &desc, payload, &why);
		if (rc == 0 && !ck_hash128_eq(desc.raw_hash, m->h))
			rc = -EIO, snprintf(why.msg, sizeof(why.msg), "the record holds another chunk");
		if (rc < 0) {
			/* Damage: nothing is dropped, the store stays as it is. */
			ck_fail(s->err, -rc, "pack %u, record at %llu: %s", m->pack_id,
				(unsigned long long)m->offset, why.msg);
			break;
		}
		rc = ck_pack_append(w, &desc, payload, &m->new_offset);
		if (rc < 0)
			ck_fail(s->err, -rc, "%s: append: %s", path, strerror(-rc));
	}
	if (fd >= 0)
		close(fd);
	if (rc == 0 && (rc = ck_pack_sync(w)) < 0)
		ck_fail(s->err, -rc, "%s: sync: %s", path, strerror(-rc));
	if (rc == 0)
		*new_end = ck_pack_writer_end(w);
	ck_pack_writer_close(w);
	free(path);
	free(payload);
	return rc;
}

/* The journal entry of a sweep, before its transaction commits: every
 * other index drops what it located in the packs to empty and finds the
 * moved records in the new pack. */
static int journal(struct sweep *s, MDB_txn *txn, int new_pack, uint32_t new_id, uint64_t new_end)
{
	struct ck_journal_entry e = { 0 };
	struct ck_journal_scan scan = { .pack = new_id, .from = CK_PACK_HEADER, .to = new_end };
	uint32_t *emptied = calloc(s->npacks + 1, sizeof(*emptied));
	uint64_t seq;
	int rc;

	if (!emptied)
		return -ENOMEM;
	for (uint32_t id = 0; id < s->npacks; id++)
		if (s->packs[id].rewrite && e.nemptied < CK_JOURNAL_MAX_SCANS)
			emptied[e.nemptied++] = id;
	e.emptied = emptied;
	if (new_pack) {
		e.scans = &scan;
		e.nscans = new_end > CK_PACK_HEADER;
		e.has_pos = 1;
		e.pack_cur = new_id;
		e.pack_end = new_end;
	}
	rc = e.nemptied || e.nscans ? ck_journal_append(s->st, &e, &seq, s->err) : 0;
	if (rc == 0 && (e.nemptied || e.nscans)) {
		rc = ck_journal_mark_own(txn, s->st, seq);
		s->journaled = 1;
	}
	free(emptied);
	return rc;
}

/* One transaction: dead entries and maps dropped, moved records
 * relocated, the new pack made the current one. */
static int apply(struct sweep *s, int new_pack, uint32_t new_id, uint64_t new_end)
{
	MDB_txn *txn = NULL;
	int rc = ck_mdb_errno(mdb_txn_begin(s->st->env, NULL, 0, &txn));

	if (rc < 0)
		txn = NULL;

	for (size_t i = 0; i < s->ndead && rc == 0; i++) {
		uint8_t key[16];
		MDB_val k = { 16, key };

		ck_chunk_key(key, s->dead[i]);
		rc = mdb_del(txn, s->st->chunks, &k, NULL);
		rc = rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
	}
	for (size_t i = 0; i < s->ndead_fmaps && rc == 0; i++) {
		uint8_t key[8];
		MDB_val k = { 8, key };

		ck_key_id(key, s->dead_fmaps[i]);
		rc = mdb_del(txn, s->st->fmaps, &k, NULL);
		rc = rc == MDB_NOTFOUND ? 0 : ck_mdb_errno(rc);
	}
	for (size_t i = 0; i < s->nmoves && rc == 0; i++) {
		const struct move *m = &s->moves[i];
		struct ck_chunk_loc l;

		if (!s->packs[m->pack_id].rewrite)
			continue;
		rc = ck_chunk_lookup(txn, s->st, m->h, &l);
		if (rc < 0)
			break;
		l.pack_id = new_id;
		l.offset = m->new_offset;
		rc = ck_chunk_store(txn, s->st, m->h, &l);
		ck_chunk_loc_clear(&l);
	}
	if (rc == 0 && new_pack)
		rc = ck_meta_put_u64(txn, s->st, CK_META_PACK_CUR, new_id);
	if (rc == 0 && new_pack)
		rc = ck_meta_put_u64(txn, s->st, CK_META_PACK_END, new_end);
	if (rc == 0)
		rc = journal(s, txn, new_pack, new_id, new_end);
	if (rc == 0)
		rc = ck_mdb_errno(mdb_txn_commit(txn));
	else if (txn)
		mdb_txn_abort(txn);
	if (rc < 0)
		ck_fail(s->err, -rc, "%s: index: %s", s->st->path, strerror(-rc));
	return rc;
}

/* Replaces pack id by a bare header: what a reader that still has it open
 * reads stays (the old inode lives on until it is closed). */
static int empty_pack(struct sweep *s, uint32_t id)
{
	struct ck_error why = { { 0 } };
	struct ck_pack_writer *w = NULL;
	char *path = ck_pack_path(s->st->path, id);
	char *tmp = path ? malloc(strlen(path) + sizeof(GC_TMP_SUFFIX)) : NULL;
	int rc;

	if (!tmp) {
		free(path);
		return ck_fail(s->err, ENOMEM, "out of memory");
	}
	sprintf(tmp, "%s%s", path, GC_TMP_SUFFIX);
	unlink(tmp);
	rc = ck_pack_writer_open(tmp, 0, &w, NULL, &why);
	if (rc == 0)
		rc = ck_pack_writer_close(w);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -errno;
	if (rc < 0) {
		unlink(tmp);
		ck_fail(s->err, -rc, "%s: %s", path, ck_error_text(&why, rc));
	}
	free(tmp);
	free(path);
	return rc;
}

static int sweep_locked(struct sweep *s)
{
	int new_pack, rc;
	uint32_t new_id;
	uint64_t new_end = CK_PACK_HEADER;

	rc = gather(s);
	if (rc == 0)
		rc = plan(s);
	if (rc < 0)
		return rc;
	new_pack = needs_new_pack(s);
	new_id = s->npacks;
	if (s->opts && s->opts->dry_run) {
		/* Dead bytes go; live ones move; a new pack costs its header. */
		s->stats->pack_bytes_after = s->stats->pack_bytes_before - s->stats->dead_bytes +
					     (new_pack ? CK_PACK_HEADER : 0);
		return 0;
	}
	remove_leftovers(s);
	if (new_pack) {
		rc = copy_records(s, new_id, &new_end);
		if (rc < 0)
			return rc;
		ck_crash_point("gc-copied");
	}
	rc = apply(s, new_pack, new_id, new_end);
	if (rc < 0)
		return rc;
	ck_crash_point("gc-committed");
	s->new_id = new_id;
	return 0;
}

/* Empties the rewritten packs, which no index refers to any more (the
 * lease keeps every other compaction and gc away meanwhile). */
static int empty_packs(struct sweep *s)
{
	uint32_t new_id = s->new_id;
	char *dir;
	int rc = 0;

	dir = ck_path_join(s->st->path, CK_PACKS_DIR);
	for (uint32_t id = 0; id < s->npacks && rc == 0; id++) {
		if (!s->packs[id].rewrite)
			continue;
		rc = empty_pack(s, id);
		if (rc == 0 && dir)
			ck_fsync_dir(dir);
		ck_crash_point("gc-emptied");
	}
	free(dir);
	for (uint32_t id = 0; id <= new_id; id++) {
		char *path = ck_pack_path(s->st->path, id);

		if (!path)
			break;
		s->stats->pack_bytes_after += file_size(path);
		free(path);
	}
	return rc;
}

int ck_store_sweep_packs(struct ck_store *st, const struct ck_sweep_opts *opts, struct ck_sweep_stats *stats,
			 struct ck_error *err)
{
	struct ck_sweep_stats dummy;
	struct sweep s = { .st = st, .opts = opts, .stats = stats ? stats : &dummy, .err = err };
	int commit_fd = -1, index_fd = -1, lease = -1, rc;

	memset(s.stats, 0, sizeof(*s.stats));
	if (st->readonly && !(opts && opts->dry_run))
		return ck_fail(err, EROFS, "%s: opened read-only", st->path);
	if (!ck_pack_ready(st))
		return 0;   /* nothing was ever packed */
	if (!st->readonly) {
		/* One compaction or gc in the store at a time, whichever node. */
		rc = ck_store_maintenance_lock(st, &lease, err);
		if (rc == 0)
			rc = ck_store_commit_lock(st, &commit_fd, err);
		/* Live is what every node recorded: follow them first. */
		if (rc == 0)
			rc = ck_store_follow(st, NULL, err);
		if (rc == 0)
			rc = ck_store_lock(st, 0, &index_fd, err);
		if (rc == 0)
			rc = ck_store_index_current(st, err);
		if (rc < 0)
			goto out;
	}
	rc = sweep_locked(&s);
	if (index_fd >= 0)
		ck_store_unlock(index_fd);
	if (commit_fd >= 0)
		ck_store_unlock(commit_fd);
	index_fd = commit_fd = -1;
	if (rc == 0 && !(opts && opts->dry_run)) {
		/* Readers on other nodes move to the new pack at their next
		 * refresh: the old ones stay whole until then. */
		int delay = opts && opts->reclaim_delay ? opts->reclaim_delay :
			    ck_store_is_shared(st, NULL, NULL) ? CK_SHARED_RECLAIM_DELAY : 0;

		if (s.journaled && delay > 0)
			sleep((unsigned)delay);
		rc = empty_packs(&s);
	}
out:
	if (index_fd >= 0)
		ck_store_unlock(index_fd);
	if (commit_fd >= 0)
		ck_store_unlock(commit_fd);
	ck_store_unlock(lease);
	hset_free(&s.live);
	free(s.todo);
	free(s.ids);
	free(s.dead_fmaps);
	free(s.dead);
	free(s.moves);
	free(s.packs);
	return rc;
}
