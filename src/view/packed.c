/* Physical files served from the packed store (include/ckptfs/packstore.h).
 *
 * Compaction moves committed file versions into packs and may remove their
 * raw files.  The view learns which versions are packed at open and at
 * every refresh, and from then on reads them only through the pack: the
 * bytes are the same, so composites built on the raw file stay valid, and
 * a raw file removed afterwards breaks nothing.  Packed chunks are checked
 * against their hash on every decode, so they skip the first-read range
 * verification of raw files.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "ckptfs/packstore.h"
#include "load_order.h"
#include "view_internal.h"

/* How far ahead of a forward reader chunks are decoded. */
#define PREFETCH_AHEAD (8ull << 20)
/* A read starting this close to where the previous one ended counts as
 * going forward (the kernel's readahead requests arrive slightly out of
 * order from several threads). */
#define SEQUENTIAL_SLACK (4ull << 20)

struct ck_vpacked {
	struct ck_view *v;
	struct ck_packed_file *file;
	struct phys_file *pf;           /* for messages, and its storage ranges */
	_Atomic uint64_t next;          /* end of the latest read */
	/* Per storage range of pf (offset order): the range a loader reads
	 * after it (load_order_succ); NULL when the ranges are not known. */
	uint32_t *succ;
};

static int probe(struct ck_view *v, struct phys_file *pf)
{
	struct ck_file_pack_info pi;
	int rc;

	if (atomic_load(&pf->packed_known))
		return 1;
	if (atomic_load(&pf->raw_pinned))
		return 0;
	rc = ck_store_file_pack_info(v->store, pf->info.id, &pi);
	if (rc < 0 || !pi.packed)
		return rc;
	/* Decided under the lock phys_open_fd opens the raw file under. */
	pthread_mutex_lock(&v->lock);
	if (pi.lossy && pf->fd >= 0)
		atomic_store(&pf->raw_pinned, 1);
	else
		atomic_store(&pf->packed_known, 1);
	pthread_mutex_unlock(&v->lock);
	return atomic_load(&pf->packed_known);
}

int packed_setup(struct ck_view *v)
{
	uint64_t bytes = v->opts.cache_bytes ? v->opts.cache_bytes : CK_VIEW_DEFAULT_CACHE;
	int rc = ck_chunk_cache_new(bytes, &v->cache);

	return rc ? rc : packed_probe_all(v);
}

void packed_teardown(struct ck_view *v)
{
	if (v->cache)
		ck_chunk_cache_free(v->cache);
	v->cache = NULL;
}

int packed_probe_all(struct ck_view *v)
{
	int rc = 0;

	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; i < v->nphys && rc >= 0; i++)
		rc = probe(v, v->phys[i]);
	pthread_rwlock_unlock(&v->ns_lock);
	return rc < 0 ? rc : 0;
}

static const char *pf_name(const struct phys_file *pf)
{
	return pf->info.relpath[0] ? pf->info.relpath : pf->ckpt->info.name;
}

int packed_get(struct ck_view *v, struct phys_file *pf, struct ck_vpacked **out)
{
	struct ck_vpacked *p = atomic_load(&pf->packed);
	struct ck_error err = { { 0 } };
	int rc = 0;

	if (!p && !atomic_load(&pf->packed_known))
		return 0;
	if (!p) {
		/* Its storage ranges, for prefetch in load order (best effort). */
		int ranges = phys_load_ranges(v, pf) == 0;

		pthread_mutex_lock(&v->lock);
		p = atomic_load(&pf->packed);
		if (!p) {
			p = calloc(1, sizeof(*p));
			rc = p ? ck_packed_open(v->store, pf->info.id, v->cache, &p->file, &err) : -ENOMEM;
			if (rc) {
				/* Not remembered: a later open tries again. */
				ck_err("%s/%s: cannot open its packed form: %s", pf->ckpt->info.name,
				       pf_name(pf), ck_error_text(&err, rc));
				free(p);
				p = NULL;
				rc = -EIO;
			} else {
				p->v = v;
				p->pf = pf;
				p->succ = ranges ? load_order_succ(pf->ranges, pf->nranges) : NULL;
				atomic_store(&pf->packed, p);
			}
		}
		pthread_mutex_unlock(&v->lock);
		if (rc)
			return rc;
	}
	if (out)
		*out = p;
	return 1;
}

int packed_recheck(struct ck_view *v, struct phys_file *pf)
{
	int rc;

	/* Compaction elsewhere may have packed it and removed the raw file
	 * since this index last looked. */
	if (!atomic_load(&pf->packed_known))
		ck_store_follow(v->store, NULL, NULL);
	rc = probe(v, pf);

	return rc > 0 ? packed_get(v, pf, NULL) : rc;
}

/* The tensor (storage key) whose bytes hold off, for messages. */
static const char *tensor_at(const struct phys_file *pf, uint64_t off)
{
	for (size_t i = 0; i < pf->nranges; i++)
		if (off >= pf->ranges[i].offset && off - pf->ranges[i].offset < pf->ranges[i].length)
			return pf->ranges[i].key;
	return NULL;
}

static void report(const struct ck_vpacked *p, uint64_t off, size_t len, const char *why)
{
	const char *tensor = tensor_at(p->pf, off);

	ck_err("%s/%s: %s%s%sbytes %" PRIu64 "+%zu of the packed file: %s; refusing to serve them",
	       p->pf->ckpt->info.name, pf_name(p->pf), tensor ? "tensor '" : "", tensor ? tensor : "",
	       tensor ? "', " : "", off, len, why);
}

static int decode(struct ck_vpacked *p, void *buf, size_t len, uint64_t off)
{
	struct ck_error err = { { 0 } };
	ssize_t got = ck_packed_pread(p->file, buf, len, off, &err);
	int changed = 0;

	if (got == (ssize_t)len)
		return 0;
	/* A sweep (on another node, perhaps) moved the chunks since this index
	 * last looked: learn where they are now, and try once more. */
	if (ck_store_follow(p->v->store, &changed, NULL) == 0 && changed) {
		memset(&err, 0, sizeof(err));
		got = ck_packed_pread(p->file, buf, len, off, &err);
		if (got == (ssize_t)len)
			return 0;
	}
	if (got >= 0)
		ck_fail(&err, EIO, "the packed file ends at %" PRIu64, off + (uint64_t)got);
	report(p, off, len, ck_error_text(&err, (int)got));
	return -EIO;
}

/* Ranges a loader takes next (load_order_ahead), at most 64 at once. */
#define AHEAD_RANGES 64

int packed_read(struct ck_vpacked *p, void *buf, size_t len, uint64_t off, int ahead)
{
	struct ck_byte_range next[AHEAD_RANGES];
	uint64_t last;
	size_t n;

	if (!ahead)
		return decode(p, buf, len, off);
	/* Forward readers get the next chunks decoded ahead, in parallel
	 * with this decode and the kernel's handling of the reply: in the
	 * order a loader takes the file's storages when they are known (a
	 * jump to the next of them counts as going forward), else in file
	 * order. */
	last = atomic_exchange(&p->next, off + len);
	n = load_order_ahead(p->pf->ranges, p->pf->nranges, p->succ, off + len, PREFETCH_AHEAD, next,
			     AHEAD_RANGES);
	if (n)
		ck_packed_prefetch_ranges(p->file, next, n);
	else if (off + SEQUENTIAL_SLACK >= last && off <= last + SEQUENTIAL_SLACK)
		ck_packed_prefetch(p->file, off + len, PREFETCH_AHEAD);
	return decode(p, buf, len, off);
}

void packed_hint(struct ck_vpacked *p, const struct ck_byte_range *r, size_t n)
{
	if (n)
		ck_packed_prefetch_ranges(p->file, r, n);
}

/* Compaction cuts chunks at every storage's start and end, so the bytes
 * between storages (zip local headers, names, padding) decode on their
 * own, small: parsing an older packed version for a composite costs
 * kilobytes, not the whole file.  A range that does not hold what the
 * index says makes the parse fail (EIO), never the served bytes wrong:
 * those are read with packed_read.  No prefetch: the tensor bytes ahead
 * are not wanted. */
int packed_read_headers(struct ck_vpacked *p, const struct phys_range *r, size_t n, void *buf,
			size_t len, uint64_t off)
{
	uint8_t *out = buf;
	uint64_t end = off + len;
	int rc = 0;

	for (size_t i = 0; i < n && off < end && !rc; i++) {
		uint64_t a = r[i].offset, b = r[i].offset + r[i].length;

		if (b <= off || a >= end)
			continue;
		if (a > off) {
			rc = decode(p, out, a - off, off);
			out += a - off;
			off = a;
		}
		if (!rc) {
			uint64_t skip = (b < end ? b : end) - off;

			memset(out, 0, skip);
			out += skip;
			off += skip;
		}
	}
	if (!rc && off < end)
		rc = decode(p, out, end - off, off);
	return rc;
}

void packed_free(struct ck_vpacked *p)
{
	if (!p)
		return;
	ck_packed_close(p->file);
	free(p->succ);
	free(p);
}

int ck_extent_read(const struct ck_extent *e, void *buf)
{
	if (e->mem) {
		memcpy(buf, e->mem, e->len);
		return 0;
	}
	if (e->packed)
		return packed_read(e->packed, buf, e->len, e->fd_off, !e->hinted);
	return ck_pread_full(e->fd, buf, (size_t)e->len, e->fd_off);
}

uint64_t ck_view_generation(struct ck_view *v)
{
	uint64_t n = 0;

	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; i < v->nseries; i++)
		n += v->series[i]->nckpts;
	pthread_rwlock_unlock(&v->ns_lock);
	return n;
}
