/* Tree helpers: dicts and sets with Python's insert semantics, the tensor
 * view of a node, key formatting for tensor paths, and integer bytes. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_int.h"

/* Dicts and sets get a hash index once they hold this many keys; below
 * it a linear scan is faster. */
#define INDEX_MIN 8

/* --- integers as two's-complement bytes ------------------------------------ */

size_t pk_bytes_minimal_len(const uint8_t *p, size_t len)
{
	/* Drop top bytes that only repeat the sign of the byte below them. */
	while (len > 1) {
		uint8_t top = p[len - 1], next = p[len - 2];

		if ((top == 0x00 && !(next & 0x80)) || (top == 0xff && (next & 0x80)))
			len--;
		else
			break;
	}
	if (len == 1 && p[0] == 0)
		return 0;   /* CPython encodes 0 as no bytes at all */
	return len;
}

size_t pk_int64_to_bytes(int64_t v, uint8_t out[8])
{
	for (int i = 0; i < 8; i++)
		out[i] = (uint8_t)((uint64_t)v >> (8 * i));
	return pk_bytes_minimal_len(out, 8);
}

int pk_bytes_to_int64(const uint8_t *p, size_t len, int64_t *v)
{
	uint64_t u = 0;

	len = pk_bytes_minimal_len(p, len);
	if (len > 8)
		return 0;
	if (len == 0) {
		*v = 0;
		return 1;
	}
	for (size_t i = 0; i < 8; i++) {
		uint8_t b = i < len ? p[i] : ((p[len - 1] & 0x80) ? 0xff : 0x00);

		u |= (uint64_t)b << (8 * i);
	}
	*v = (int64_t)u;
	return 1;
}

/* --- dict and set indexes --------------------------------------------------- */

struct probe {
	struct pk_node **items;
	size_t stride;
	const struct pk_node *key;
};

static int probe_eq(const void *ctx, uint32_t pos)
{
	const struct probe *p = ctx;

	return pk_key_equal(p->items[(size_t)pos * p->stride], p->key);
}

static struct pk_index *valid_index(const struct pk_node *seq)
{
	struct pk_index *ix = pk_inode_of(seq)->index;

	return ix && ix->items == seq->items && ix->n == seq->n ? ix : NULL;
}

/* The index of seq, (re)built when missing or stale and seq is big enough.
 * NULL with *rc == 0 means "scan linearly". */
static struct pk_index *get_index(struct pk_doc *doc, struct pk_node *seq, size_t stride, int *rc)
{
	struct pk_inode *in = pk_inode_of(seq);
	struct pk_index *ix = valid_index(seq);
	uint64_t h;

	*rc = 0;
	if (ix || seq->n / stride < INDEX_MIN)
		return ix;
	ix = in->index;
	if (!ix) {
		ix = pk_alloc(doc, sizeof(*ix));
		if (!ix) {
			*rc = -ENOMEM;
			return NULL;
		}
		memset(ix, 0, sizeof(*ix));
		ix->next = doc->indexes;
		doc->indexes = ix;
		in->index = ix;
	} else {
		pk_htab_free(&ix->tab);
	}
	ix->stride = stride;
	ix->items = NULL;     /* invalid until fully built */
	for (size_t pos = 0; pos < seq->n / stride; pos++) {
		struct probe p = { seq->items, stride, seq->items[pos * stride] };

		*rc = pk_key_hash(p.key, &h);
		if (!*rc && pk_htab_find(&ix->tab, h, probe_eq, &p) < 0)
			*rc = pk_htab_add(&ix->tab, h, (uint32_t)pos);
		if (*rc)
			return NULL;
	}
	ix->items = seq->items;
	ix->n = seq->n;
	return ix;
}

/* Position (in entries) of key in seq, or -1. */
static long find_linear(const struct pk_node *seq, size_t stride, const struct pk_node *key)
{
	for (size_t pos = 0; pos < seq->n / stride; pos++)
		if (pk_key_equal(seq->items[pos * stride], key))
			return (long)pos;
	return -1;
}

/* Inserts an entry of `stride` items unless its key is present, in which
 * case a dict entry gets the new value (a set keeps the old item). */
static int insert(struct pk_doc *doc, struct pk_node *seq, size_t stride,
		  struct pk_node *key, struct pk_node *value)
{
	struct pk_index *ix;
	uint64_t h = 0;
	long pos;
	int rc;

	ix = get_index(doc, seq, stride, &rc);
	if (rc)
		return rc;
	if (ix) {
		struct probe p = { seq->items, stride, key };

		rc = pk_key_hash(key, &h);
		if (rc)
			return rc;
		pos = pk_htab_find(&ix->tab, h, probe_eq, &p);
	} else {
		pos = find_linear(seq, stride, key);
	}
	if (pos >= 0) {
		if (stride == 2)
			seq->items[pos * 2 + 1] = value;
		return 0;
	}
	rc = pk_items_reserve(doc, seq, stride);
	if (rc)
		return rc;
	if (ix) {
		rc = pk_htab_add(&ix->tab, h, (uint32_t)(seq->n / stride));
		if (rc)
			return rc;
	}
	seq->items[seq->n++] = key;
	if (stride == 2)
		seq->items[seq->n++] = value;
	if (ix) {
		ix->items = seq->items;
		ix->n = seq->n;
	}
	return 0;
}

int pk_dict_put(struct pk_doc *doc, struct pk_node *dict, struct pk_node *key, struct pk_node *value)
{
	return insert(doc, dict, 2, key, value);
}

int pk_set_add(struct pk_doc *doc, struct pk_node *set, struct pk_node *item)
{
	return insert(doc, set, 1, item, NULL);
}

int pk_dict_set(struct pk_doc *doc, struct pk_node *dict, struct pk_node *key, struct pk_node *value)
{
	return pk_dict_put(doc, dict, key, value);
}

struct pk_node *pk_dict_get(const struct pk_node *dict, const struct pk_node *key)
{
	struct pk_index *ix;
	uint64_t h;
	long pos = -1;

	if (!dict || !key || (dict->kind != PK_DICT && dict->kind != PK_CALL && dict->kind != PK_NEWOBJ))
		return NULL;
	ix = valid_index(dict);
	if (ix && ix->stride == 2 && !pk_key_hash(key, &h)) {
		struct probe p = { dict->items, 2, key };

		pos = pk_htab_find(&ix->tab, h, probe_eq, &p);
	} else {
		pos = find_linear(dict, 2, key);
	}
	return pos >= 0 ? dict->items[pos * 2 + 1] : NULL;
}

struct str_probe {
	struct pk_node **items;
	const char *s;
	size_t len;
};

static int str_eq(const void *ctx, uint32_t pos)
{
	const struct str_probe *p = ctx;
	const struct pk_node *k = p->items[(size_t)pos * 2];

	return k->kind == PK_STR && k->v.str.len == p->len && !memcmp(k->v.str.s, p->s, p->len);
}

struct pk_node *pk_dict_get_str(const struct pk_node *dict, const char *key)
{
	struct str_probe p;
	struct pk_index *ix;
	long pos;

	if (!dict || !key || (dict->kind != PK_DICT && dict->kind != PK_CALL && dict->kind != PK_NEWOBJ))
		return NULL;
	p = (struct str_probe){ dict->items, key, strlen(key) };
	ix = valid_index(dict);
	if (ix && ix->stride == 2) {
		/* Same hash as a PK_STR node with these bytes (pickle_keys.c). */
		uint64_t h = pk_hash_bytes(key, p.len) * 3 | 1;

		pos = pk_htab_find(&ix->tab, h, str_eq, &p);
		return pos >= 0 ? dict->items[pos * 2 + 1] : NULL;
	}
	for (size_t i = 0; i + 1 < dict->n; i += 2)
		if (str_eq(&p, (uint32_t)(i / 2)))
			return dict->items[i + 1];
	return NULL;
}

/* --- tensors ---------------------------------------------------------------- */

int pk_global_is(const struct pk_node *n, const char *module, const char *name)
{
	return n && n->kind == PK_GLOBAL && !strcmp(n->v.global.module, module) &&
	       !strcmp(n->v.global.name, name);
}

const struct pk_tensor *pk_as_tensor(const struct pk_node *node)
{
	if (!node)
		return NULL;
	if (node->kind == PK_TENSOR)
		return node->v.tensor;
	if (node->kind == PK_CALL && node->args && node->args->kind == PK_TUPLE && node->args->n &&
	    (pk_global_is(node->cls, "torch._utils", "_rebuild_parameter") ||
	     pk_global_is(node->cls, "torch._utils", "_rebuild_parameter_with_state")) &&
	    node->args->items[0]->kind == PK_TENSOR)
		return node->args->items[0]->v.tensor;
	return NULL;
}

int pk_node_has_children(const struct pk_node *n)
{
	return n->cls || n->args || n->kwargs || n->state || n->n;
}

static struct pk_node *child_at(const struct pk_node *n, size_t k)
{
	switch (k) {
	case 0: return n->cls;
	case 1: return n->args;
	case 2: return n->kwargs;
	case 3: return n->state;
	default: return k - 4 < n->n ? n->items[k - 4] : NULL;
	}
}

int pk_tree_check_height(struct pk_node *root, size_t max_depth)
{
	struct walk { struct pk_node *n; size_t k; uint32_t h; } *st, *bigger;
	size_t sp = 0, cap = 256;
	int rc = 0;

	/* colors: 0 unseen, 1 on the path, 2 done (height final) */
	st = malloc(cap * sizeof(*st));
	if (!st)
		return -ENOMEM;
	st[sp++] = (struct walk){ root, 0, 0 };
	pk_inode_of(root)->color = 1;
	while (sp && !rc) {
		struct walk *w = &st[sp - 1];
		struct pk_inode *in;
		struct pk_node *c;

		if (w->k >= 4 + w->n->n) {
			in = pk_inode_of(w->n);
			in->height = pk_node_has_children(w->n) ? w->h + 1 : 0;
			in->color = 2;
			if (in->height > max_depth)
				rc = -EINVAL;
			if (--sp && st[sp - 1].h < in->height)
				st[sp - 1].h = in->height;
			continue;
		}
		c = child_at(w->n, w->k++);
		if (!c)
			continue;
		in = pk_inode_of(c);
		if (in->color == 1)
			continue;   /* a cycle: the edge back adds nothing */
		if (in->color == 2) {
			if (w->h < in->height)
				w->h = in->height;
			continue;
		}
		if (sp == cap) {
			bigger = realloc(st, 2 * cap * sizeof(*st));
			if (!bigger) {
				rc = -ENOMEM;
				break;
			}
			st = bigger;
			cap *= 2;
		}
		in->color = 1;
		st[sp++] = (struct walk){ c, 0, 0 };
	}
	free(st);
	return rc;
}

/* --- keys as path segments -------------------------------------------------- */

struct out {
	char *p;
	size_t size, len;
	int overflow;
};

static void out_put(struct out *o, const char *s, size_t n)
{
	if (o->len + n >= o->size) {
		o->overflow = 1;
		return;
	}
	memcpy(o->p + o->len, s, n);
	o->len += n;
	o->p[o->len] = '\0';
}

static void out_str(struct out *o, const char *s)
{
	out_put(o, s, strlen(s));
}

/* Shortest "%.*g" that reads back as the same double, like Python's repr. */
static void format_float(char *buf, size_t size, double f)
{
	if (f != f) {
		snprintf(buf, size, "nan");
		return;
	}
	if (f == 1.0 / 0.0 || f == -1.0 / 0.0) {
		snprintf(buf, size, f > 0 ? "inf" : "-inf");
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, f);
		if (strtod(buf, NULL) == f)
			break;
	}
	if (!strpbrk(buf, ".e"))
		strncat(buf, ".0", size - strlen(buf) - 1);
}

/* Decimal digits of a two's-complement integer of any size. */
static void format_long(struct out *o, const uint8_t *p, size_t len)
{
	uint8_t mag[64];
	char digits[160];
	size_t nd = 0, n = len;
	int neg = len && (p[len - 1] & 0x80);

	if (len > sizeof(mag)) {
		out_str(o, "<long>");
		return;
	}
	/* magnitude = |value| */
	for (size_t i = 0, carry = 1; i < n; i++) {
		uint8_t b = neg ? (uint8_t)~p[i] : p[i];
		unsigned sum = b + (neg ? (unsigned)carry : 0);

		mag[i] = (uint8_t)sum;
		carry = sum >> 8;
	}
	while (n && !mag[n - 1])
		n--;
	do {
		unsigned rem = 0;

		for (size_t i = n; i-- > 0;) {
			unsigned cur = rem << 8 | mag[i];

			mag[i] = (uint8_t)(cur / 10);
			rem = cur % 10;
		}
		digits[nd++] = (char)('0' + rem);
		while (n && !mag[n - 1])
			n--;
	} while (n && nd < sizeof(digits));
	if (neg)
		out_put(o, "-", 1);
	while (nd)
		out_put(o, &digits[--nd], 1);
}

static void format_key(struct out *o, const struct pk_node *k, int depth)
{
	char buf[64];

	switch (k->kind) {
	case PK_STR:
		out_put(o, k->v.str.s, k->v.str.len);
		break;
	case PK_INT:
		snprintf(buf, sizeof(buf), "%" PRId64, k->v.i);
		out_str(o, buf);
		break;
	case PK_LONG:
		format_long(o, (const uint8_t *)k->v.str.s, k->v.str.len);
		break;
	case PK_NONE:
		out_str(o, "None");
		break;
	case PK_BOOL:
		out_str(o, k->v.b ? "True" : "False");
		break;
	case PK_FLOAT:
		format_float(buf, sizeof(buf), k->v.f);
		out_str(o, buf);
		break;
	case PK_BYTES:
		out_str(o, "b'");
		for (size_t i = 0; i < k->v.str.len; i++) {
			unsigned char c = (unsigned char)k->v.str.s[i];

			if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') {
				out_put(o, (const char *)&c, 1);
			} else {
				snprintf(buf, sizeof(buf), "\\x%02x", c);
				out_str(o, buf);
			}
		}
		out_str(o, "'");
		break;
	case PK_TUPLE:
		if (depth >= 4) {
			out_str(o, "(...)");
			break;
		}
		out_str(o, "(");
		for (size_t i = 0; i < k->n; i++) {
			if (i)
				out_str(o, ", ");
			format_key(o, k->items[i], depth + 1);
		}
		out_str(o, k->n == 1 ? ",)" : ")");
		break;
	case PK_GLOBAL:
		out_str(o, k->v.global.module);
		out_str(o, ".");
		out_str(o, k->v.global.name);
		break;
	default:
		snprintf(buf, sizeof(buf), "<object %d>", (int)k->kind);
		out_str(o, buf);
		break;
	}
}

int pk_key_to_path(const struct pk_node *key, char *out, size_t size)
{
	struct out o = { out, size, 0, 0 };

	if (!size)
		return -ENOSPC;
	out[0] = '\0';
	format_key(&o, key, 0);
	return o.overflow ? -ENOSPC : 0;
}
