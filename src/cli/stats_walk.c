/* ckptctl stats: walking composites and comparing consecutive ones.
 *
 * Tensor bytes are read straight from the physical files the view names,
 * chunk by chunk (two chunk buffers in all), so memory stays bounded
 * whatever the checkpoint size; a file whose raw copy compaction dropped
 * is decoded from the packs.  A tensor served from the same physical
 * bytes in both checkpoints is identical without reading. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/log.h"
#include "ckptfs/view.h"
#include "ckptfs/packstore.h"
#include "stats.h"

/* --- collecting a composite ------------------------------------------------ */

struct collect_ctx {
	struct stats_ckpt *c;
	const char *relpath;
	const char *ckpt_name;
};

static int add_tensor(void *ctx, const struct ck_vtensor *vt)
{
	struct collect_ctx *cc = ctx;
	struct stats_ckpt *c = cc->c;
	struct stats_tensor *t;
	size_t klen;

	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;

		t = realloc(c->t, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		c->t = t;
		c->cap = cap;
	}
	t = &c->t[c->n];
	memset(t, 0, sizeof(*t));
	klen = strlen(cc->relpath) + 1 + strlen(vt->name) + 1;
	t->key = malloc(klen);
	t->layer = strdup(vt->layer);
	t->src_path = strdup(vt->src_path);
	if (!t->key || !t->layer || !t->src_path) {
		free(t->key);
		free(t->layer);
		free(t->src_path);
		return -ENOMEM;
	}
	snprintf(t->key, klen, "%s\n%s", cc->relpath, vt->name);
	t->dtype = vt->dtype;
	t->off = vt->src_offset;
	t->file_id = vt->src_file_id;
	t->nbytes = vt->nbytes;
	c->n++;
	c->tensor_bytes += vt->nbytes;
	if (strcmp(vt->src_ckpt, cc->ckpt_name) != 0)
		c->partial += vt->nbytes;
	return 0;
}

static int collect_node(struct ck_view *v, const struct ck_vnode *n, const char *relpath, struct collect_ctx *cc)
{
	struct ck_vattr a;
	int rc = ck_view_getattr(v, n, &a);

	if (rc < 0)
		return rc;
	if (S_ISDIR(a.mode)) {
		const struct ck_vnode *child;

		for (size_t i = 0; (rc = ck_view_child(v, n, i, &child)) == 0; i++) {
			const char *name = ck_vnode_name(child);
			size_t len = strlen(relpath) + 1 + strlen(name) + 1;
			char *sub = malloc(len);

			if (!sub)
				return -ENOMEM;
			snprintf(sub, len, "%s%s%s", relpath, *relpath ? "/" : "", name);
			rc = collect_node(v, child, sub, cc);
			free(sub);
			if (rc < 0)
				return rc;
		}
		return rc == -ENOENT ? 0 : rc;
	}
	cc->c->logical += a.size;
	cc->relpath = relpath;
	rc = ck_view_tensors(v, n, add_tensor, cc);
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)   /* a refused file: it serves no tensors (ls and verify say why) */
		cc->c->unservable++;
	if (rc < 0)
		ck_warn("stats: %s: %s: tensors not counted: %s", cc->ckpt_name, *relpath ? relpath : "(file)",
			strerror(-rc));
	return 0;
}

int stats_collect(struct ck_view *v, struct ck_store *st, const char *series, const struct ck_ckpt_info *c,
		  struct stats_ckpt *out)
{
	struct collect_ctx cc = { .c = out, .ckpt_name = c->name };
	const struct ck_vnode *node;
	struct ck_file_info *f;
	size_t nf, len = strlen(series) + 1 + strlen(c->name) + 1;
	char *path = malloc(len);
	int rc;

	memset(out, 0, sizeof(*out));
	if (!path)
		return -ENOMEM;
	snprintf(path, len, "%s/%s", series, c->name);
	rc = ck_view_resolve(v, path, &node);
	free(path);
	if (rc < 0)
		return rc;
	rc = collect_node(v, node, "", &cc);
	if (rc < 0)
		return rc;
	rc = ck_store_list_files(st, c->id, &f, &nf);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < nf; i++) {
		struct ck_file_pack_info pi;

		if (ck_store_file_pack_info(st, f[i].id, &pi) < 0 || !pi.packed) {
			out->physical += f[i].size;
			continue;
		}
		out->physical += pi.stored_bytes;
		out->dedup += pi.dedup_bytes;
		out->delta += pi.delta_bytes;
		if (pi.delta_bytes + pi.plain_bytes > pi.stored_bytes)
			out->compressed += pi.delta_bytes + pi.plain_bytes - pi.stored_bytes;
	}
	ck_file_info_free(f, nf);
	return 0;
}

void stats_ckpt_free(struct stats_ckpt *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->t[i].key);
		free(c->t[i].layer);
		free(c->t[i].src_path);
	}
	free(c->t);
	memset(c, 0, sizeof(*c));
}

/* --- comparing two composites --------------------------------------------- */

/* Decoded chunks kept for the reads of packed files: the comparison reads
 * chunk_size pieces, which need not line up with the packs' chunks. */
#define PACKED_CACHE_BYTES (16u << 20)

/* The open physical file of one side (consecutive tensors share files):
 * the raw file, or its packed version. */
struct side {
	struct ck_store *st;
	struct ck_chunk_cache *cache;
	uint64_t file_id;
	int fd;
	struct ck_packed_file *pk;
	unsigned char *buf;
};

static void side_close(struct side *s)
{
	if (s->fd >= 0)
		close(s->fd);
	ck_packed_close(s->pk);
	s->fd = -1;
	s->pk = NULL;
}

static int side_open(struct side *s, const char *path, uint64_t file_id)
{
	struct ck_error err = { { 0 } };
	int rc;

	if ((s->fd >= 0 || s->pk) && s->file_id == file_id)
		return 0;
	side_close(s);
	s->file_id = file_id;
	s->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->fd >= 0 || errno != ENOENT)
		return s->fd < 0 ? -errno : 0;
	rc = ck_packed_open(s->st, file_id, s->cache, &s->pk, &err);
	if (rc == -ENOENT)
		return -ENOENT;   /* neither raw nor packed */
	if (rc < 0)
		ck_err("stats: %s (packed): %s", path, ck_error_text(&err, rc));
	return rc;
}

static int side_read(struct side *s, unsigned char *buf, size_t len, uint64_t off)
{
	struct ck_error err = { { 0 } };

	while (len) {
		ssize_t r = s->pk ? ck_packed_pread(s->pk, buf, len, off, &err) : pread(s->fd, buf, len, (off_t)off);

		if (r < 0 && !s->pk && errno == EINTR)
			continue;
		if (r < 0 && s->pk) {
			ck_err("stats: %s", err.msg);
			return (int)r;
		}
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO;   /* shorter than the index says: changed behind our back */
		buf += r;
		len -= (size_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(((const struct stats_tensor *)a)->key, ((const struct stats_tensor *)b)->key);
}

static struct stats_layer *layer_of(struct stats_layer **v, size_t *n, const char *name)
{
	struct stats_layer *l;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].name, name))
			return &(*v)[i];
	l = realloc(*v, (*n + 1) * sizeof(*l));
	if (!l)
		return NULL;
	*v = l;
	l = &l[*n];
	memset(l, 0, sizeof(*l));
	l->name = strdup(name);
	if (!l->name)
		return NULL;
	(*n)++;
	return l;
}

/* Reads a tensor (and its predecessor when p is not NULL) chunk by chunk:
 * counts identical chunks into l and adds norms of measured dtypes. */
static int stream(struct side *ps, struct side *cs, const struct stats_tensor *p, struct stats_tensor *c,
		  size_t chunk, int measured, struct ck_l2 *acc, uint64_t *same)
{
	size_t esize = ck_dtype_size(c->dtype);
	int rc;

	if (p && (rc = side_open(ps, p->src_path, p->file_id)) < 0)
		return rc;
	if ((rc = side_open(cs, c->src_path, c->file_id)) < 0)
		return rc;
	for (uint64_t done = 0; done < c->nbytes;) {
		size_t len = c->nbytes - done < chunk ? (size_t)(c->nbytes - done) : chunk;

		rc = side_read(cs, cs->buf, len, c->off + done);
		if (!rc && p)
			rc = side_read(ps, ps->buf, len, p->off + done);
		if (rc < 0)
			return rc;
		if (p) {
			XXH128_hash_t a = XXH3_128bits(ps->buf, len), b = XXH3_128bits(cs->buf, len);

			*same += XXH128_isEqual(a, b);
		}
		if (measured)
			ck_l2_add(acc, c->dtype, p ? ps->buf : NULL, cs->buf, len / esize);
		done += len;
	}
	return 0;
}

static int compare_tensor(struct side *ps, struct side *cs, struct stats_tensor *p, struct stats_tensor *c,
			  size_t chunk, struct stats_layer *l)
{
	uint64_t nchunks = (c->nbytes + chunk - 1) / chunk, same = 0;
	int measured = ck_dtype_is_measured(c->dtype) && c->dtype == p->dtype && c->nbytes == p->nbytes;
	struct ck_l2 acc = { 0 };
	int rc;

	l->tensors++;
	l->bytes += c->nbytes;
	l->chunks += nchunks;
	l->measured += measured;
	if (c->nbytes != p->nbytes || c->dtype != p->dtype)
		return 0;   /* reshaped or retyped: nothing is the same */
	if (!strcmp(c->src_path, p->src_path) && c->off == p->off) {
		l->same_chunks += nchunks;
		if (!measured)
			return 0;
		if (!p->norm_known) {   /* first sight of these bytes: one read for the norm */
			rc = stream(NULL, cs, NULL, c, chunk, 1, &acc, &same);
			if (rc < 0)
				return rc;
			p->norm2 = acc.cur2;
			p->norm_known = 1;
		}
		c->norm2 = p->norm2;
		c->norm_known = 1;
		l->l2.prev2 += p->norm2;
		l->l2.cur2 += c->norm2;
		return 0;
	}
	rc = stream(ps, cs, p, c, chunk, measured, &acc, &same);
	if (rc < 0)
		return rc;
	l->same_chunks += same;
	if (measured) {
		l->l2.diff2 += acc.diff2;
		l->l2.prev2 += acc.prev2;
		l->l2.cur2 += acc.cur2;
		c->norm2 = acc.cur2;
		c->norm_known = 1;
	}
	return 0;
}

int stats_compare(struct ck_store *st, struct stats_ckpt *prev, struct stats_ckpt *cur, size_t chunk_size,
		  struct stats_layer **layers, size_t *nlayers)
{
	struct side ps = { .st = st, .fd = -1 }, cs = { .st = st, .fd = -1 };
	struct ck_chunk_cache *cache = NULL;
	struct stats_layer *v = NULL;
	size_t n = 0;
	int rc = ck_chunk_cache_new(PACKED_CACHE_BYTES, &cache);

	if (prev->n)
		qsort(prev->t, prev->n, sizeof(*prev->t), cmp_key);
	ps.cache = cs.cache = cache;
	ps.buf = malloc(chunk_size);
	cs.buf = malloc(chunk_size);
	if (rc == 0 && (!ps.buf || !cs.buf))
		rc = -ENOMEM;
	for (size_t i = 0; i < cur->n && !rc; i++) {
		struct stats_tensor *c = &cur->t[i];
		struct stats_tensor *p = prev->n ? bsearch(c, prev->t, prev->n, sizeof(*prev->t), cmp_key) : NULL;
		struct stats_layer *l = layer_of(&v, &n, c->layer);

		if (!l)
			rc = -ENOMEM;
		else if (!p)
			l->added++;
		else
			rc = compare_tensor(&ps, &cs, p, c, chunk_size, l);
		if (rc < 0 && rc != -ENOMEM)
			ck_err("stats: %s: %s", p ? p->src_path : c->src_path, strerror(-rc));
	}
	side_close(&ps);
	side_close(&cs);
	ck_chunk_cache_free(cache);
	free(ps.buf);
	free(cs.buf);
	if (rc < 0) {
		stats_layers_free(v, n);
		return rc;
	}
	*layers = v;
	*nlayers = n;
	return 0;
}

void stats_layers_free(struct stats_layer *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i].name);
	free(l);
}

double stats_relative_l2(const struct stats_layer *l)
{
	return l->measured ? ck_l2_relative(&l->l2) : NAN;
}
