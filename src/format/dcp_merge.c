/* Merging the .metadata of a series of DCP saves (include/ckptfs/dcp.h).
 *
 * The result is a new Metadata object built from the parsed ones: the
 * newest save's object with its state_dict_metadata, storage_data,
 * planner_data (and mcore_data) replaced by merged dicts whose entries
 * are the parsed nodes themselves; only an older item's _StorageInfo is
 * new (its relative_path gets the caller's prefix), and objects of older
 * saves are copied when their classes have to take the newest save's
 * module path.  pk_emit writes it in the newest save's protocol.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/dcp.h"

/* ---- a map of nodes to their copies ------------------------------------------ */

struct nmap {
	const struct pk_node **keys;
	struct pk_node **vals;
	size_t mask, count;
};

static size_t nhash(const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p;

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (size_t)h;
}

static struct pk_node *nmap_get(const struct nmap *m, const struct pk_node *k)
{
	if (!m->keys)
		return NULL;
	for (size_t i = nhash(k) & m->mask; m->keys[i]; i = (i + 1) & m->mask)
		if (m->keys[i] == k)
			return m->vals[i];
	return NULL;
}

static int nmap_put(struct nmap *m, const struct pk_node *k, struct pk_node *v)
{
	size_t i;

	if (!m->keys || (m->count + 1) * 2 > m->mask + 1) {
		size_t cap = m->keys ? (m->mask + 1) * 2 : 256;
		const struct pk_node **keys = calloc(cap, sizeof(*keys));
		struct pk_node **vals = calloc(cap, sizeof(*vals));

		if (!keys || !vals) {
			free(keys);
			free(vals);
			return -ENOMEM;
		}
		for (size_t j = 0; m->keys && j <= m->mask; j++) {
			if (!m->keys[j])
				continue;
			for (i = nhash(m->keys[j]) & (cap - 1); keys[i]; i = (i + 1) & (cap - 1))
				;
			keys[i] = m->keys[j];
			vals[i] = m->vals[j];
		}
		free(m->keys);
		free(m->vals);
		m->keys = keys;
		m->vals = vals;
		m->mask = cap - 1;
	}
	for (i = nhash(k) & m->mask; m->keys[i]; i = (i + 1) & m->mask)
		;
	m->keys[i] = k;
	m->vals[i] = v;
	m->count++;
	return 0;
}

static void nmap_free(struct nmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ---- class paths of the newest save ------------------------------------------ */

struct merger {
	const struct ck_dcp_source *src;
	struct ck_dcp_merged *out;
	struct ck_error *err;
	struct pk_doc *doc;
	struct nmap *remap;      /* per source: its GLOBALs to the newest's, then its copied nodes */
	int *needs_remap;        /* per source */
};

static const char *bare(const char *name)
{
	while (*name == '_')
		name++;
	return name;
}

/* The newest save's class for an older save's global of another module
 * path (classes move between torch releases; an enum lost or gained a
 * leading underscore), or NULL to keep it. */
static const struct pk_node *newest_global(const struct pk_doc *newest, const struct pk_node *g)
{
	const struct pk_node *found = NULL;

	if (strncmp(g->v.global.module, "torch.distributed.", 18))
		return NULL;
	for (size_t i = 0; i < pk_doc_nglobals(newest); i++) {
		const struct pk_node *h = pk_doc_global(newest, i);

		if (!strcmp(h->v.global.module, g->v.global.module) && !strcmp(h->v.global.name, g->v.global.name))
			return NULL;
		if (!strncmp(h->v.global.module, "torch.distributed.", 18) &&
		    !strcmp(bare(h->v.global.name), bare(g->v.global.name)))
			found = h;
	}
	return found;
}

static int setup_remap(struct merger *mg, size_t s)
{
	const struct pk_doc *older = mg->src[s].meta->doc, *newest = mg->src[0].meta->doc;

	for (size_t i = 0; i < pk_doc_nglobals(older); i++) {
		const struct pk_node *g = pk_doc_global(older, i), *h = newest_global(newest, g);

		if (!h)
			continue;
		if (nmap_put(&mg->remap[s], g, (struct pk_node *)h))
			return -ENOMEM;
		mg->needs_remap[s] = 1;
	}
	return 0;
}

/* n (a node of source s) with the newest save's classes. */
static struct pk_node *remap(struct merger *mg, size_t s, const struct pk_node *n)
{
	struct pk_node *c;

	if (!n || !mg->needs_remap[s])
		return (struct pk_node *)n;
	c = nmap_get(&mg->remap[s], n);
	if (c)
		return c;
	if (n->kind == PK_GLOBAL || (!n->n && !n->cls && !n->args && !n->kwargs && !n->state))
		return (struct pk_node *)n;
	if (n->kind == PK_DICT) {
		c = pk_new(mg->doc, PK_DICT);
		if (!c || nmap_put(&mg->remap[s], n, c))
			return NULL;
		c->flags = n->flags;
		for (size_t i = 0; i < n->n; i++) {
			struct pk_node *x = remap(mg, s, n->items[i]);

			if (!x || pk_append(mg->doc, c, x))
				return NULL;
		}
	} else {
		c = pk_clone(mg->doc, n);
		if (!c || nmap_put(&mg->remap[s], n, c))
			return NULL;
		for (size_t i = 0; i < c->n; i++)
			if (!(c->items[i] = remap(mg, s, n->items[i])))
				return NULL;
	}
	if ((n->cls && !(c->cls = remap(mg, s, n->cls))) || (n->args && !(c->args = remap(mg, s, n->args))) ||
	    (n->kwargs && !(c->kwargs = remap(mg, s, n->kwargs))) || (n->state && !(c->state = remap(mg, s, n->state))))
		return NULL;
	return c;
}

/* ---- which saves merge, which FQN from where ---------------------------------- */

static int same_shape(const struct ck_dcp_entry *a, const struct ck_dcp_entry *b)
{
	if (a->ndim != b->ndim)
		return 0;
	for (int d = 0; d < a->ndim; d++)
		if (a->size[d] != b->size[d])
			return 0;
	return 1;
}

static void describe(const struct ck_dcp_entry *e, char *out, size_t size)
{
	char d[160];

	if (e->is_bytes) {
		snprintf(out, size, "a bytes item");
		return;
	}
	ck_dcp_format_dims(e->size, e->ndim, d, sizeof(d));
	snprintf(out, size, "%s %s", ck_dtype_name(e->dtype), d);
}

/* Whether source k merges with the newer ones (out->why says why not). */
static int mergeable(struct merger *mg, size_t k, const char *const *names)
{
	const struct ck_dcp_meta *m = mg->src[k].meta, *newest = mg->src[0].meta;

	if (m->family != newest->family) {
		snprintf(mg->out->why, sizeof(mg->out->why),
			 "%s was saved by %s's DCP, %s by %s's: their keys are flattened differently", names[k],
			 ck_dcp_family_name(m->family), names[0], ck_dcp_family_name(newest->family));
		return 0;
	}
	for (size_t i = 0; i < m->nentries; i++) {
		const struct ck_dcp_entry *e = &m->entries[i];

		for (size_t j = 0; j < k; j++) {
			const struct ck_dcp_entry *f = ck_dcp_find(mg->src[j].meta, e->fqn);
			char a[200], b[200];

			if (!f)
				continue;
			if (f->is_bytes == e->is_bytes && (e->is_bytes || (f->dtype == e->dtype && same_shape(e, f))))
				break;
			describe(e, a, sizeof(a));
			describe(f, b, sizeof(b));
			snprintf(mg->out->why, sizeof(mg->out->why), "'%.100s' is %.60s in %.50s but %.60s in %.50s", e->fqn, a,
				 names[k], b, names[j]);
			return 0;
		}
	}
	return 1;
}

/* ---- building the merged object ------------------------------------------------- */

static struct pk_node *new_str(struct pk_doc *doc, const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);
	struct pk_node *n;

	if (!s)
		return NULL;
	memcpy(s, a, la);
	memcpy(s + la, b, lb + 1);
	n = pk_new_str(doc, s, la + lb);
	free(s);
	return n;
}

static int append_pair(struct pk_doc *doc, struct pk_node *dict, struct pk_node *k, struct pk_node *v)
{
	if (!k || !v)
		return -ENOMEM;
	return pk_append(doc, dict, k) || pk_append(doc, dict, v) ? -ENOMEM : 0;
}

/* The _StorageInfo of a chunk of source s, its relative_path prefixed. */
static struct pk_node *storage_info(struct merger *mg, size_t s, const struct ck_dcp_chunk *c)
{
	const char *prefix = mg->src[s].prefix;
	const struct pk_node *old = c->storage, *a = old->state;
	struct pk_node *n, *st;

	if (!prefix || !*prefix)
		return remap(mg, s, old);
	n = pk_clone(mg->doc, old);
	st = pk_new(mg->doc, PK_DICT);
	if (!n || !st)
		return NULL;
	n->cls = remap(mg, s, old->cls);
	n->state = st;
	for (size_t i = 0; i + 1 < a->n; i += 2) {
		struct pk_node *k = a->items[i], *v = a->items[i + 1];

		if (k->kind == PK_STR && !strcmp(k->v.str.s, "relative_path"))
			v = new_str(mg->doc, prefix, c->relpath);
		else
			v = remap(mg, s, v);
		if (append_pair(mg->doc, st, k, v))
			return NULL;
	}
	return n;
}

/* A dict of the newest save's attributes keyed by FQN (planner_data,
 * mcore_data): each picked FQN's entry from the save it was picked from,
 * in the merged order, then the newest's keys that are no FQN. */
static struct pk_node *merge_by_fqn(struct merger *mg, const char *attr)
{
	struct ck_dcp_merged *out = mg->out;
	const struct pk_node *newest = pk_dict_get_str(mg->src[0].meta->attrs, attr);
	struct pk_node *d = pk_new(mg->doc, PK_DICT);

	if (!d)
		return NULL;
	for (size_t i = 0; i < out->npicks; i++) {
		const struct ck_dcp_pick *p = &out->picks[i];
		const struct ck_dcp_meta *m = mg->src[p->source].meta;
		const struct pk_node *from = pk_dict_get_str(m->attrs, attr), *v;

		if (!from || from->kind != PK_DICT)
			continue;
		v = pk_dict_get_str(from, m->entries[p->entry].fqn);
		if (v && append_pair(mg->doc, d, m->entries[p->entry].key ? remap(mg, p->source, m->entries[p->entry].key)
									  : NULL,
				     remap(mg, p->source, v)))
			return NULL;
	}
	for (size_t i = 0; i + 1 < newest->n; i += 2) {
		const struct pk_node *k = newest->items[i];

		if (k->kind == PK_STR && ck_dcp_find(mg->src[0].meta, k->v.str.s))
			continue;
		if (k->kind == PK_STR) {
			int picked = 0;

			for (size_t s = 1; s < out->nmerged && !picked; s++)
				picked = ck_dcp_find(mg->src[s].meta, k->v.str.s) != NULL;
			if (picked)
				continue;
		}
		if (append_pair(mg->doc, d, newest->items[i], newest->items[i + 1]))
			return NULL;
	}
	return d;
}

static struct pk_node *build_state_dict_metadata(struct merger *mg)
{
	struct ck_dcp_merged *out = mg->out;
	struct pk_node *d = pk_new(mg->doc, PK_DICT);

	if (!d)
		return NULL;
	/* {**older, **newer}: fold from the oldest merged save up. */
	for (size_t s = out->nmerged; s-- > 0;) {
		const struct ck_dcp_meta *m = mg->src[s].meta;

		for (size_t i = 0; i < m->nentries; i++)
			if (pk_dict_set(mg->doc, d, (struct pk_node *)m->entries[i].key,
					(struct pk_node *)m->entries[i].value))
				return NULL;
	}
	out->picks = calloc(d->n / 2 + 1, sizeof(*out->picks));
	if (!out->picks)
		return NULL;
	for (size_t i = 0; i + 1 < d->n; i += 2) {
		const char *fqn = d->items[i]->v.str.s;
		struct ck_dcp_pick *p = &out->picks[out->npicks++];
		const struct ck_dcp_entry *e = NULL;

		for (p->source = 0; p->source < out->nmerged; p->source++)
			if ((e = ck_dcp_find(mg->src[p->source].meta, fqn)) != NULL)
				break;
		p->entry = (size_t)(e - mg->src[p->source].meta->entries);
		/* the value of an older save, with the newest save's classes */
		if (p->source && mg->needs_remap[p->source] && !(d->items[i + 1] = remap(mg, p->source, e->value)))
			return NULL;
	}
	return d;
}

static struct pk_node *build_storage_data(struct merger *mg)
{
	struct ck_dcp_merged *out = mg->out;
	struct pk_node *d = pk_new(mg->doc, PK_DICT);

	if (!d)
		return NULL;
	for (size_t s = 0; s < out->nmerged; s++) {
		const struct ck_dcp_meta *m = mg->src[s].meta;

		for (size_t i = 0; i < m->nchunks; i++) {
			const struct ck_dcp_chunk *c = &m->chunks[i];
			const struct ck_dcp_entry *e = &m->entries[c->entry];
			size_t from = 0;

			while (from < s && !ck_dcp_find(mg->src[from].meta, e->fqn))
				from++;
			if (from != s)
				continue;   /* a newer save has this FQN */
			if (append_pair(mg->doc, d, remap(mg, s, c->key), storage_info(mg, s, c)))
				return NULL;
		}
	}
	return d;
}

static int build(struct merger *mg, struct pk_node **root)
{
	const struct ck_dcp_meta *newest = mg->src[0].meta;
	const struct pk_node *a = newest->attrs;
	struct pk_node *r, *st, *sdm;

	sdm = build_state_dict_metadata(mg);
	r = pk_clone(mg->doc, newest->root);
	st = pk_new(mg->doc, PK_DICT);
	if (!sdm || !r || !st)
		return -ENOMEM;
	r->state = st;
	for (size_t i = 0; i + 1 < a->n; i += 2) {
		struct pk_node *k = a->items[i], *v = a->items[i + 1];
		const char *name = k->kind == PK_STR ? k->v.str.s : "";

		if (!strcmp(name, "state_dict_metadata"))
			v = sdm;
		else if (!strcmp(name, "storage_data"))
			v = build_storage_data(mg);
		else if ((!strcmp(name, "planner_data") || !strcmp(name, "mcore_data")) && v->kind == PK_DICT)
			v = merge_by_fqn(mg, name);
		if (append_pair(mg->doc, st, k, v))
			return -ENOMEM;
	}
	*root = r;
	return 0;
}

int ck_dcp_merge(const struct ck_dcp_source *src, size_t n, unsigned flags, struct ck_dcp_merged *out,
		 struct ck_error *err)
{
	struct merger mg = { .src = src, .out = out, .err = err };
	struct pk_emit_opts eo = { 0 };
	const char **names = NULL;
	char (*nbuf)[32] = NULL;
	struct pk_node *root = NULL;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!n)
		return ck_fail(err, EINVAL, "no save to merge");
	mg.doc = pk_doc_new();
	mg.remap = calloc(n, sizeof(*mg.remap));
	mg.needs_remap = calloc(n, sizeof(*mg.needs_remap));
	names = calloc(n, sizeof(*names));
	nbuf = calloc(n, sizeof(*nbuf));
	if (!mg.doc || !mg.remap || !mg.needs_remap || !names || !nbuf) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(nbuf[i], sizeof(nbuf[i]), "save %zu", i);
		names[i] = src[i].name ? src[i].name : nbuf[i];
	}
	out->nmerged = 1;
	while (out->nmerged < n && mergeable(&mg, out->nmerged, names))
		out->nmerged++;
	for (size_t s = 1; s < out->nmerged && !rc; s++)
		rc = setup_remap(&mg, s);
	if (!rc)
		rc = build(&mg, &root);
	if (!rc && !(flags & CK_DCP_MERGE_ALWAYS_EMIT)) {
		int older = 0;

		for (size_t i = 0; i < out->npicks && !older; i++)
			older = out->picks[i].source > 0;
		if (!older)
			goto out;   /* every FQN is the newest save's: nothing to write */
	}
	if (!rc) {
		eo.protocol = src[0].meta->protocol > 2 ? src[0].meta->protocol : 2;
		rc = pk_emit(root, &eo, &out->bytes, err);
	}
out:
	if (rc == -ENOMEM)
		ck_fail(err, ENOMEM, "out of memory");
	for (size_t i = 0; mg.remap && i < n; i++)
		nmap_free(&mg.remap[i]);
	free(mg.remap);
	free(mg.needs_remap);
	free(names);
	free(nbuf);
	pk_doc_free(mg.doc);
	if (rc)
		ck_dcp_merged_free(out);
	return rc;
}

void ck_dcp_merged_free(struct ck_dcp_merged *m)
{
	free(m->picks);
	ck_buf_free(&m->bytes);
	memset(m, 0, sizeof(*m));
}
