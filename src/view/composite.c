/* Composite files: the newest version of a file merged with the older
 * versions of the same path in its series, laid out as a real file of its
 * format whose tensor bytes are extents of the physical files.
 *
 *  - torch.save zip: the state trees are merged (merge.c), data.pkl is
 *    re-emitted with storages renumbered, and the zip container is written
 *    the way PyTorch writes it around the original storage records.
 *  - safetensors: union of tensors by name, newest wins, header written as
 *    the reference writer does.
 *  - a torch DCP save's .metadata: the saves merged by FQN (dcp.c).
 *  - anything else, or a newest version that needs nothing from older ones:
 *    the physical file as it is.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/walk.h"
#include "view_internal.h"

static const char *node_desc(const struct ck_vnode *n)
{
	return n->relpath && n->relpath[0] ? n->relpath : n->name;
}

/* --- shared helpers -------------------------------------------------------- */

/* The versions of a node parse independently of each other: on a machine
 * with several CPUs, helper threads parse them beside the builder before
 * it walks them in order.  Quietly: a version that fails is found again,
 * and reported, by the walk. */
struct parse_job {
	struct ck_view *v;
	struct ck_vnode *n;
	enum ck_file_kind kind;
	atomic_size_t next;
};

static void *parse_worker(void *arg)
{
	struct parse_job *j = arg;
	size_t i;

	while ((i = atomic_fetch_add(&j->next, 1)) < j->n->nversions) {
		struct phys_file *pf = j->n->versions[i].pf;
		struct ck_error err;
		int packed;

		if (pf->info.kind != j->kind || (i > 0 && view_version_reclaimed(j->v, pf)))
			continue;
		packed = packed_get(j->v, pf, NULL);
		if (packed < 0 || (packed == 0 && ck_file_check(&pf->info, &err)))
			continue;   /* changed behind the store's back: the walk says so */
		phys_parse(j->v, pf);
	}
	return NULL;
}

static void parse_versions(struct ck_view *v, struct ck_vnode *n, enum ck_file_kind kind)
{
	enum { MAX_HELPERS = 3, MIN_VERSIONS = 3 };
	struct parse_job job = { .v = v, .n = n, .kind = kind };
	pthread_t helpers[MAX_HELPERS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t want = cpus > 1 ? (size_t)cpus - 1 : 0, started = 0;

	if ((kind != CK_FILE_TORCH && kind != CK_FILE_SAFETENSORS) || n->nversions < MIN_VERSIONS || !want)
		return;
	if (want > MAX_HELPERS)
		want = MAX_HELPERS;
	atomic_init(&job.next, 0);
	for (; started < want; started++)
		if (pthread_create(&helpers[started], NULL, parse_worker, &job))
			break;
	parse_worker(&job);
	for (size_t i = 0; i < started; i++)
		pthread_join(helpers[i], NULL);
}

/* Versions of the node usable as sources: same kind as the newest, parsed,
 * identity-checked.  Older versions that are damaged make the composite
 * fail rather than silently lose their entries. */
static int collect_versions(struct ck_view *v, struct ck_vnode *n, struct phys_file ***out, size_t *nout)
{
	enum ck_file_kind kind = n->versions[0].pf->info.kind;
	int merged = kind == CK_FILE_TORCH || kind == CK_FILE_SAFETENSORS || dcp_is_metadata(n);
	struct phys_file **pfs;
	size_t k = 0;
	int rc;

	parse_versions(v, n, kind);
	pfs = calloc(n->nversions, sizeof(*pfs));
	if (!pfs)
		return -ENOMEM;
	for (size_t i = 0; i < n->nversions; i++) {
		struct phys_file *pf = n->versions[i].pf;

		if (pf->info.kind != kind)
			continue;  /* e.g. an older BAD version never counts as a version */
		if (i > 0 && !merged)
			break;     /* other files are served from the newest version alone */
		if (i > 0 && view_version_reclaimed(v, pf))
			continue;  /* dropped from the index: nothing drew from it */
		rc = phys_check(v, pf);
		if (!rc)
			rc = phys_parse(v, pf);
		if (!rc && v->opts.verify != CK_VERIFY_NONE)
			rc = phys_load_ranges(v, pf);
		if (rc) {
			ck_err("%s/%s: cannot use the version from %s: %s", n->ckpt->info.name,
			       node_desc(n), pf->ckpt->info.name, strerror(-rc));
			free(pfs);
			return -EIO;
		}
		pfs[k++] = pf;
	}
	*out = pfs;
	*nout = k;
	return 0;
}

static int add_whole_file(struct ck_vfile *f, struct phys_file *pf)
{
	return vfile_add_phys(f, pf, 0, pf->info.size);
}

/* --- torch.save ----------------------------------------------------------- */

struct storage_slot {
	const struct pk_storage *st;
	char key[24];
};

struct torch_build {
	struct storage_slot *slots;   /* composite storages, in first-emitted order */
	size_t nslots, capslots;
	size_t *hash;                 /* pointer -> slot + 1 */
	size_t hashcap;
	int failed;
};

static size_t ptr_hash(const void *p, size_t cap)
{
	return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ULL) & (cap - 1);
}

static int slots_grow_hash(struct torch_build *tb)
{
	size_t cap = tb->hashcap ? tb->hashcap * 2 : 1024;
	size_t *h = calloc(cap, sizeof(*h));

	if (!h)
		return -ENOMEM;
	for (size_t i = 0; i < tb->nslots; i++) {
		size_t s = ptr_hash(tb->slots[i].st, cap);

		while (h[s])
			s = (s + 1) & (cap - 1);
		h[s] = i + 1;
	}
	free(tb->hash);
	tb->hash = h;
	tb->hashcap = cap;
	return 0;
}

/* pk_emit callback: composite storages are numbered 0, 1, ... in the order
 * the pickle first mentions them, as torch.save numbers them. */
static const char *torch_storage_key(void *ctx, const struct pk_storage *st)
{
	struct torch_build *tb = ctx;
	struct storage_slot *slot;
	size_t s;

	if (tb->hashcap) {
		for (s = ptr_hash(st, tb->hashcap); tb->hash[s]; s = (s + 1) & (tb->hashcap - 1))
			if (tb->slots[tb->hash[s] - 1].st == st)
				return tb->slots[tb->hash[s] - 1].key;
	}
	if ((tb->nslots + 1) * 2 > tb->hashcap && slots_grow_hash(tb))
		goto fail;
	if (tb->nslots == tb->capslots) {
		struct storage_slot *p = ck_grow(tb->slots, &tb->capslots, sizeof(*p), 64);

		if (!p)
			goto fail;
		tb->slots = p;
	}
	slot = &tb->slots[tb->nslots];
	slot->st = st;
	snprintf(slot->key, sizeof(slot->key), "%zu", tb->nslots);
	for (s = ptr_hash(st, tb->hashcap); tb->hash[s]; s = (s + 1) & (tb->hashcap - 1))
		;
	tb->hash[s] = ++tb->nslots;
	return slot->key;
fail:
	tb->failed = 1;
	return NULL;
}

/* What goes into each record of the composite archive. */
struct rec_src {
	const uint8_t *mem;           /* generated (data.pkl) */
	struct phys_file *pf;         /* or a record of a physical file */
	uint64_t off;
};

struct zip_emit_ctx {
	struct ck_vfile *f;
	struct rec_src *src;
};

static int zip_emit(void *ctx, long record, const void *bytes, uint64_t len)
{
	struct zip_emit_ctx *z = ctx;
	struct rec_src *s;

	if (record < 0)
		return vfile_add_mem(z->f, bytes, len);
	s = &z->src[record];
	if (s->mem)
		return vfile_add_mem(z->f, s->mem, len);
	return vfile_add_phys(z->f, s->pf, s->off, len);
}

static int record_cmp_lex(const void *a, const void *b)
{
	const struct tz_record *x = a, *y = b;

	return strcmp(x->name, y->name);
}

struct tensor_walk_ctx {
	struct ck_vfile *f;
	int rc;
};

/* Whether a tensor's elements lie in C order from its offset (strides of
 * a contiguous tensor; dimensions of size 1 may have any stride). */
static int tensor_contiguous(const struct pk_tensor *t)
{
	int64_t expect = 1;

	for (int i = t->ndim; i-- > 0;) {
		if (t->shape[i] != 1 && t->stride[i] != expect)
			return 0;
		expect *= (int64_t)t->shape[i];
	}
	return 1;
}

static int note_tensor(void *ctx, const char *path, const struct pk_node *node, const struct pk_tensor *t)
{
	struct tensor_walk_ctx *w = ctx;
	struct phys_file *pf = t->storage->user;
	const struct tz_entry *e;
	char rec[64 + 8];
	uint64_t esize = ck_dtype_size(t->dtype), numel = 1;

	if (!pf)
		return 0;
	for (int i = 0; i < t->ndim; i++)
		numel *= t->shape[i];
	snprintf(rec, sizeof(rec), "data/%.64s", t->storage->key);
	e = tz_find(&pf->ar, rec);
	w->rc = vfile_add_tensor(w->f, path[0] ? path : "<root>", t->dtype, t->ndim, t->shape, pf,
				 e ? e->data_offset + t->offset * esize : 0, numel * esize);
	if (!w->rc)
		vfile_tensor_origin(w->f, node, e && tensor_contiguous(t) &&
				    (t->offset + numel) * esize <= e->size);
	return w->rc;
}

static int record_tensors(struct ck_vfile *f, const struct pk_node *root)
{
	struct tensor_walk_ctx w = { f, 0 };
	int rc = ck_walk_tensors(root, note_tensor, &w);

	return w.rc ? w.rc : rc;
}

/* Small record of a physical archive as text ("little", "64"), or "" if absent. */
static int read_small_record(struct phys_file *pf, const char *name, char *out, size_t size)
{
	const struct tz_entry *e = tz_find(&pf->ar, name);
	int rc;

	out[0] = 0;
	if (!e)
		return 0;
	if (e->size >= size)
		return -EINVAL;
	rc = phys_read(pf, out, e->size, e->data_offset);
	if (rc)
		return rc;
	out[e->size] = 0;
	return 0;
}

static int build_torch_archive(const char *what, struct phys_file *newest, const struct pk_node *root,
			       struct ck_vfile *f)
{
	struct torch_build tb = { 0 };
	struct pk_emit_opts eo = { torch_storage_key, &tb, 0, 2 };
	struct ck_buf pkl = CK_BUF_INIT;
	struct tz_record *recs = NULL;
	struct rec_src *srcs = NULL;
	struct zip_emit_ctx z;
	struct ck_error err = { "" };
	char align_txt[32];
	unsigned align = 64;
	size_t nrec = 0, cap, data_at = (size_t)-1;
	int numeric = tz_find(&newest->ar, ".format_version") != NULL;
	int rc;

	rc = pk_emit(root, &eo, &pkl, &err);
	if (!rc && tb.failed)
		rc = -ENOMEM;
	if (rc) {
		ck_err("%s: cannot write the merged pickle: %s", what, ck_error_text(&err, rc));
		goto out;
	}
	rc = read_small_record(newest, ".storage_alignment", align_txt, sizeof(align_txt));
	if (rc)
		goto out;
	if (align_txt[0]) {
		unsigned long a = strtoul(align_txt, NULL, 10);

		if (a && a <= 4096 && !(a & (a - 1)))
			align = (unsigned)a;
	}
	cap = newest->ar.n + tb.nslots + 2;
	recs = calloc(cap, sizeof(*recs));
	srcs = calloc(cap, sizeof(*srcs));
	if (!recs || !srcs) {
		rc = -ENOMEM;
		goto out;
	}
	/* The newest archive's records in its order, with its storages replaced
	 * by the composite's storages where its first storage record stood. */
	for (size_t i = 0; i < newest->ar.n; i++) {
		const struct tz_entry *e = &newest->ar.entries[i];

		if (!strcmp(e->name, "data.pkl")) {
			recs[nrec] = (struct tz_record){ "data.pkl", pkl.len, ck_crc32(0, pkl.data, pkl.len) };
			srcs[nrec++].mem = pkl.data;
		} else if (!strncmp(e->name, "data/", 5)) {
			if (data_at == (size_t)-1)
				data_at = nrec;
		} else {
			if (data_at == (size_t)-1 && !strcmp(e->name, "version"))
				data_at = nrec;
			recs[nrec] = (struct tz_record){ e->name, e->size, e->crc32 };
			srcs[nrec].pf = newest;
			srcs[nrec++].off = e->data_offset;
		}
	}
	if (data_at == (size_t)-1)
		data_at = nrec;
	/* Make room for the storage records at data_at. */
	memmove(&recs[data_at + tb.nslots], &recs[data_at], (nrec - data_at) * sizeof(*recs));
	memmove(&srcs[data_at + tb.nslots], &srcs[data_at], (nrec - data_at) * sizeof(*srcs));
	memset(&srcs[data_at], 0, tb.nslots * sizeof(*srcs));
	for (size_t s = 0; s < tb.nslots; s++) {
		const struct pk_storage *st = tb.slots[s].st;
		struct phys_file *pf = st->user;
		char name[80];
		const struct tz_entry *e;

		snprintf(name, sizeof(name), "data/%.64s", st->key);
		e = pf ? tz_find(&pf->ar, name) : NULL;
		if (!e) {
			ck_err("%s: storage '%s' of %s has no record", what, st->key, pf ? pf->info.src_path : "?");
			rc = -EIO;
			goto out;
		}
		/* recs[].name must outlive tz_write: point into the slot's key. */
		recs[data_at + s] = (struct tz_record){ NULL, e->size, e->crc32 };
		srcs[data_at + s].pf = pf;
		srcs[data_at + s].off = e->data_offset;
	}
	{
		/* Names "data/<k>" for the composite keys, kept in one allocation. */
		char *names = malloc(tb.nslots * 32 + 1);

		if (!names) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t s = 0; s < tb.nslots; s++) {
			snprintf(names + s * 32, 32, "data/%s", tb.slots[s].key);
			recs[data_at + s].name = names + s * 32;
		}
		nrec += tb.nslots;
		if (!numeric) {
			/* torch < 2.7 writes storages in lexicographic key order; the
			 * sources must move with their records. */
			struct { struct tz_record r; struct rec_src s; } *tmp = malloc(tb.nslots * sizeof(*tmp) + 1);

			if (!tmp) {
				free(names);
				rc = -ENOMEM;
				goto out;
			}
			for (size_t s = 0; s < tb.nslots; s++) {
				tmp[s].r = recs[data_at + s];
				tmp[s].s = srcs[data_at + s];
			}
			qsort(tmp, tb.nslots, sizeof(*tmp), record_cmp_lex);
			for (size_t s = 0; s < tb.nslots; s++) {
				recs[data_at + s] = tmp[s].r;
				srcs[data_at + s] = tmp[s].s;
			}
			free(tmp);
		}
		z.f = f;
		z.src = srcs;
		rc = tz_write(newest->ar.root, recs, nrec, align, zip_emit, &z);
		free(names);
	}
	if (rc)
		ck_err("%s: cannot lay out the archive: %s", what, strerror(-rc));
out:
	free(recs);
	free(srcs);
	free(tb.slots);
	free(tb.hash);
	ck_buf_free(&pkl);
	return rc;
}

/* All sources must agree on byte order: storages are copied, not swapped. */
static int check_byteorder(const char *what, struct phys_file **pfs, size_t np)
{
	char first[16], cur[16];
	int rc;

	rc = read_small_record(pfs[0], "byteorder", first, sizeof(first));
	for (size_t i = 1; i < np && !rc; i++) {
		rc = read_small_record(pfs[i], "byteorder", cur, sizeof(cur));
		if (!rc && strcmp(first[0] ? first : "little", cur[0] ? cur : "little")) {
			ck_err("%s: sources differ in byte order (%s in %s, %s in %s)", what, first,
			       pfs[0]->ckpt->info.name, cur, pfs[i]->ckpt->info.name);
			return -EIO;
		}
	}
	return rc;
}

/* The distinct files whose storages a tree's tensors use. */
struct storage_files {
	struct phys_file **pf;
	size_t n, cap;
};

static int storage_file_add(struct storage_files *sf, struct phys_file *pf)
{
	for (size_t i = 0; i < sf->n; i++)
		if (sf->pf[i] == pf)
			return 0;
	if (sf->n == sf->cap) {
		struct phys_file **p = ck_grow(sf->pf, &sf->cap, sizeof(*p), 8);

		if (!p)
			return -ENOMEM;
		sf->pf = p;
	}
	sf->pf[sf->n++] = pf;
	return 0;
}

static int note_storage_file(void *ctx, const char *path, const struct pk_node *node, const struct pk_tensor *t)
{
	(void)path;
	(void)node;
	return t->storage->user ? storage_file_add(ctx, t->storage->user) : -EINVAL;
}

int composite_torch_file(const char *what, struct phys_file *layout, const struct pk_node *root,
			 struct ck_vfile *f)
{
	struct storage_files sf = { NULL, 0, 0 };
	int rc;

	rc = storage_file_add(&sf, layout);
	if (!rc)
		rc = ck_walk_tensors(root, note_storage_file, &sf);
	for (size_t i = 0; i < sf.n && !rc; i++)
		if (sf.pf[i]->info.kind != CK_FILE_TORCH || sf.pf[i]->parsed != 1)
			rc = -EINVAL;   /* only parsed torch.save files lend storages */
	if (!rc)
		rc = check_byteorder(what, sf.pf, sf.n);
	free(sf.pf);
	if (!rc)
		rc = build_torch_archive(what, layout, root, f);
	f->synthesized = 1;
	if (!rc)
		rc = record_tensors(f, root);
	return rc;
}

static int build_torch(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, size_t np,
		       struct ck_vfile *f)
{
	struct pk_node **roots;
	struct pk_node *merged;
	struct pk_doc *doc = NULL;
	struct ck_error err = { "" };
	char what[512];
	int used_older = 0, rc;

	snprintf(what, sizeof(what), "%s/%s", n->ckpt->info.name, node_desc(n));
	roots = calloc(np, sizeof(*roots));
	if (!roots)
		return -ENOMEM;
	for (size_t i = 0; i < np; i++)
		roots[i] = pk_doc_root(pfs[i]->doc);
	merged = roots[0];
	if (np > 1) {
		doc = pk_doc_new();
		rc = doc ? merge_trees(doc, roots, np, &merged, &used_older, &err) : -ENOMEM;
		if (rc) {
			ck_err("%s: cannot merge versions: %s", what, ck_error_text(&err, rc));
			goto out;
		}
	}
	if (used_older || v->opts.always_synthesize) {
		rc = check_byteorder(what, pfs, np);
		if (!rc)
			rc = build_torch_archive(what, pfs[0], merged, f);
		f->synthesized = 1;
	} else {
		rc = add_whole_file(f, pfs[0]);
	}
	if (!rc)
		rc = record_tensors(f, merged);
	/* The tree stays with the file: the control directory composes new
	 * files from its nodes (ck_view_file_tree). */
	if (!rc) {
		f->tree_doc = used_older ? doc : NULL;
		f->tree = merged;
		if (used_older)
			doc = NULL;
	}
out:
	pk_doc_free(doc);
	free(roots);
	return rc;
}

/* --- safetensors ---------------------------------------------------------- */

struct st_pick {
	const struct st_tensor *t;
	struct phys_file *pf;
};

static int pick_cmp(const void *a, const void *b)
{
	const struct st_pick *x = a, *y = b;

	return strcmp(x->t->name, y->t->name);
}

static int build_safetensors(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, size_t np,
			     struct ck_vfile *f)
{
	struct st_pick *picks = NULL, *fresh = NULL, *merged = NULL, *swap, key;
	struct st_tensor *out = NULL;
	struct ck_buf hdr = CK_BUF_INIT;
	struct ck_error err = { "" };
	size_t npicks = 0, total = 0;
	int rc = 0;

	for (size_t i = 0; i < np; i++)
		total += pfs[i]->st.n;
	picks = calloc(total + 1, sizeof(*picks));
	fresh = calloc(total + 1, sizeof(*fresh));
	merged = calloc(total + 1, sizeof(*merged));
	if (!picks || !fresh || !merged) {
		rc = -ENOMEM;
		goto out;
	}
	/* Newest first; a name already picked from a newer version is skipped.
	 * picks stays sorted by name, and each version's names come sorted
	 * (st_by_name), so a version costs one pass over both: a long series
	 * of full saves, whose older versions add nothing, costs the sum of
	 * their sizes, not that times a sort per version. */
	for (size_t i = 0; i < np; i++) {
		const struct st_tensor *const *by = pfs[i]->st_by_name;
		size_t nfresh = 0, a = 0, b = 0, m = 0;

		for (size_t j = 0, at = 0; j < pfs[i]->st.n; j++) {
			int c = 1;

			while (at < npicks && (c = strcmp(picks[at].t->name, by[j]->name)) < 0)
				at++;
			if (at < npicks && c == 0)
				continue;
			fresh[nfresh].t = by[j];
			fresh[nfresh++].pf = pfs[i];
		}
		if (!nfresh)
			continue;
		while (a < npicks || b < nfresh)
			merged[m++] = b == nfresh || (a < npicks && strcmp(picks[a].t->name, fresh[b].t->name) < 0)
					      ? picks[a++] : fresh[b++];
		swap = picks;   /* the merged list becomes picks, and the old one scratch */
		picks = merged;
		merged = swap;
		npicks = m;
	}
	if (npicks == pfs[0]->st.n && !v->opts.always_synthesize) {
		/* Nothing older survived: serve the newest file as it is. */
		rc = add_whole_file(f, pfs[0]);
		for (size_t j = 0; j < pfs[0]->st.n && !rc; j++) {
			const struct st_tensor *t = &pfs[0]->st.tensors[j];

			rc = vfile_add_tensor(f, t->name, t->dtype, t->ndim, t->shape, pfs[0],
					      pfs[0]->st.data_start + t->begin, t->end - t->begin);
		}
		goto out;
	}
	f->synthesized = 1;
	out = calloc(npicks + 1, sizeof(*out));
	if (!out) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t j = 0; j < npicks; j++)
		out[j] = *picks[j].t;   /* names borrowed from the parsed files */
	rc = st_layout(out, npicks, pfs[0]->st.meta, pfs[0]->st.nmeta, &hdr, &err);
	if (rc) {
		ck_err("%s/%s: cannot lay out the safetensors header: %s", n->ckpt->info.name, node_desc(n),
		       ck_error_text(&err, rc));
		goto out;
	}
	rc = vfile_add_mem(f, hdr.data, hdr.len);
	for (size_t j = 0; j < npicks && !rc; j++) {
		const struct st_pick *p;

		key.t = &out[j];
		p = bsearch(&key, picks, npicks, sizeof(*picks), pick_cmp);
		if (!p) {
			rc = -EIO;
			break;
		}
		rc = vfile_add_phys(f, p->pf, p->pf->st.data_start + p->t->begin, p->t->end - p->t->begin);
		if (!rc)
			rc = vfile_add_tensor(f, p->t->name, p->t->dtype, p->t->ndim, p->t->shape, p->pf,
					      p->pf->st.data_start + p->t->begin, p->t->end - p->t->begin);
	}
out:
	ck_buf_free(&hdr);
	free(out);
	free(picks);
	free(fresh);
	free(merged);
	return rc;
}

/* --- entry point ------------------------------------------------------------ */

int composite_build(struct ck_view *v, struct ck_vnode *n, struct ck_vfile **out)
{
	struct phys_file *newest = n->versions[0].pf;
	struct phys_file **pfs = NULL;
	struct ck_vfile *f = NULL;
	size_t np = 0;
	int rc;

	if (newest->info.kind == CK_FILE_BAD) {
		ck_err("%s/%s: refused at import: %s", n->ckpt->info.name, node_desc(n),
		       newest->info.error ? newest->info.error : "unreadable");
		return -EIO;
	}
	if (newest->info.kind == CK_FILE_SYMLINK || newest->info.kind == CK_FILE_DIR)
		return -ELOOP;   /* no bytes: a link is read with readlink */
	rc = collect_versions(v, n, &pfs, &np);
	if (rc)
		return rc;
	switch (newest->info.kind) {
	case CK_FILE_TORCH:
		f = vfile_new("torch");
		rc = f ? build_torch(v, n, pfs, np, f) : -ENOMEM;
		break;
	case CK_FILE_SAFETENSORS:
		f = vfile_new("safetensors");
		rc = f ? build_safetensors(v, n, pfs, np, f) : -ENOMEM;
		break;
	case CK_FILE_SAFETENSORS_INDEX:
		f = vfile_new("safetensors-index");
		rc = f ? composite_build_index(v, n, pfs, np, f) : -ENOMEM;
		break;
	case CK_FILE_OTHER:
		if (dcp_is_metadata(n)) {
			f = vfile_new("dcp-metadata");
			if (f)
				f->view = v;
			rc = f ? dcp_build_metadata(v, n, pfs, np, f) : -ENOMEM;
			break;
		}
		/* fall through */
	default:
		f = vfile_new("file");
		rc = f ? add_whole_file(f, newest) : -ENOMEM;
		break;
	}
	free(pfs);
	if (f)
		f->view = v;
	if (!rc)
		rc = vfile_freeze(f);
	if (rc) {
		vfile_free(f);
		return rc == -ENOMEM ? rc : -EIO;
	}
	*out = f;
	return 0;
}
