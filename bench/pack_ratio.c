/* pack_ratio: how small the packed store makes a series of checkpoints.
 *
 *   pack_ratio [--anchor K] [--star | --skip] [--codecs LIST] [--level N] [--exhaustive 0|1] [--base CKPT_DIR] SERIES_DIR
 *   pack_ratio --decode K [--decode-mb N] SERIES_DIR
 *   pack_ratio --planes
 *
 * SERIES_DIR holds one directory per checkpoint (taken in name order);
 * every file in them is read as the store would: torch.save zips through
 * the torch-zip reader, the pickle VM and the tensor walk, safetensors
 * through their header parser, anything else as opaque bytes.  Each
 * storage is cut into 1 MiB chunks; a chunk whose XXH3-128 was seen before
 * is not stored again (dedup); a new chunk is encoded with the chunk codec
 * against the same chunk of the last earlier version of the same tensor
 * (the storage's first tensor path names it), except that every K-th version of
 * a tensor is an anchor encoded without a reference (--anchor K; 0: only
 * the first).  --star makes every delta reference its group's anchor
 * instead of the version before it (depth 1 for any version, at the cost
 * of deltas across up to K-1 saves).  --skip makes the versions at odd
 * positions of a group reference its anchor and the others the version
 * before them: at most two deltas deep (K <= 5), at the cost of one delta
 * across three saves per group of five.  Bytes that are not tensor data (zip headers, pickles, json)
 * count zstd-compressed.  Each record costs its pack header too.  --base
 * names a checkpoint already in the store (the one a fine-tune resumed
 * from): its chunks dedup and serve as references but are not counted.
 *
 * Prints one line of key=value pairs: logical and physical bytes, the
 * ratio and its factors (dedup, compression of new chunks on their own,
 * what deltas add on top), chunks per codec, and compaction throughput in
 * MB/s of logical tensor bytes per CPU second (hashing and encoding on one
 * thread; reading and parsing the files not counted).
 *
 * --decode K measures decoding instead: the first K+1 checkpoints (at most
 * --decode-mb MiB of chunks from each, default 64) are encoded as an
 * anchor and K deltas, then the anchor alone and the whole chain are
 * decoded and timed (MB/s of the bytes rebuilt, one thread).  --planes
 * times byte plane split and join for 2-, 4- and 8-byte elements.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <zstd.h>

#include "ckptfs/chunk.h"
#include "ckptfs/pack.h"
#include "ckptfs/pickle.h"
#include "ckptfs/safetensors.h"
#include "ckptfs/torchzip.h"
#include "ckptfs/walk.h"

/* One storage (or safetensors tensor) of one checkpoint file. */
struct blob {
	char *ident;            /* "file:tensor path": the same tensor in every version */
	unsigned es;            /* element size */
	const uint8_t *p;
	size_t len;
};

struct version {
	uint8_t **files;
	size_t nfiles;
	struct blob *blobs;
	size_t nblobs, cap;
	uint64_t logical;       /* file bytes */
	uint64_t tensor;        /* of which tensor data */
	uint64_t nontensor_z;   /* the rest, zstd-compressed */
};

struct stats {
	uint64_t logical, tensor, nontensor_z;
	uint64_t chunks, unique_chunks, unique_raw;
	uint64_t alone;                 /* unique chunks encoded without references */
	uint64_t payload, records, headers;   /* what the pack holds */
	uint64_t n[CK_CODEC__COUNT], raw[CK_CODEC__COUNT], enc[CK_CODEC__COUNT];
	double cpu;
	size_t versions;
};

static void die(const char *what, int rc)
{
	fprintf(stderr, "pack_ratio: %s: %s\n", what, rc ? strerror(rc < 0 ? -rc : rc) : "failed");
	exit(1);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		die("malloc", ENOMEM);
	return p;
}

static double cpu_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	uint8_t *p;

	if (!f || fstat(fileno(f), &st) < 0)
		die(path, errno);
	p = xmalloc((size_t)st.st_size);
	if (fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
		die(path, EIO);
	fclose(f);
	*len = (size_t)st.st_size;
	return p;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in dir (no dot files), sorted; *n of them. */
static char **list_dir(const char *dir, size_t *n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t cap = 0;

	if (!d)
		die(dir, errno);
	*n = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 32;
			names = realloc(names, cap * sizeof(*names));
			if (!names)
				die("realloc", ENOMEM);
		}
		names[(*n)++] = strdup(e->d_name);
	}
	closedir(d);
	if (*n)
		qsort(names, *n, sizeof(*names), cmp_str);
	return names;
}

static void add_blob(struct version *v, const char *file, const char *name, unsigned es,
		     const uint8_t *p, size_t len)
{
	struct blob *b;
	size_t n = strlen(file) + strlen(name) + 2;

	if (v->nblobs == v->cap) {
		v->cap = v->cap ? 2 * v->cap : 256;
		v->blobs = realloc(v->blobs, v->cap * sizeof(*v->blobs));
		if (!v->blobs)
			die("realloc", ENOMEM);
	}
	b = &v->blobs[v->nblobs++];
	b->ident = xmalloc(n);
	snprintf(b->ident, n, "%s:%s", file, name);
	b->es = es == 1 || es == 2 || es == 4 || es == 8 ? es : 1;
	b->p = p;
	b->len = len;
	v->tensor += len;
}

struct range {
	uint64_t begin, end;
};

static int cmp_range(const void *a, const void *b)
{
	const struct range *x = a, *y = b;

	return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* zstd size of the file's bytes outside the tensor ranges. */
static uint64_t nontensor_size(const uint8_t *p, size_t len, struct range *r, size_t nr)
{
	uint8_t *rest = xmalloc(len), *z;
	size_t n = 0, at = 0, bound, got;

	if (nr)
		qsort(r, nr, sizeof(*r), cmp_range);
	for (size_t i = 0; i < nr; i++) {
		if (r[i].begin > at) {
			memcpy(rest + n, p + at, r[i].begin - at);
			n += r[i].begin - at;
		}
		if (r[i].end > at)
			at = r[i].end;
	}
	memcpy(rest + n, p + at, len - at);
	n += len - at;
	bound = ZSTD_compressBound(n);
	z = xmalloc(bound);
	got = ZSTD_compress(z, bound, rest, n, 3);
	if (ZSTD_isError(got))
		die("zstd", EINVAL);
	free(rest);
	free(z);
	return got;
}

struct mem {
	const uint8_t *p;
	size_t len;
};

static int mem_pread(void *ctx, void *buf, size_t len, uint64_t off)
{
	const struct mem *m = ctx;

	if (off > m->len || len > m->len - off)
		return -EIO;
	memcpy(buf, m->p + off, len);
	return 0;
}

static int name_storage(void *ctx, const char *path, const struct pk_node *node, const struct pk_tensor *t)
{
	if (!t->storage->user)
		t->storage->user = strdup(path[0] ? path : "(root)");
	return 0;
}

/* A torch.save zip: its storages become blobs; 0, or -1 if it is not one. */
static int load_torch(struct version *v, const char *file, const uint8_t *p, size_t len)
{
	struct mem m = { p, len };
	struct tz_archive ar = { 0 };
	struct pk_doc *doc = NULL;
	const struct tz_entry *pkl;
	struct ck_error err;
	struct range *r;
	size_t nr = 0;

	if (!tz_is_zip(p, len) || tz_read(mem_pread, &m, len, &ar, &err))
		return -1;
	pkl = tz_find(&ar, "data.pkl");
	if (!pkl || pkl->method || pk_parse(p + pkl->data_offset, pkl->size, NULL, &doc, &err)) {
		tz_archive_free(&ar);
		return -1;
	}
	if (ck_walk_tensors(pk_doc_root(doc), name_storage, NULL))
		die(file, EINVAL);
	r = xmalloc(pk_doc_nstorages(doc) * sizeof(*r));
	for (size_t i = 0; i < pk_doc_nstorages(doc); i++) {
		struct pk_storage *s = pk_doc_storage(doc, i);
		char rec[256], alt[300];
		const struct tz_entry *e;

		snprintf(rec, sizeof(rec), "data/%s", s->key);
		e = tz_find(&ar, rec);
		if (!e || e->method)
			continue;
		snprintf(alt, sizeof(alt), "storage/%s", s->key);
		add_blob(v, file, s->user ? (const char *)s->user : alt, (unsigned)ck_dtype_size(s->dtype),
			 p + e->data_offset, e->size);
		r[nr++] = (struct range){ e->data_offset, e->data_offset + e->size };
		free(s->user);
		s->user = NULL;
	}
	v->nontensor_z += nontensor_size(p, len, r, nr);
	free(r);
	pk_doc_free(doc);
	tz_archive_free(&ar);
	return 0;
}

static int load_safetensors(struct version *v, const char *file, const uint8_t *p, size_t len)
{
	struct st_file f = { 0 };
	struct ck_error err;
	struct range *r;
	uint64_t n;

	if (len < 8 || st_header_len(p, len, &n, &err) || st_parse((const char *)p + 8, n, len, &f, &err))
		return -1;
	r = xmalloc(f.n * sizeof(*r));
	for (size_t i = 0; i < f.n; i++) {
		const struct st_tensor *t = &f.tensors[i];

		add_blob(v, file, t->name, (unsigned)ck_dtype_size(t->dtype), p + f.data_start + t->begin,
			 t->end - t->begin);
		r[i] = (struct range){ f.data_start + t->begin, f.data_start + t->end };
	}
	v->nontensor_z += nontensor_size(p, len, r, f.n);
	free(r);
	st_file_free(&f);
	return 0;
}

static void load_version(const char *dir, struct version *v)
{
	size_t n;
	char **names = list_dir(dir, &n);

	memset(v, 0, sizeof(*v));
	v->files = xmalloc(n * sizeof(*v->files));
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		size_t len;
		uint8_t *p;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		p = slurp(path, &len);
		v->files[v->nfiles++] = p;
		v->logical += len;
		if (load_torch(v, names[i], p, len) && load_safetensors(v, names[i], p, len))
			v->nontensor_z += nontensor_size(p, len, NULL, 0);
		free(names[i]);
	}
	free(names);
}

static void free_version(struct version *v)
{
	for (size_t i = 0; i < v->nfiles; i++)
		free(v->files[i]);
	for (size_t i = 0; i < v->nblobs; i++)
		free(v->blobs[i].ident);
	free(v->files);
	free(v->blobs);
	memset(v, 0, sizeof(*v));
}

/* A version's blob of a tensor, by name. */
static const struct blob *find_blob(const struct version *v, const char *ident)
{
	for (size_t i = 0; i < v->nblobs; i++)
		if (strcmp(v->blobs[i].ident, ident) == 0)
			return &v->blobs[i];
	return NULL;
}

/* What the store knows of each tensor: how many of its versions it has
 * seen (anchors every K-th) and the bytes of the last one, a delta's
 * reference: the neighbouring stored version, also when the tensor was
 * left out of some saves (LLMTailor). */
struct tensor_hist {
	char *ident;
	unsigned count;
	uint8_t *last;
	size_t last_len;
	uint8_t *anc;           /* --skip: the group's anchor */
	size_t anc_len;
};

struct history {
	struct tensor_hist *t;
	size_t n, cap;
};

static struct tensor_hist *hist_find(struct history *h, const char *ident)
{
	for (size_t i = 0; i < h->n; i++)
		if (strcmp(h->t[i].ident, ident) == 0)
			return &h->t[i];
	if (h->n == h->cap) {
		h->cap = h->cap ? 2 * h->cap : 256;
		h->t = realloc(h->t, h->cap * sizeof(*h->t));
		if (!h->t)
			die("realloc", ENOMEM);
	}
	h->t[h->n] = (struct tensor_hist){ .ident = strdup(ident) };
	return &h->t[h->n++];
}

static void hist_free(struct history *h)
{
	for (size_t i = 0; i < h->n; i++) {
		free(h->t[i].ident);
		free(h->t[i].last);
		free(h->t[i].anc);
	}
	free(h->t);
}

/* Chunk hashes seen: open addressing on the low 64 bits. */
struct hashset {
	struct ck_hash128 *slot;
	size_t cap, n;
};

static int seen_before(struct hashset *s, struct ck_hash128 h)
{
	size_t i;

	if (2 * (s->n + 1) > s->cap) {
		struct hashset bigger = { NULL, s->cap ? 2 * s->cap : 4096, 0 };

		bigger.slot = calloc(bigger.cap, sizeof(*bigger.slot));
		if (!bigger.slot)
			die("calloc", ENOMEM);
		for (size_t j = 0; j < s->cap; j++)
			if (s->slot[j].hi || s->slot[j].lo)
				seen_before(&bigger, s->slot[j]);
		free(s->slot);
		*s = bigger;
	}
	for (i = h.lo & (s->cap - 1); s->slot[i].hi || s->slot[i].lo; i = (i + 1) & (s->cap - 1))
		if (ck_hash128_eq(s->slot[i], h))
			return 1;
	s->slot[i] = h;
	s->n++;
	return 0;
}

/* --star: every delta references its group's anchor, not its neighbour;
 * --skip: every other one does. */
static int star_refs, skip_refs;

static void keep_copy(uint8_t **p, size_t *len, const struct blob *b)
{
	free(*p);
	*p = xmalloc(b->len);
	memcpy(*p, b->p, b->len);
	*len = b->len;
}

static void pack_version(struct ck_chunk_ctx *ctx, struct ck_chunk_ctx *alone_ctx, const struct version *v,
			 struct history *hist, struct hashset *seen, unsigned anchor, int star, struct stats *st)
{
	for (size_t b = 0; b < v->nblobs; b++) {
		const struct blob *cur = &v->blobs[b];
		struct tensor_hist *th = hist_find(hist, cur->ident);
		unsigned nth = th->count++;
		int is_anchor = anchor ? nth % anchor == 0 : nth == 0;
		int to_anchor = skip_refs && anchor && nth % anchor % 2 == 1;
		const uint8_t *base = to_anchor ? th->anc : th->last;
		size_t base_len = to_anchor ? th->anc_len : th->last_len;

		for (size_t off = 0; off < cur->len || off == 0; off += CK_CHUNK_MAX) {
			size_t len = cur->len - off < CK_CHUNK_MAX ? cur->len - off : CK_CHUNK_MAX;
			const uint8_t *ref = NULL;
			struct ck_chunk_desc d;
			const uint8_t *payload;
			double t0 = cpu_now();
			struct ck_hash128 h = ck_chunk_hash(cur->p + off, len);
			int dup;

			st->chunks++;
			dup = seen_before(seen, h);
			if (!dup) {
				if (!is_anchor && base && base_len >= off + len)
					ref = base + off;
				if (ck_chunk_encode(ctx, cur->p + off, len, cur->es, ref, ref ? len : 0, &d, &payload))
					die(cur->ident, EINVAL);
			}
			st->cpu += cpu_now() - t0;
			if (dup) {
				if (len == 0)
					break;
				continue;
			}
			st->unique_chunks++;
			st->unique_raw += len;
			st->records++;
			st->payload += d.enc_len;
			st->headers += ck_pack_rec_header_len(&d);
			st->n[d.codec]++;
			st->raw[d.codec] += len;
			st->enc[d.codec] += d.enc_len;
			if (ck_codec_needs_ref(d.codec)) {
				/* what this chunk would cost without its reference */
				struct ck_chunk_desc a;

				if (ck_chunk_encode(alone_ctx, cur->p + off, len, cur->es, NULL, 0, &a, &payload))
					die(cur->ident, EINVAL);
				st->alone += a.enc_len;
			} else {
				st->alone += d.enc_len;
			}
			if (len == 0)
				break;
		}
		if (is_anchor && skip_refs)
			keep_copy(&th->anc, &th->anc_len, cur);
		if (star && !is_anchor && th->last)
			continue;	/* deltas keep referencing their anchor */
		keep_copy(&th->last, &th->last_len, cur);
	}
}

static unsigned parse_codecs(const char *list)
{
	unsigned bits = 0;
	char *copy = strdup(list), *save = NULL;

	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int found = 0;

		for (int c = 0; c < CK_CODEC__COUNT; c++)
			if (strcmp(t, ck_codec_name(c)) == 0) {
				bits |= CK_CODEC_BIT(c);
				found = 1;
			}
		if (!found) {
			fprintf(stderr, "pack_ratio: unknown codec '%s'\n", t);
			exit(2);
		}
	}
	free(copy);
	return bits;
}

static void ratio_run(const char *series, char **names, size_t n, const char *base, unsigned anchor,
		      const struct ck_chunk_opts *opts)
{
	struct ck_chunk_ctx *ctx, *alone_ctx;
	struct ck_chunk_opts alone_opts = *opts;
	struct version cur;
	struct history hist = { 0 };
	struct hashset seen = { 0 };
	struct stats st = { 0 };
	uint64_t physical, tensor_phys;

	alone_opts.codecs = CK_CODEC_BIT(CK_CODEC_PLANES);
	if (ck_chunk_ctx_new(opts, &ctx) || ck_chunk_ctx_new(&alone_opts, &alone_ctx))
		die("chunk context", EINVAL);
	if (base) {
		/* already in the store: its chunks dedup and serve as references,
		 * but neither its bytes nor their cost count */
		struct stats ignored = { 0 };

		load_version(base, &cur);
		pack_version(ctx, alone_ctx, &cur, &hist, &seen, anchor, star_refs, &ignored);
		free_version(&cur);
	}
	for (size_t i = 0; i < n; i++) {
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s/%s", series, names[i]);
		load_version(dir, &cur);
		pack_version(ctx, alone_ctx, &cur, &hist, &seen, anchor, star_refs, &st);
		st.logical += cur.logical;
		st.tensor += cur.tensor;
		st.nontensor_z += cur.nontensor_z;
		st.versions++;
		free_version(&cur);
	}
	tensor_phys = st.payload + st.headers;
	physical = tensor_phys + st.nontensor_z;
	printf("pack_ratio series=%s anchor=%u versions=%zu logical=%llu physical=%llu ratio=%.3f"
	       " tensor=%llu unique=%llu alone=%llu payload=%llu nontensor_z=%llu"
	       " dedup=%.3f compress=%.3f delta=%.3f chunks=%llu unique_chunks=%llu",
	       series, anchor, st.versions, (unsigned long long)st.logical, (unsigned long long)physical,
	       (double)st.logical / (double)physical, (unsigned long long)st.tensor,
	       (unsigned long long)st.unique_raw, (unsigned long long)st.alone,
	       (unsigned long long)st.payload, (unsigned long long)st.nontensor_z,
	       (double)st.tensor / (double)(st.unique_raw ? st.unique_raw : 1),
	       (double)st.unique_raw / (double)(st.alone ? st.alone : 1),
	       (double)st.alone / (double)(st.payload ? st.payload : 1),
	       (unsigned long long)st.chunks, (unsigned long long)st.unique_chunks);
	for (int c = 0; c < CK_CODEC__COUNT; c++)
		printf(" %s=%llu/%.3f", ck_codec_name(c), (unsigned long long)st.n[c],
		       st.enc[c] ? (double)st.raw[c] / (double)st.enc[c] : 0.0);
	printf(" encode_mbps=%.0f\n", st.cpu > 0 ? (double)st.tensor / 1e6 / st.cpu : 0.0);
	hist_free(&hist);
	free(seen.slot);
	ck_chunk_ctx_free(ctx);
	ck_chunk_ctx_free(alone_ctx);
}

/* One chunk position through the chain: the anchor's and the deltas' payloads. */
struct link {
	struct ck_chunk_desc d;
	uint8_t *payload;
};

static void decode_run(const char *series, char **names, size_t n, unsigned k, size_t max_mb,
		       const struct ck_chunk_opts *opts)
{
	struct version *v = xmalloc((k + 1) * sizeof(*v));
	struct ck_chunk_ctx *ctx;
	struct link *chain;
	size_t nslots = 0, cap_slots = 0, bytes = 0;
	uint8_t *buf = xmalloc(CK_CHUNK_MAX);
	const uint8_t **want = NULL;
	struct ck_error err;
	double t0, t_anchor, t_chain;

	if (k + 1 > n) {
		fprintf(stderr, "pack_ratio: --decode %u needs %u checkpoints, %s has %zu\n", k, k + 1, series, n);
		exit(2);
	}
	if (ck_chunk_ctx_new(opts, &ctx))
		die("chunk context", EINVAL);
	for (unsigned i = 0; i <= k; i++) {
		char dir[4096];

		snprintf(dir, sizeof(dir), "%s/%s", series, names[i]);
		load_version(dir, &v[i]);
	}
	chain = NULL;
	/* slots: chunks of version 0's blobs present with the same length in all */
	for (size_t b = 0; b < v[0].nblobs && bytes < max_mb << 20; b++) {
		const struct blob *blobs[64];
		int ok = k < 64;

		for (unsigned i = 0; ok && i <= k; i++) {
			blobs[i] = find_blob(&v[i], v[0].blobs[b].ident);
			ok = blobs[i] && blobs[i]->len == v[0].blobs[b].len;
		}
		if (!ok)
			continue;
		for (size_t off = 0; off < blobs[0]->len && bytes < max_mb << 20; off += CK_CHUNK_MAX) {
			size_t len = blobs[0]->len - off < CK_CHUNK_MAX ? blobs[0]->len - off : CK_CHUNK_MAX;

			if (nslots == cap_slots) {
				cap_slots = cap_slots ? 2 * cap_slots : 256;
				chain = realloc(chain, cap_slots * (k + 1) * sizeof(*chain));
				want = realloc(want, cap_slots * sizeof(*want));
				if (!chain || !want)
					die("realloc", ENOMEM);
			}
			for (unsigned i = 0; i <= k; i++) {
				struct link *l = &chain[nslots * (k + 1) + i];
				const uint8_t *p;
				const uint8_t *r = i ? blobs[i - 1]->p + off : NULL;

				if (ck_chunk_encode(ctx, blobs[i]->p + off, len, blobs[i]->es, r, r ? len : 0, &l->d, &p))
					die("encode", EINVAL);
				l->payload = xmalloc(l->d.enc_len);
				memcpy(l->payload, p, l->d.enc_len);
			}
			want[nslots++] = blobs[k]->p + off;
			bytes += len;
		}
	}
	t0 = cpu_now();
	for (size_t s = 0; s < nslots; s++) {
		struct link *l = &chain[s * (k + 1)];

		if (ck_chunk_decode(ctx, &l->d, l->payload, NULL, 0, buf, &err))
			die(err.msg, EIO);
	}
	t_anchor = cpu_now() - t0;
	t_chain = 0;
	t0 = cpu_now();
	for (size_t s = 0; s < nslots; s++) {
		struct link *l = &chain[s * (k + 1)];

		if (ck_chunk_decode(ctx, &l[0].d, l[0].payload, NULL, 0, buf, &err))
			die(err.msg, EIO);
		/* each delta decoded over its reference, in place */
		for (unsigned i = 1; i <= k; i++)
			if (ck_chunk_decode(ctx, &l[i].d, l[i].payload, buf, l[i].d.raw_len, buf, &err))
				die(err.msg, EIO);
		t_chain += cpu_now() - t0;
		if (memcmp(buf, want[s], l[k].d.raw_len) != 0)
			die("chain rebuilt wrong bytes", EIO);
		for (unsigned i = 0; i <= k; i++)
			free(l[i].payload);
		t0 = cpu_now();
	}
	printf("pack_decode series=%s chain=%u bytes=%zu anchor_mbps=%.0f chain_mbps=%.0f\n", series, k, bytes,
	       (double)bytes / 1e6 / t_anchor, (double)bytes / 1e6 / t_chain);
	for (unsigned i = 0; i <= k; i++)
		free_version(&v[i]);
	free(v);
	free(chain);
	free(want);
	free(buf);
	ck_chunk_ctx_free(ctx);
}

/* Byte plane split and join speed (data-independent: pseudo-random bytes),
 * best of 5 rounds of 200 MiB each, one thread. */
static void planes_run(void)
{
	size_t n = CK_CHUNK_MAX;
	uint8_t *a = xmalloc(n), *b = xmalloc(n);
	uint64_t x = 88172645463325252ull;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		a[i] = (uint8_t)x;
	}
	for (unsigned es = 2; es <= 8; es *= 2) {
		double best_split = 0, best_join = 0;

		for (int round = 0; round < 5; round++) {
			double t0 = cpu_now(), t1, t2;

			for (int r = 0; r < 200; r++)
				ck_planes_split(a, n, es, b);
			t1 = cpu_now();
			for (int r = 0; r < 200; r++)
				ck_planes_join(b, n, es, a);
			t2 = cpu_now();
			if (200.0 * (double)n / 1e6 / (t1 - t0) > best_split)
				best_split = 200.0 * (double)n / 1e6 / (t1 - t0);
			if (200.0 * (double)n / 1e6 / (t2 - t1) > best_join)
				best_join = 200.0 * (double)n / 1e6 / (t2 - t1);
		}
		printf("pack_planes elem=%u split_mbps=%.0f join_mbps=%.0f\n", es, best_split, best_join);
	}
	free(a);
	free(b);
}

static void usage(void)
{
	fprintf(stderr, "usage: pack_ratio [--anchor K] [--star | --skip] [--codecs planes,xor,sub] [--level N] [--exhaustive 0|1]\n"
			"                  [--base CKPT_DIR]\n"
			"                  [--decode K] [--decode-mb N] SERIES_DIR\n"
			"       pack_ratio --planes\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct ck_chunk_opts opts = { 0 };
	unsigned anchor = 0, decode = 0;
	const char *base = NULL;
	size_t decode_mb = 64, n;
	int do_decode = 0, i;
	char **names;

	if (argc == 2 && strcmp(argv[1], "--planes") == 0) {
		planes_run();
		return 0;
	}
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (i + 1 >= argc)
			usage();
		if (strcmp(argv[i], "--anchor") == 0)
			anchor = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--star") == 0)
			star_refs = 1;
		else if (strcmp(argv[i], "--skip") == 0)
			skip_refs = 1;
		else if (strcmp(argv[i], "--codecs") == 0)
			opts.codecs = parse_codecs(argv[++i]);
		else if (strcmp(argv[i], "--level") == 0)
			opts.level = atoi(argv[++i]);
		else if (strcmp(argv[i], "--decode") == 0)
			do_decode = 1, decode = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "--exhaustive") == 0)
			opts.exhaustive = atoi(argv[++i]);
		else if (strcmp(argv[i], "--base") == 0)
			base = argv[++i];
		else if (strcmp(argv[i], "--decode-mb") == 0)
			decode_mb = (size_t)atoi(argv[++i]);
		else
			usage();
	}
	if (i + 1 != argc)
		usage();
	names = list_dir(argv[i], &n);
	if (!n) {
		fprintf(stderr, "pack_ratio: no checkpoints in %s\n", argv[i]);
		return 1;
	}
	if (do_decode)
		decode_run(argv[i], names, n, decode, decode_mb, &opts);
	else
		ratio_run(argv[i], names, n, base, anchor, &opts);
	for (size_t j = 0; j < n; j++)
		free(names[j]);
	free(names);
	return 0;
}
