/* Dict keys by value: hashing and equality with Python's semantics for the
 * kinds a checkpoint uses as keys (str, int, bool, float, None, bytes and
 * tuples of those), and identity for everything else.
 *
 * Both walks are iterative and bounded: tuple keys come from untrusted
 * pickles and may be deep or share sub-tuples (a DAG whose paths explode).
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pickle_int.h"

#define MIX1 0x9e3779b97f4a7c15ULL
#define MIX2 0xc2b2ae3d27d4eb4fULL

/* Pairs of nodes compared before equality gives up and says "different"
 * (identity semantics for absurdly large keys). */
#define EQUAL_BUDGET (1u << 20)
/* Nested uncached tuples walked while hashing one key. */
#define HASH_STACK_MAX 100000

static uint64_t mix(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

static uint64_t int_hash(int64_t v)
{
	uint8_t b[8];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)((uint64_t)v >> (8 * i));
	return pk_hash_bytes(b, sizeof(b)) ^ 0x1;
}

/* A float that equals an int64 (Python: hash(1.0) == hash(1)). */
static int float_as_int(double f, int64_t *v)
{
	if (!(f >= -9223372036854775808.0 && f < 9223372036854775808.0) || f != floor(f))
		return 0;
	*v = (int64_t)f;
	return 1;
}

/* The value of a number node as int64, when it has one. */
static int number_as_int(const struct pk_node *n, int64_t *v)
{
	switch (n->kind) {
	case PK_BOOL:
		*v = n->v.b ? 1 : 0;
		return 1;
	case PK_INT:
		*v = n->v.i;
		return 1;
	case PK_FLOAT:
		return float_as_int(n->v.f, v);
	case PK_LONG:
		return pk_bytes_to_int64((const uint8_t *)n->v.str.s, n->v.str.len, v);
	default:
		return 0;
	}
}

static int is_number(enum pk_kind k)
{
	return k == PK_BOOL || k == PK_INT || k == PK_FLOAT || k == PK_LONG;
}

static uint64_t child_hash(const struct pk_node *n);

static uint64_t cached(const struct pk_node *n)
{
	return atomic_load_explicit(&pk_inode_of(n)->hash, memory_order_relaxed);
}

static void cache(const struct pk_node *n, uint64_t h)
{
	atomic_store_explicit(&pk_inode_of(n)->hash, h, memory_order_relaxed);
}

/* Hash of a node whose children (if a tuple) are hashed already. */
static uint64_t hash_one(const struct pk_node *n)
{
	uint64_t h;
	int64_t iv;

	switch (n->kind) {
	case PK_NONE:
		return 0x4e6f6e65ULL;
	case PK_BOOL:
	case PK_INT:
	case PK_FLOAT:
	case PK_LONG:
		if (number_as_int(n, &iv))
			return int_hash(iv);
		if (n->kind == PK_FLOAT)
			return pk_hash_bytes(&n->v.f, sizeof(n->v.f)) ^ 0x2;
		h = cached(n);
		if (!h) {
			size_t len = pk_bytes_minimal_len((const uint8_t *)n->v.str.s, n->v.str.len);

			h = pk_hash_bytes(n->v.str.s, len) * 7 | 1;
			cache(n, h);
		}
		return h;
	case PK_STR:
	case PK_BYTES:
		h = cached(n);
		if (!h) {
			h = pk_hash_bytes(n->v.str.s, n->v.str.len) * (n->kind == PK_STR ? 3 : 5) | 1;
			cache(n, h);
		}
		return h;
	case PK_GLOBAL:
		h = cached(n);
		if (!h) {
			h = (pk_hash_bytes(n->v.global.module, strlen(n->v.global.module)) * MIX1 ^
			     pk_hash_bytes(n->v.global.name, strlen(n->v.global.name))) | 1;
			cache(n, h);
		}
		return h;
	case PK_TUPLE:
		h = cached(n);
		if (!h) {
			h = (uint64_t)n->n * MIX2 + 0x7475706c65ULL;
			for (size_t i = 0; i < n->n; i++)
				h = mix(h ^ child_hash(n->items[i]));
			h |= 1;
			cache(n, h);
		}
		return h;
	default:
		return mix((uint64_t)(uintptr_t)n) | 1;
	}
}

static uint64_t child_hash(const struct pk_node *n)
{
	/* Only reached for tuple children that the caller made sure are hashed. */
	if (n->kind == PK_TUPLE)
		return cached(n);
	return hash_one(n);
}

int pk_key_hash(const struct pk_node *key, uint64_t *out)
{
	struct frame { const struct pk_node *t; size_t i; } local[16], *st = local, *big;
	size_t sp = 0, cap = 16;

	if (key->kind != PK_TUPLE || cached(key)) {
		*out = hash_one(key);
		return 0;
	}
	/* Post-order over the tuples not hashed yet: children first. */
	st[sp++] = (struct frame){ key, 0 };
	while (sp) {
		struct frame *f = &st[sp - 1];

		if (f->i < f->t->n) {
			const struct pk_node *c = f->t->items[f->i++];

			if (c->kind != PK_TUPLE || cached(c))
				continue;
			if (sp == cap) {
				if (cap >= HASH_STACK_MAX)
					goto fail;   /* only a cycle of tuples gets here */
				big = st == local ? malloc(2 * cap * sizeof(*st))
						  : realloc(st, 2 * cap * sizeof(*st));
				if (!big)
					goto fail;
				if (st == local)
					memcpy(big, local, sizeof(local));
				st = big;
				cap *= 2;
			}
			st[sp++] = (struct frame){ c, 0 };
			continue;
		}
		hash_one(f->t);
		sp--;
	}
	if (st != local)
		free(st);
	*out = cached(key);
	return 0;
fail:
	if (st != local)
		free(st);
	return -ENOMEM;
}

/* Equality of two nodes without looking into tuple items; *descend is set
 * when both are tuples of the same length whose items must be compared. */
static int shallow_equal(const struct pk_node *a, const struct pk_node *b, int *descend)
{
	int64_t x, y;

	*descend = 0;
	if (is_number(a->kind) && is_number(b->kind)) {
		if (a->kind == PK_FLOAT && b->kind == PK_FLOAT)
			return a->v.f == b->v.f;
		if (number_as_int(a, &x) && number_as_int(b, &y))
			return x == y;
		if (a->kind == PK_LONG && b->kind == PK_LONG) {
			size_t la = pk_bytes_minimal_len((const uint8_t *)a->v.str.s, a->v.str.len);
			size_t lb = pk_bytes_minimal_len((const uint8_t *)b->v.str.s, b->v.str.len);

			return la == lb && !memcmp(a->v.str.s, b->v.str.s, la);
		}
		return 0;
	}
	if (a->kind != b->kind)
		return 0;
	switch (a->kind) {
	case PK_NONE:
		return 1;
	case PK_STR:
	case PK_BYTES:
		return a->v.str.len == b->v.str.len && !memcmp(a->v.str.s, b->v.str.s, a->v.str.len);
	case PK_GLOBAL:
		return !strcmp(a->v.global.module, b->v.global.module) &&
		       !strcmp(a->v.global.name, b->v.global.name);
	case PK_TUPLE:
		if (a->n != b->n)
			return 0;
		if (cached(a) && cached(b) && cached(a) != cached(b))
			return 0;
		*descend = 1;
		return 1;
	default:
		return 0;    /* identity was checked by the caller */
	}
}

int pk_key_equal(const struct pk_node *a, const struct pk_node *b)
{
	struct pair { const struct pk_node *a, *b; } local[32], *st = local, *big;
	size_t sp = 0, cap = 32, budget = EQUAL_BUDGET;
	int equal = 1, descend;

	st[sp++] = (struct pair){ a, b };
	while (sp && equal) {
		struct pair p = st[--sp];

		if (p.a == p.b)
			continue;
		if (!--budget || !shallow_equal(p.a, p.b, &descend)) {
			equal = 0;
			break;
		}
		if (!descend)
			continue;
		if (p.a->n > cap - sp) {
			size_t ncap = cap;

			while (ncap - sp < p.a->n)
				ncap *= 2;
			big = st == local ? malloc(ncap * sizeof(*st)) : realloc(st, ncap * sizeof(*st));
			if (!big) {
				equal = 0;   /* cannot tell: treat as different objects */
				break;
			}
			if (st == local)
				memcpy(big, local, sp * sizeof(*st));
			st = big;
			cap = ncap;
		}
		for (size_t i = p.a->n; i-- > 0;)
			st[sp++] = (struct pair){ p.a->items[i], p.b->items[i] };
	}
	if (st != local)
		free(st);
	return equal;
}
