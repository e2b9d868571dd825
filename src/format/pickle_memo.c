/* The unpickler's memo: index -> node.  Indices written by CPython count
 * up from 0 and live in an array; any other index (a pickle may PUT at
 * 4,000,000,000 once) goes to a hash table, so memory follows the number
 * of entries, never the size of the indices. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "pickle_int.h"

struct probe {
	const struct pk_memo *m;
	uint64_t idx;
};

static int sparse_eq(const void *ctx, uint32_t pos)
{
	const struct probe *p = ctx;

	return p->m->sparse[pos].idx == p->idx;
}

static uint64_t idx_hash(uint64_t idx)
{
	return pk_hash_bytes(&idx, sizeof(idx));
}

static struct pk_memo_entry *sparse_find(const struct pk_memo *m, uint64_t idx)
{
	struct probe p = { m, idx };
	long pos;

	if (!m->nsparse)
		return NULL;
	pos = pk_htab_find(&m->sparse_tab, idx_hash(idx), sparse_eq, &p);
	return pos >= 0 ? &m->sparse[pos] : NULL;
}

struct pk_node *pk_memo_get(const struct pk_memo *m, uint64_t idx)
{
	struct pk_memo_entry *e;

	if (idx < m->ndense && m->dense[idx])
		return m->dense[idx];
	e = sparse_find(m, idx);
	return e ? e->node : NULL;
}

int pk_memo_put(struct pk_memo *m, uint64_t idx, struct pk_node *n)
{
	struct pk_memo_entry *e;

	/* Dense while indices stay close to the number of entries. */
	if (idx >= m->ndense && idx < 2 * (uint64_t)m->len + 4096) {
		size_t cap = m->ndense ? m->ndense : 1024;
		struct pk_node **d;

		while (cap <= idx)
			cap *= 2;
		d = realloc(m->dense, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		memset(d + m->ndense, 0, (cap - m->ndense) * sizeof(*d));
		m->dense = d;
		m->ndense = cap;
	}
	/* An index that went to the table before the array covered it stays
	 * there, so that each index lives in one place. */
	e = sparse_find(m, idx);
	if (e) {
		e->node = n;
		return 0;
	}
	if (idx < m->ndense) {
		if (!m->dense[idx])
			m->len++;
		m->dense[idx] = n;
		return 0;
	}
	if (m->nsparse == m->sparse_cap) {
		struct pk_memo_entry *s = ck_grow(m->sparse, &m->sparse_cap, sizeof(*s), 64);

		if (!s)
			return -ENOMEM;
		m->sparse = s;
	}
	if (pk_htab_add(&m->sparse_tab, idx_hash(idx), (uint32_t)m->nsparse))
		return -ENOMEM;
	m->sparse[m->nsparse++] = (struct pk_memo_entry){ idx, n };
	m->len++;
	return 0;
}

void pk_memo_free(struct pk_memo *m)
{
	free(m->dense);
	free(m->sparse);
	pk_htab_free(&m->sparse_tab);
	memset(m, 0, sizeof(*m));
}
