/* Completeness of checkpoints: each checkpoint is reduced to a sorted set
 * of keys ("relpath" for each file, "relpath\x1ftensor" for each tensor)
 * and compared with the union of the keys of the steps before it. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "completeness.h"

struct keyset {
	char **v;
	size_t n, cap;
};

struct cli_completeness {
	struct keyset seen;     /* union over the checkpoints fed so far */
};

static void keyset_free(struct keyset *k)
{
	size_t i;

	for (i = 0; i < k->n; i++)
		free(k->v[i]);
	free(k->v);
	memset(k, 0, sizeof(*k));
}

static int keyset_add(struct keyset *k, const char *a, const char *b)
{
	size_t la = strlen(a), lb = b ? strlen(b) : 0;
	char *s;

	if (k->n == k->cap) {
		char **v = ck_grow(k->v, &k->cap, sizeof(*v), 64);

		if (!v)
			return -ENOMEM;
		k->v = v;
	}
	s = malloc(la + lb + 2);
	if (!s)
		return -ENOMEM;
	memcpy(s, a, la);
	s[la] = '\0';
	if (b) {
		s[la] = '\x1f';
		memcpy(s + la + 1, b, lb + 1);
	}
	k->v[k->n++] = s;
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void keyset_sort_unique(struct keyset *k)
{
	size_t i, j = 0;

	if (k->n > 1)
		qsort(k->v, k->n, sizeof(*k->v), cmp);
	for (i = 0; i < k->n; i++) {
		if (j && strcmp(k->v[j - 1], k->v[i]) == 0)
			free(k->v[i]);
		else
			k->v[j++] = k->v[i];
	}
	k->n = j;
}

/* 1 if every key of sub is in sup (both sorted). */
static int keyset_subset(const struct keyset *sub, const struct keyset *sup)
{
	size_t i = 0, j = 0;

	while (i < sub->n) {
		int c;

		if (j == sup->n)
			return 0;
		c = strcmp(sub->v[i], sup->v[j]);
		if (c < 0)
			return 0;
		if (c == 0)
			i++;
		j++;
	}
	return 1;
}

/* seen := seen ∪ cur; takes cur's strings (cur is left empty). */
static int keyset_merge(struct keyset *seen, struct keyset *cur)
{
	size_t need = seen->n + cur->n;

	if (need > seen->cap) {
		char **v = realloc(seen->v, need * sizeof(*v));

		if (!v)
			return -ENOMEM;
		seen->v = v;
		seen->cap = need;
	}
	if (cur->n)
		memcpy(seen->v + seen->n, cur->v, cur->n * sizeof(*cur->v));
	seen->n = need;
	free(cur->v);
	memset(cur, 0, sizeof(*cur));
	keyset_sort_unique(seen);
	return 0;
}

int cli_completeness_new(struct cli_completeness **out)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void cli_completeness_free(struct cli_completeness *c)
{
	if (!c)
		return;
	keyset_free(&c->seen);
	free(c);
}

static int file_keys(struct ck_store *st, const struct ck_file_info *f, struct keyset *cur, size_t *ntensors)
{
	struct ck_tensor_info *t;
	size_t n, i;
	int rc;

	rc = keyset_add(cur, f->relpath, NULL);
	if (rc < 0 || f->ntensors == 0)
		return rc;
	rc = ck_store_list_tensors(st, f->id, &t, &n);
	if (rc < 0)
		return rc;
	for (i = 0; i < n && rc == 0; i++)
		rc = keyset_add(cur, f->relpath, t[i].name);
	*ntensors += n;
	ck_tensor_info_free(t, n);
	return rc;
}

int cli_completeness_add(struct cli_completeness *c, struct ck_store *st, const struct ck_ckpt_info *ck,
			 struct cli_ckpt_summary *out)
{
	struct keyset cur = { 0 };
	struct ck_file_info *f;
	size_t n, i;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = ck_store_list_files(st, ck->id, &f, &n);
	if (rc < 0)
		return rc;
	for (i = 0; i < n && rc == 0; i++) {
		out->files++;
		if (f[i].kind == CK_FILE_BAD)
			out->bad++;
		rc = file_keys(st, &f[i], &cur, &out->tensors);
	}
	ck_file_info_free(f, n);
	if (rc == 0) {
		keyset_sort_unique(&cur);
		out->complete = keyset_subset(&c->seen, &cur);
		rc = keyset_merge(&c->seen, &cur);
	}
	keyset_free(&cur);
	return rc;
}
