/* The lossy tier of compaction (docs/design.md, "The lossy tier"): the
 * checkpoints a series' policy does not keep exact are packed with their
 * float tensors coded lossily (include/ckptfs/lossy.h), oldest first, each
 * chunk a residual on the same chunk of the nearest older lossy version
 * (as it decodes, so errors never add up) or self-contained, whichever is
 * smaller, no chain longer than the policy's chain (else the anchor
 * interval).  Everything else of the file stays exact, but for the CRC-32s
 * of the zip records whose bytes changed.
 *
 * One checkpoint at a time, as a commit: records appended, the pack
 * fdatasynced, every lossy record read back from the pack and decoded to
 * its hash (the hash of bytes that were checked against the bound when
 * they were encoded), the packmap written durably, then one index
 * transaction.  Until it commits the exact version is what the index
 * serves, and nothing exact is removed before (raw files go afterwards by
 * keep_raw, exact records at the next gc).  A dry run does all of it but
 * writing, on a read-only transaction. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "ckptfs/lossy.h"
#include "ckptfs/torchzip.h"
#include "compact_int.h"

/* A storage's chunks held between the pass that finds its largest |x|
 * and CRC and the pass that codes them; larger storages are read twice. */
#define HOLD_MAX (64u << 20)
/* How far before a storage its zip local header may start: 30 bytes,
 * the record name and the extra field (PyTorch pads to 64 bytes). */
#define LH_SEARCH 4096

/* Chunks this run made, and their chain depth: a dry run's references
 * and dedup do not reach the index, and depths are asked often. */
struct made {
	struct { struct ck_hash128 h; unsigned depth; int used; } *v;
	size_t n, cap;
};

static int made_find(const struct made *m, struct ck_hash128 h, unsigned *depth)
{
	if (!m->cap)
		return 0;
	for (size_t i = (h.lo ^ h.hi) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->v[i].used)
			return 0;
		if (ck_hash128_eq(m->v[i].h, h)) {
			if (depth)
				*depth = m->v[i].depth;
			return 1;
		}
	}
}

static int made_add(struct made *m, struct ck_hash128 h, unsigned depth)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap) {
		struct made g = { .cap = m->cap ? m->cap * 2 : 1024 };

		g.v = calloc(g.cap, sizeof(*g.v));
		if (!g.v)
			return -ENOMEM;
		for (size_t k = 0; k < m->cap; k++)
			if (m->v[k].used) {
				for (i = (m->v[k].h.lo ^ m->v[k].h.hi) & (g.cap - 1); g.v[i].used; i = (i + 1) & (g.cap - 1))
					;
				g.v[i] = m->v[k];
			}
		g.n = m->n;
		free(m->v);
		*m = g;
	}
	for (i = (h.lo ^ h.hi) & (m->cap - 1); m->v[i].used; i = (i + 1) & (m->cap - 1))
		if (ck_hash128_eq(m->v[i].h, h))
			return 0;
	m->v[i].h = h;
	m->v[i].depth = depth;
	m->v[i].used = 1;
	m->n++;
	return 0;
}

/* One series' run of the lossy pass. */
struct lossy {
	const struct ck_ckpt_info *ck;   /* the series, step order */
	size_t n;
	const struct ck_lossy_policy *p;
	const unsigned char *candidate;
	unsigned char *exact;            /* kept exact by the policy (live) */
	struct made made;
	uint8_t *decoded;                /* a chunk as its lossy record decodes */
	uint8_t *hold;                   /* a storage's exact bytes, up to HOLD_MAX */
	size_t hold_cap;
	struct ck_hash128 *written;      /* lossy records of the checkpoint at hand */
	size_t nwritten, capwritten;
	struct ck_lossy_report rep;
	/* a dry run's maps, which the index never gets: the next versions' references */
	struct { uint64_t file_id; struct ck_fmap map; } *dry;
	size_t ndry, capdry;
};

/* Per storage of the file being coded. */
struct stor {
	int eligible;                /* float, whole, not drawn exact: to code lossily */
	enum ck_lossy_dtype dt;
	enum ck_dtype dtype;
	double max_abs, max_err;
	int coded;                   /* some chunk was coded lossily */
	/* its zip record, when the file is a zip (torch.save, a DCP blob) */
	int zip;
	uint64_t lh;                 /* local header */
	int descriptor;              /* a data descriptor follows the data */
	const uint8_t *name;         /* the record name, in the skeleton */
	uint16_t name_len;
	uint32_t crc_old, crc_new;
};

/* The bytes between storages of the file (zip headers, the pickle, the
 * central directory), kept in memory to find and patch CRC fields:
 * segment k holds [off, off + len) at buf + at. */
struct seg {
	uint64_t off, len;
	size_t at;
};

struct skel {
	uint8_t *buf;
	size_t len;
	struct seg *seg;
	size_t nseg;
};

static uint8_t *skel_at(const struct skel *s, uint64_t off, uint64_t len)
{
	for (size_t k = 0; k < s->nseg; k++)
		if (off >= s->seg[k].off && off - s->seg[k].off <= s->seg[k].len && len <= s->seg[k].len - (off - s->seg[k].off))
			return s->buf + s->seg[k].at + (off - s->seg[k].off);
	return NULL;
}

/* The file being coded: where its exact bytes come from. */
struct src {
	int fd;                        /* the raw file, or -1 */
	const struct ck_fmap *exact;   /* its packed exact map, or NULL */
};

/* Chunk i of v, exact, into out. */
static int read_exact(struct compact *c, MDB_txn *txn, const struct src *src, const struct fver *v, size_t i,
		      uint8_t *out)
{
	const struct ck_layout_chunk *lc = &v->lay.c[i];
	uint32_t len = 0;
	int rc;

	if (src->fd >= 0) {
		rc = ck_pread_full(src->fd, out, lc->len, lc->off);
		return rc < 0 ? ck_fail(c->err, -rc, "%s: read at %" PRIu64 ": %s", v->f->src_path, lc->off,
					rc == -EIO ? "the file ends first" : strerror(-rc)) : 0;
	}
	rc = ck_chunk_resolve(txn, c->st, &c->fds, &c->dec, c->recent, 0, src->exact->chunks[i].hash, out, &len, NULL,
			      c->err);
	if (rc == 0 && len != lc->len)
		rc = ck_fail(c->err, EIO, "%s: chunk %zu of %u bytes, the map says %u", v->f->src_path, i, len, lc->len);
	return rc;
}

/* Where h lives now: 0 and *loc (clear it), -ENOENT, or -errno. */
static int lookup(struct compact *c, struct lossy *L, MDB_txn *txn, struct ck_hash128 h, struct ck_chunk_loc *loc)
{
	memset(loc, 0, sizeof(*loc));
	if (made_find(&L->made, h, NULL)) {
		loc->where = CK_CHUNK_PACKED;
		return 0;
	}
	return ck_chunk_lookup(txn, c->st, h, loc);
}

/* An exact chunk of the file (bytes in c->raw) into the map: found
 * already (dedup), or stored as pack_chunk stores it. */
static int exact_chunk(struct compact *c, struct lossy *L, MDB_txn *txn, const struct fver *v, size_t i,
		       const struct refs *refs, struct ck_fmap *map)
{
	const struct ck_layout_chunk *lc = &v->lay.c[i];
	struct ck_hash128 h = ck_chunk_hash(c->raw, lc->len);
	struct ck_chunk_loc loc;
	int rc = lookup(c, L, txn, h, &loc), stored;

	map->chunks[i] = (struct ck_fmap_chunk){ .hash = h, .len = lc->len, .elem = lc->elem };
	ck_chunk_cache_insert(c->recent, h, c->raw, lc->len);
	if (rc < 0 && rc != -ENOENT)
		return ck_fail(c->err, -rc, "index: chunk table: %s", strerror(-rc));
	stored = rc == 0 && (loc.where == CK_CHUNK_PACKED || loc.file_id != v->f->id);
	rc = ck_compact_store_chunk(c, txn, v, h, lc, rc, &loc, refs, map);
	if (rc == 0 && c->dry && !stored)
		rc = made_add(&L->made, h, 0);
	return rc;
}

/* The exact chunk just read (c->raw) may be where the chunk table locates
 * it: a raw location in this file, whose raw file goes once the file is
 * packed.  Other versions may rest on it (deltas, dedup), so it is packed
 * as it is, as the exact pass would, before it is replaced. */
static int keep_exact_copy(struct compact *c, struct lossy *L, MDB_txn *txn, const struct fver *v, size_t i,
			   const struct refs *refs, struct ck_fmap *map)
{
	const struct ck_layout_chunk *lc = &v->lay.c[i];
	struct ck_hash128 h = ck_chunk_hash(c->raw, lc->len);
	struct ck_chunk_loc loc;
	int rc = lookup(c, L, txn, h, &loc), here;

	if (rc == -ENOENT)
		return 0;
	if (rc < 0)
		return ck_fail(c->err, -rc, "index: chunk table: %s", strerror(-rc));
	here = loc.where == CK_CHUNK_RAW && loc.file_id == v->f->id;
	if (here)
		rc = ck_compact_pack_chunk(c, txn, h, lc, loc.tail, refs, map);
	ck_chunk_loc_clear(&loc);
	if (rc == 0 && here && c->dry)
		rc = made_add(&L->made, h, 0);
	return rc;
}

/* The depth of h's chain: 0 and *depth, or -errno. */
static int depth_of(struct compact *c, struct lossy *L, MDB_txn *txn, struct ck_hash128 h, unsigned *depth)
{
	int meets;

	if (made_find(&L->made, h, depth))
		return 0;
	return ck_chunk_depth(txn, c->st, h, (struct ck_hash128){ 0, 0 }, depth, &meets);
}

/* Chunk i (exact bytes in c->raw) coded lossily within bound into the map,
 * on a reference from refs when one is near enough: 0, 1 when it does not
 * pay (the caller stores it exactly), or -errno. */
static int lossy_chunk(struct compact *c, struct lossy *L, MDB_txn *txn, const struct fver *v, size_t i,
		       struct stor *s, double bound, const struct refs *refs, struct ck_fmap *map)
{
	const struct ck_layout_chunk *lc = &v->lay.c[i];
	struct ck_chunk_loc loc = { .where = CK_CHUNK_PACKED };
	struct ck_lossy_result res;
	struct ck_chunk_desc desc;
	const uint8_t *payload, *ref = NULL;
	struct ck_hash128 refh, h;
	unsigned depth = 0;
	uint32_t ref_len = 0;
	uint64_t off;
	int rc;

	if (ck_compact_pick_ref(refs, lc, ck_chunk_hash(c->raw, lc->len), &refh) &&
	    depth_of(c, L, txn, refh, &depth) == 0 && depth + 1 <= (L->p->chain ? L->p->chain : c->k) &&
	    (ck_chunk_cache_copy(c->recent, refh, c->dec.out, &ref_len) ||
	     (c->w && ck_pack_flush(c->w) == 0 &&
	      ck_chunk_resolve(txn, c->st, &c->fds, &c->dec, c->recent, 0, refh, c->dec.out, &ref_len, NULL, NULL) == 0)))
		ref = c->dec.out;
	rc = ck_lossy_encode(c->enc, c->raw, lc->len, s->dt, bound, ref, ref_len, L->decoded, &desc, &payload, &res);
	if (rc == -E2BIG)
		return 1;
	if (rc == -EIO)
		ck_warn("%s: chunk at %" PRIu64 ": the lossy coding did not decode within its bound; kept exact",
			v->f->src_path, lc->off);
	if (rc == -EIO || rc == -EINVAL)
		return 1;
	if (rc < 0)
		return ck_fail(c->err, -rc, "lossy coding: %s", strerror(-rc));
	h = desc.raw_hash;
	map->chunks[i] = (struct ck_fmap_chunk){ .hash = h, .len = lc->len, .elem = lc->elem };
	ck_chunk_cache_insert(c->recent, h, L->decoded, lc->len);
	s->crc_new = ck_crc32(s->crc_new, L->decoded, lc->len);
	if (res.max_err > s->max_err)
		s->max_err = res.max_err;
	s->coded = 1;
	c->s.lossy_chunks++;
	c->s.lossy_bytes += lc->len;
	rc = lookup(c, L, txn, h, &loc);
	if (rc == 0) {   /* the same bytes are stored already (an unchanged tensor) */
		ck_chunk_loc_clear(&loc);
		c->s.dedup_chunks++;
		c->s.dedup_bytes += lc->len;
		map->dedup_bytes += lc->len;
		return 0;
	}
	if (rc != -ENOENT)
		return ck_fail(c->err, -rc, "index: chunk table: %s", strerror(-rc));
	rc = made_add(&L->made, h, res.delta ? depth + 1 : 0);
	if (rc == 0 && !c->dry) {
		rc = ck_compact_maybe_rotate(c);
		if (rc == 0)
			rc = ck_pack_append(c->w, &desc, payload, &off);
		if (rc < 0)
			return ck_fail(c->err, -rc, "pack %u: cannot append a record: %s", c->pack_id, strerror(-rc));
		ck_compact_crash_point(c, "lossy-append");
		loc = (struct ck_chunk_loc){ .where = CK_CHUNK_PACKED, .codec = desc.codec, .elem = desc.elem_size,
					     .raw_len = desc.raw_len, .pack_id = c->pack_id, .offset = off,
					     .enc_len = desc.enc_len };
		if (res.delta)
			loc.ref = desc.ref_hash;
		rc = ck_chunk_store(txn, c->st, h, &loc);
		if (rc == 0 && res.delta)
			rc = ck_chunk_raise_tails(txn, c->st, loc.ref, 1);
		if (rc < 0)
			return ck_fail(c->err, -rc, "index: %s", strerror(-rc));
		if (L->nwritten == L->capwritten) {
			size_t cap = L->capwritten ? 2 * L->capwritten : 256;
			struct ck_hash128 *w = realloc(L->written, cap * sizeof(*w));

			if (!w)
				return ck_fail(c->err, ENOMEM, "out of memory");
			L->written = w;
			L->capwritten = cap;
		}
		L->written[L->nwritten++] = h;
	}
	if (rc < 0)
		return ck_fail(c->err, -rc, "%s", strerror(-rc));
	if (res.delta) {
		c->s.delta_chunks++;
		c->s.delta_bytes += lc->len;
		map->delta_bytes += lc->len;
	} else {
		c->s.plain_chunks++;
		c->s.plain_bytes += lc->len;
		map->plain_bytes += lc->len;
	}
	c->s.stored_bytes += ck_pack_rec_header_len(&desc) + desc.enc_len;
	map->stored_bytes += ck_pack_rec_header_len(&desc) + desc.enc_len;
	return 0;
}

/* ---- which storages are coded lossily ---- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int cmp_tensor_key(const void *a, const void *b)
{
	const struct ck_tensor_info *x = *(const struct ck_tensor_info *const *)a;
	const struct ck_tensor_info *y = *(const struct ck_tensor_info *const *)b;

	return strcmp(x->storage_key, y->storage_key);
}

/* The names of v's tensors that a checkpoint kept exact draws: those no
 * version of the file in the checkpoints after ck[at] up to the nearest
 * one kept exact has (a composite takes each tensor from the newest
 * version that has it).  Sorted; *n of them. */
static int drawn_exact(struct compact *c, struct lossy *L, size_t at, const struct fver *v, char ***out, size_t *n)
{
	char **names = calloc(v->nt ? v->nt : 1, sizeof(*names));
	unsigned char *covered = calloc(v->nt ? v->nt : 1, 1);
	size_t left = v->nt, kept = 0;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!names || !covered) {
		free(names);
		free(covered);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->nt; i++)
		names[i] = v->t[i].name;
	qsort(names, v->nt, sizeof(*names), cmp_str);
	for (size_t j = at + 1; j < L->n && left && rc == 0; j++) {
		struct ck_file_info *f = NULL;
		size_t nf = 0;

		rc = ck_compact_files_of(c->st, &L->ck[j], &f, &nf);
		for (size_t k = 0; k < nf && rc == 0; k++) {
			struct ck_tensor_info *t = NULL;
			size_t nt = 0;

			if (strcmp(f[k].relpath, v->f->relpath) != 0 || !ck_file_kind_has_bytes(f[k].kind))
				continue;
			rc = ck_store_list_tensors(c->st, f[k].id, &t, &nt);
			for (size_t q = 0; q < nt && rc == 0; q++) {
				const char *key = t[q].name;
				char **hit = bsearch(&key, names, v->nt, sizeof(*names), cmp_str);

				if (hit && !covered[hit - names]) {
					covered[hit - names] = 1;
					left--;
				}
			}
			ck_tensor_info_free(t, nt);
		}
		ck_file_info_free(f, nf);
		if (!L->ck[j].deleted && L->exact[j])
			break;
	}
	if (rc < 0) {
		free(names);
		free(covered);
		return rc;
	}
	for (size_t i = 0; i < v->nt; i++)   /* the uncovered ones, still sorted */
		if (!covered[i])
			names[kept++] = names[i];
	free(covered);
	*out = names;   /* borrowed from v->t */
	*n = kept;
	return 0;
}

/* Decides which storages of v are coded lossily: float tensors covering
 * their storage whole, big enough, drawn by no checkpoint kept exact. */
static int choose_storages(struct compact *c, struct lossy *L, size_t at, const struct fver *v, struct stor *st)
{
	const struct ck_tensor_info **by_key = calloc(v->nt ? v->nt : 1, sizeof(*by_key));
	char **exact = NULL;
	size_t nexact = 0;
	int rc;

	if (!by_key)
		return -ENOMEM;
	rc = drawn_exact(c, L, at, v, &exact, &nexact);
	if (rc < 0) {
		free(by_key);
		return rc;
	}
	for (size_t i = 0; i < v->nt; i++)
		by_key[i] = &v->t[i];
	qsort(by_key, v->nt, sizeof(*by_key), cmp_tensor_key);
	for (size_t k = 0; k < v->ns; k++) {
		const struct ck_storage_info *s = &v->s[k];
		struct ck_tensor_info key = { .storage_key = s->key }, *kp = &key;
		const struct ck_tensor_info **hit = bsearch(&kp, by_key, v->nt, sizeof(*by_key), cmp_tensor_key);
		int ok = hit != NULL;

		memset(&st[k], 0, sizeof(st[k]));
		while (hit && hit > by_key && strcmp(hit[-1]->storage_key, s->key) == 0)
			hit--;
		for (; ok && hit < by_key + v->nt && strcmp((*hit)->storage_key, s->key) == 0; hit++) {
			const struct ck_tensor_info *t = *hit;
			uint64_t numel = 1;
			const char *name = t->name;

			for (int d = 0; d < t->ndim; d++)
				numel *= t->shape[d];
			ok = ck_lossy_dtype_of(t->dtype, &st[k].dt) == 0 && t->storage_offset == 0 &&
			     numel >= CK_LOSSY_MIN_ELEMS && numel * ck_dtype_size(t->dtype) == s->length &&
			     (st[k].dtype == CK_DT_INVALID || st[k].dtype == t->dtype) &&
			     !bsearch(&name, exact, nexact, sizeof(*exact), cmp_str);
			st[k].dtype = t->dtype;
		}
		st[k].eligible = ok;
	}
	free(exact);
	free(by_key);
	return 0;
}

/* The zip local header right before storage k (a torch.save record, or
 * one of a DCP file's): its name and whether a data descriptor follows.
 * A storage of a zip whose record is not found stays exact. */
static void find_record(const struct skel *sk, const struct ck_storage_info *s, struct stor *st)
{
	for (uint64_t back = 30; back <= LH_SEARCH && back <= s->offset; back++) {
		const uint8_t *h = skel_at(sk, s->offset - back, 30);

		if (!h || memcmp(h, "PK\3\4", 4) != 0 || 30u + ck_le16(h + 26) + ck_le16(h + 28) != back)
			continue;
		st->zip = 1;
		st->lh = s->offset - back;
		st->descriptor = (ck_le16(h + 6) & 0x08) != 0;
		st->name = skel_at(sk, st->lh + 30, ck_le16(h + 26));
		st->name_len = ck_le16(h + 26);
		return;
	}
}

/* The CRC fields of storage k's record, besides the central directory:
 * the local header's (unless a descriptor carries it) and the data
 * descriptor's.  NULL when they are not where they must be. */
static uint8_t *record_crc(const struct skel *sk, const struct ck_storage_info *s, const struct stor *st)
{
	uint8_t *p;

	if (!st->descriptor)
		return skel_at(sk, st->lh + 14, 4);
	p = skel_at(sk, s->offset + s->length, 8);
	return p && memcmp(p, "PK\7\x08", 4) == 0 ? p + 4 : NULL;
}

/* Every central directory entry in the skeleton whose record is one of
 * the coded storages (same name, size and original CRC) gets its new
 * CRC.  -EIO when a coded storage's entry is missing, or two storages
 * claim one entry with different new CRCs. */
static int patch_directory(const struct skel *sk, const struct fver *v, struct stor *st)
{
	unsigned char *found = calloc(v->ns ? v->ns : 1, 1);
	int rc = 0;

	if (!found)
		return -ENOMEM;
	for (size_t k = 0; k < sk->nseg && rc == 0; k++) {
		uint8_t *b = sk->buf + sk->seg[k].at;
		uint64_t len = sk->seg[k].len;

		for (uint64_t i = 0; i + 46 <= len && rc == 0; i++) {
			uint64_t csize, nlen, elen, clen;
			int have = 0;
			uint32_t crc = 0;

			if (b[i] != 'P' || memcmp(b + i, "PK\1\2", 4) != 0)
				continue;
			csize = ck_le32(b + i + 20);
			nlen = ck_le16(b + i + 28);
			elen = ck_le16(b + i + 30);
			clen = ck_le16(b + i + 32);
			if (i + 46 + nlen + elen + clen > len)
				continue;
			if (csize == 0xffffffffu) {   /* zip64: the extra field has it */
				const uint8_t *e = b + i + 46 + nlen;

				csize = UINT64_MAX;
				for (uint64_t x = 0; x + 4 <= elen;) {
					uint16_t id = ck_le16(e + x), sz = ck_le16(e + x + 2);

					if (x + 4 + sz > elen)
						break;
					if (id == 1) {
						uint64_t f = x + 4 + (ck_le32(b + i + 24) == 0xffffffffu ? 8 : 0);

						if (f + 8 <= x + 4 + sz)
							csize = ck_le64(e + f);
						break;
					}
					x += 4u + sz;
				}
			}
			for (size_t s = 0; s < v->ns; s++) {
				if (!st[s].coded || !st[s].zip || st[s].name_len != nlen || csize != v->s[s].length ||
				    ck_le32(b + i + 16) != st[s].crc_old || memcmp(st[s].name, b + i + 46, nlen) != 0)
					continue;
				if (have && crc != st[s].crc_new)
					rc = -EIO;
				have = 1;
				crc = st[s].crc_new;
				found[s] = 1;
			}
			if (have && rc == 0)
				ck_set_le32(b + i + 16, crc);
		}
	}
	for (size_t s = 0; s < v->ns && rc == 0; s++)
		if (st[s].coded && st[s].zip && !found[s])
			rc = -EIO;
	free(found);
	return rc;
}

/* The skeleton: every chunk between storages, exact, in file order. */
static int read_skeleton(struct compact *c, struct lossy *L, MDB_txn *txn, const struct src *src,
			 const struct fver *v, const struct refs *refs, struct ck_fmap *map, struct skel *sk)
{
	size_t total = 0;
	int rc = 0;

	for (size_t i = 0; i < v->lay.n; i++)
		if (!v->lay.c[i].key)
			total += v->lay.c[i].len;
	sk->buf = malloc(total ? total : 1);
	sk->seg = calloc(v->lay.n ? v->lay.n : 1, sizeof(*sk->seg));
	if (!sk->buf || !sk->seg)
		return ck_fail(c->err, ENOMEM, "out of memory");
	for (size_t i = 0; i < v->lay.n && rc == 0; i++) {
		const struct ck_layout_chunk *lc = &v->lay.c[i];

		if (lc->key)
			continue;
		rc = read_exact(c, txn, src, v, i, c->raw);
		if (rc == 0)
			rc = keep_exact_copy(c, L, txn, v, i, refs, map);
		if (rc < 0)
			break;
		memcpy(sk->buf + sk->len, c->raw, lc->len);
		if (sk->nseg && sk->seg[sk->nseg - 1].off + sk->seg[sk->nseg - 1].len == lc->off)
			sk->seg[sk->nseg - 1].len += lc->len;
		else
			sk->seg[sk->nseg++] = (struct seg){ .off = lc->off, .len = lc->len, .at = sk->len };
		sk->len += lc->len;
	}
	return rc;
}

/* Storage k's exact bytes, chunk by chunk from first: max |x|, the CRC,
 * the recorded hash (from a raw file), kept in L->hold when they fit. */
static int scan_storage(struct compact *c, struct lossy *L, MDB_txn *txn, const struct src *src, const struct fver *v,
			size_t first, size_t last, struct stor *st, int *held)
{
	const struct ck_storage_info *s = v->lay.c[first].storage;
	XXH3_state_t *xs = XXH3_createState();
	uint64_t at = 0;
	int rc = 0;

	if (!xs)
		return ck_fail(c->err, ENOMEM, "out of memory");
	*held = s->length <= HOLD_MAX;
	if (*held && L->hold_cap < s->length) {
		uint8_t *h = realloc(L->hold, s->length);

		if (!h)
			*held = 0;
		else
			L->hold = h, L->hold_cap = s->length;
	}
	XXH3_128bits_reset(xs);
	st->crc_old = 0;
	st->max_abs = 0;
	for (size_t i = first; i <= last && rc == 0; i++) {
		const struct ck_layout_chunk *lc = &v->lay.c[i];
		uint8_t *dst = *held ? L->hold + at : c->raw;
		double m;

		rc = read_exact(c, txn, src, v, i, dst);
		if (rc < 0)
			break;
		XXH3_128bits_update(xs, dst, lc->len);
		st->crc_old = ck_crc32(st->crc_old, dst, lc->len);
		m = st->eligible ? ck_lossy_maxabs(dst, lc->len, st->dt) : 0;
		if (m > st->max_abs)
			st->max_abs = m;
		at += lc->len;
	}
	if (rc == 0 && src->fd >= 0) {
		XXH128_hash_t d = XXH3_128bits_digest(xs);

		if (d.low64 != s->hash_lo || d.high64 != s->hash_hi)
			rc = ck_fail(c->err, EIO, "%s: storage %s does not hash as recorded (damaged)", v->f->src_path,
				     s->key);
	}
	XXH3_freeState(xs);
	return rc;
}

/* Codes one file version: its storages chosen, each scanned then coded
 * chunk by chunk (lossily or exactly), then the bytes between them with
 * the CRCs of changed records patched.  Fills map (packed, and lossy when
 * some storage was coded so).  0, or -errno with c->err. */
static int lossy_file(struct compact *c, struct lossy *L, MDB_txn *txn, size_t at, const struct fver *v,
		      const struct ck_fmap *exact, const struct refs *refs, struct ck_fmap *map)
{
	struct src src = { .fd = -1, .exact = exact && (exact->flags & CK_FMAP_PACKED) ? exact : NULL };
	struct stor *st = calloc(v->ns ? v->ns : 1, sizeof(*st));
	struct skel sk = { 0 };
	struct ck_error why = { { 0 } };
	int zipped = v->f->kind == CK_FILE_TORCH || v->f->kind == CK_FILE_OTHER, rc;

	memset(map, 0, sizeof(*map));
	map->flags = CK_FMAP_PACKED;
	map->size = v->f->size;
	map->nchunks = (uint32_t)v->lay.n;
	map->chunks = calloc(v->lay.n ? v->lay.n : 1, sizeof(*map->chunks));
	if (!st || !map->chunks) {
		rc = ck_fail(c->err, ENOMEM, "out of memory");
		goto out;
	}
	if (!src.exact) {
		struct ck_file_info now = *v->f;

		rc = ck_store_file_check(c->st, &now, 0, &why);   /* a copied store's file too */
		if (rc < 0) {
			ck_fail(c->err, -rc, "%s", why.msg);
			goto out;
		}
		src.fd = open(v->f->src_path, O_RDONLY | O_CLOEXEC);
		if (src.fd < 0) {
			rc = ck_fail(c->err, errno, "%s: %s", v->f->src_path, strerror(errno));
			goto out;
		}
	}
	rc = choose_storages(c, L, at, v, st);
	if (rc < 0) {
		ck_fail(c->err, -rc, "%s: %s", v->f->src_path, strerror(-rc));
		goto out;
	}
	rc = read_skeleton(c, L, txn, &src, v, refs, map, &sk);
	for (size_t k = 0; k < v->ns && rc == 0 && zipped; k++)
		if (st[k].eligible) {
			find_record(&sk, &v->s[k], &st[k]);
			st[k].eligible = st[k].zip;
		}
	/* Storages in file order, each scanned, then coded. */
	for (size_t i = 0; i < v->lay.n && rc == 0;) {
		const struct ck_layout_chunk *lc = &v->lay.c[i];
		size_t last = i, k;
		struct stor *s;
		int held = 0;
		uint64_t at2 = 0;

		if (!lc->key) {
			i++;
			continue;
		}
		while (last + 1 < v->lay.n && v->lay.c[last + 1].key == lc->key && v->lay.c[last + 1].index > 0 &&
		       v->lay.c[last + 1].index < CK_LAYOUT_GAP)
			last++;
		k = (size_t)(lc->storage - v->s);
		s = &st[k];
		rc = scan_storage(c, L, txn, &src, v, i, last, s, &held);
		if (rc == 0 && s->eligible) {
			/* nothing to bound by, or a zip record whose CRC is not where it must be */
			const uint8_t *crc = s->zip ? record_crc(&sk, &v->s[k], s) : NULL;

			if (!(s->max_abs > 0) || (s->zip && (!crc || ck_le32(crc) != s->crc_old)))
				s->eligible = 0;
		}
		s->crc_new = 0;
		for (size_t j = i; j <= last && rc == 0; j++) {
			const struct ck_layout_chunk *cj = &v->lay.c[j];

			if (held)
				memcpy(c->raw, L->hold + at2, cj->len);
			else
				rc = read_exact(c, txn, &src, v, j, c->raw);
			at2 += cj->len;
			if (rc == 0)
				rc = keep_exact_copy(c, L, txn, v, j, refs, map);
			if (rc == 0 && s->eligible)
				rc = lossy_chunk(c, L, txn, v, j, s, L->p->bound * s->max_abs, refs, map);
			else if (rc == 0)
				rc = 1;
			if (rc == 1) {
				if (s->eligible)
					s->crc_new = ck_crc32(s->crc_new, c->raw, cj->len);
				rc = exact_chunk(c, L, txn, v, j, refs, map);
			}
		}
		i = last + 1;
	}
	/* The CRCs of the records that changed, then the bytes between. */
	for (size_t k = 0; k < v->ns && rc == 0; k++) {
		uint8_t *crc;

		if (!st[k].coded || !st[k].zip)
			continue;
		crc = record_crc(&sk, &v->s[k], &st[k]);
		if (crc)
			ck_set_le32(crc, st[k].crc_new);
	}
	if (rc == 0 && zipped && (rc = patch_directory(&sk, v, st)) < 0)
		ck_fail(c->err, -rc, "%s: the zip's central directory does not name a coded record as expected",
			v->f->src_path);
	for (size_t i = 0, at3 = 0; i < v->lay.n && rc == 0; i++) {
		const struct ck_layout_chunk *lc = &v->lay.c[i];

		if (lc->key)
			continue;
		memcpy(c->raw, sk.buf + at3, lc->len);
		at3 += lc->len;
		rc = exact_chunk(c, L, txn, v, i, refs, map);
	}
	if (rc < 0)
		goto out;
	for (size_t k = 0; k < v->ns; k++)
		map->nlossy += st[k].coded;
	if (map->nlossy) {
		map->flags |= CK_FMAP_LOSSY;
		map->lossy_method = CK_LOSSY_METHOD;
		map->lossy_bound = L->p->bound;
		map->lossy = calloc(map->nlossy, sizeof(*map->lossy));
		if (!map->lossy) {
			rc = ck_fail(c->err, ENOMEM, "out of memory");
			goto out;
		}
		for (size_t k = 0, j = 0; k < v->ns; k++) {
			if (!st[k].coded)
				continue;
			map->lossy[j++] = (struct ck_lossy_storage){ .storage = (uint32_t)k, .dtype = st[k].dtype,
								     .max_abs = st[k].max_abs, .max_err = st[k].max_err };
			if (st[k].max_err / st[k].max_abs > L->rep.max_rel)
				L->rep.max_rel = st[k].max_err / st[k].max_abs;
		}
	}
out:
	if (src.fd >= 0)
		close(src.fd);
	free(sk.buf);
	free(sk.seg);
	free(st);
	if (rc < 0)
		ck_fmap_clear(map);
	return rc;
}

/* ---- one checkpoint ---- */

struct job {
	struct lossy *L;
	size_t at;          /* the checkpoint: L->ck[at] */
};

/* Between the pack's sync and the packmap: every lossy record written
 * for the checkpoint is read back from the pack and its chain decoded to
 * its hash, the hash of the bytes that were checked against the bound. */
static int read_back(struct compact *c, MDB_txn *txn, void *arg)
{
	struct lossy *L = arg;
	uint8_t *out = c->raw;

	for (size_t i = 0; i < L->nwritten; i++) {
		uint32_t len;
		int rc = ck_chunk_resolve(txn, c->st, &c->fds, &c->dec, c->recent, 0, L->written[i], out, &len, NULL,
					  c->err);

		if (rc < 0)
			return rc;
	}
	ck_compact_crash_point(c, "lossy-reread");
	return 0;
}

static int dry_keep(struct lossy *L, uint64_t file_id, struct ck_fmap *map)
{
	if (L->ndry == L->capdry) {
		size_t cap = L->capdry ? 2 * L->capdry : 64;
		void *g = realloc(L->dry, cap * sizeof(*L->dry));

		if (!g)
			return -ENOMEM;
		L->dry = g;
		L->capdry = cap;
	}
	L->dry[L->ndry].file_id = file_id;
	L->dry[L->ndry].map = *map;   /* taken over */
	L->ndry++;
	memset(map, 0, sizeof(*map));
	return 0;
}

/* A copy of the map a dry run made for file_id: 0, or -ENOENT. */
static int dry_map(const struct lossy *L, uint64_t file_id, struct ck_fmap *out)
{
	for (size_t i = L->ndry; i-- > 0;) {
		const struct ck_fmap *m = &L->dry[i].map;

		if (L->dry[i].file_id != file_id)
			continue;
		*out = *m;
		out->chunks = malloc((m->nchunks ? m->nchunks : 1) * sizeof(*m->chunks));
		out->lossy = malloc((m->nlossy ? m->nlossy : 1) * sizeof(*m->lossy));
		if (!out->chunks || !out->lossy) {
			ck_fmap_clear(out);
			return -ENOMEM;
		}
		memcpy(out->chunks, m->chunks, m->nchunks * sizeof(*m->chunks));
		memcpy(out->lossy, m->lossy, m->nlossy * sizeof(*m->lossy));
		return 0;
	}
	return -ENOENT;
}

static int usable_ref(const struct lossy *L, const struct ck_fmap *m, uint64_t ckpt_id)
{
	if (m->flags & CK_FMAP_LOSSY)
		return 1;
	/* An exact version the policy keeps for good: resting on it pins
	 * nothing that would go otherwise. */
	for (size_t j = 0; j < L->n; j++)
		if (L->ck[j].id == ckpt_id)
			return L->exact[j] && L->p->exact_every && L->ck[j].step >= 0 &&
			       (uint64_t)L->ck[j].step % L->p->exact_every == 0;
	return 0;
}

/* The versions of relpath in the older checkpoints' files of[k] (nearest
 * first) that serve as references: lossy ones (in the index, or made by
 * this dry run), or exact ones kept for good. */
static void lossy_refs(struct compact *c, struct lossy *L, MDB_txn *txn, struct ck_file_info *const *of,
		       const size_t *on, size_t nolder, const char *relpath, struct refs *r)
{
	r->n = 0;
	for (size_t k = 0; k < nolder && r->n < NEWER_MAX; k++) {
		const struct ck_file_info *g = NULL;
		int rc;

		for (size_t i = 0; i < on[k] && !g; i++)
			if (strcmp(of[k][i].relpath, relpath) == 0)
				g = &of[k][i];
		if (!g || !ck_file_kind_has_bytes(g->kind) || ck_compact_fver_load(c->st, g, &r->v[r->n]) < 0)
			continue;
		rc = c->dry ? dry_map(L, g->id, &r->m[r->n]) : -ENOENT;
		if (rc == -ENOENT)
			rc = ck_fmap_lookup(txn, c->st, g->id, &r->m[r->n]);
		if (rc == 0 && r->m[r->n].nchunks == r->v[r->n].lay.n && ck_layout_index(&r->v[r->n].lay) == 0 &&
		    usable_ref(L, &r->m[r->n], g->ckpt_id)) {
			r->n++;
			continue;
		}
		if (rc == 0)
			ck_fmap_clear(&r->m[r->n]);
		ck_compact_fver_clear(&r->v[r->n]);
	}
}

static int lossy_checkpoint(struct compact *c, void *arg)
{
	struct job *jb = arg;
	struct lossy *L = jb->L;
	const struct ck_ckpt_info *ck = &L->ck[jb->at];
	const struct ck_ckpt_info *older[NEWER_MAX];
	size_t nolder = 0, changed = 0;
	struct ckpt_job j;
	int rc;

	L->nwritten = 0;
	memset(&L->rep, 0, sizeof(L->rep));
	/* The older checkpoints, nearest first: the references. */
	for (size_t k = jb->at; k-- > 0 && nolder < NEWER_MAX;)
		older[nolder++] = &L->ck[k];
	rc = ck_compact_job_begin(c, ck, older, nolder, &j);
	for (size_t i = 0; i < j.n && rc == 0 && !(c->o->stop && *c->o->stop); i++) {
		const struct ck_file_info *f = &j.f[i];
		struct refs refs = { .n = 0 };
		struct ck_fmap old = { 0 }, map;
		struct fver v;
		int have;

		if (!ck_file_kind_has_bytes(f->kind))
			continue;
		rc = ck_fmap_lookup(j.txn, c->st, f->id, &old);
		have = rc == 0;
		if (rc < 0 && rc != -ENOENT) {
			rc = ck_fail(c->err, -rc, "index: file map: %s", strerror(-rc));
			break;
		}
		rc = 0;
		if (have && (old.flags & CK_FMAP_LOSSY)) {
			ck_fmap_clear(&old);
			continue;   /* coded already: its original is gone */
		}
		rc = ck_compact_fver_load(c->st, f, &v);
		if (rc < 0) {
			ck_fmap_clear(&old);
			rc = ck_fail(c->err, -rc, "%s: %s", f->src_path, strerror(-rc));
			break;
		}
		lossy_refs(c, L, j.txn, j.rf, j.rn, j.nrefs, f->relpath, &refs);
		rc = lossy_file(c, L, j.txn, jb->at, &v, have ? &old : NULL, &refs, &map);
		if (rc == 0 && have && (old.flags & CK_FMAP_PACKED) && !(map.flags & CK_FMAP_LOSSY)) {
			ck_fmap_clear(&map);   /* packed exactly already, nothing to code */
		} else if (rc == 0) {
			if (!c->dry)
				rc = ck_compact_put_fmap(j.txn, c->st, f->id, &map);
			if (rc < 0)
				ck_fail(c->err, -rc, "index: %s", strerror(-rc));
			c->s.files++;
			c->s.logical_bytes += f->size;
			c->s.chunks += map.nchunks;
			if (map.flags & CK_FMAP_LOSSY) {
				c->s.lossy_files++;
				c->s.lossy_logical += f->size;
				L->rep.files++;
				L->rep.storages += map.nlossy;
			}
			L->rep.logical_bytes += f->size;
			L->rep.before_bytes += have && (old.flags & CK_FMAP_PACKED) ? old.stored_bytes : f->size;
			L->rep.after_bytes += map.stored_bytes;
			if (c->dry && (map.flags & CK_FMAP_LOSSY) && dry_keep(L, f->id, &map) < 0)
				rc = ck_fail(c->err, ENOMEM, "out of memory");
			ck_fmap_clear(&map);
			changed++;
		}
		ck_fmap_clear(&old);
		ck_compact_refs_clear(&refs);
		ck_compact_fver_clear(&v);
		if (rc == 0 && c->progress)
			c->progress(c->pctx, ck->series, ck->name, f->relpath, &c->s);
	}
	if (rc == 0 && changed && !c->dry) {
		rc = ck_compact_commit(c, j.txn, ck, j.f, j.n, "lossy", read_back, L);
		j.txn = NULL;
	}
	if (rc == 0 && changed && c->o->lossy_report) {
		L->rep.series = ck->series;
		L->rep.ckpt = ck->name;
		L->rep.step = ck->step;
		L->rep.bound = L->p->bound;
		c->o->lossy_report(c->o->lossy_report_ctx, &L->rep);
	}
	ck_compact_job_end(&j);
	return rc;
}

/* ---- the series ---- */

/* Which live checkpoints the policy keeps exact. */
static void keep_exact(const struct ck_ckpt_info *ck, size_t n, const struct ck_lossy_policy *p, unsigned char *exact)
{
	size_t kept = 0;

	for (size_t i = n; i-- > 0;) {
		exact[i] = 0;
		if (ck[i].deleted)
			continue;
		if (kept < p->keep_newest || (p->exact_every && ck[i].step >= 0 &&
					      (uint64_t)ck[i].step % p->exact_every == 0))
			exact[i] = 1;
		kept++;
	}
}

int ck_compact_lossy_plan(struct compact *c, const struct ck_ckpt_info *ck, size_t n, const struct ck_lossy_policy *p,
			  unsigned char *candidate)
{
	unsigned char *exact = calloc(n ? n : 1, 1);
	size_t newest = n;
	int rc = ck_lossy_policy_check(p, c->err);

	if (!exact)
		return ck_fail(c->err, ENOMEM, "out of memory");
	if (rc == 0) {
		keep_exact(ck, n, p, exact);
		for (size_t i = 0; i < n; i++)
			if (!ck[i].deleted)
				newest = i;
		/* Every checkpoint older than the newest that is not kept exact;
		 * deleted ones too (their files stay while newer composites use them). */
		for (size_t i = 0; i < n; i++)
			candidate[i] = i < newest && newest < n && !exact[i];
	}
	free(exact);
	return rc;
}

void ck_compact_lossy_series(struct compact *c, const struct ck_ckpt_info *ck, size_t n,
			     const struct ck_lossy_policy *p, const unsigned char *candidate)
{
	struct lossy L = { .ck = ck, .n = n, .p = p, .candidate = candidate };

	L.exact = calloc(n ? n : 1, 1);
	L.decoded = malloc(CK_CHUNK_MAX);
	if (!L.exact || !L.decoded) {
		ck_fail(c->err, ENOMEM, "out of memory");
		if (!c->first_rc)
			c->first_rc = -ENOMEM;
		goto out;
	}
	keep_exact(ck, n, p, L.exact);
	for (size_t i = 0; i < n && !(c->o->stop && *c->o->stop); i++) {
		struct job j = { &L, i };
		int rc;

		if (!candidate[i])
			continue;
		rc = ck_compact_locked(c, lossy_checkpoint, &j);
		if (rc < 0)
			ck_compact_note_failure(c, &ck[i], rc);
	}
out:
	free(L.exact);
	free(L.decoded);
	free(L.hold);
	free(L.written);
	free(L.made.v);
	for (size_t i = 0; i < L.ndry; i++)
		ck_fmap_clear(&L.dry[i].map);
	free(L.dry);
}
