/* The series' lossy policies: STORE/lossy.conf, one line a series
 * (docs/format.md, "The lossy tier"), read by every compaction and
 * rewritten whole (ck_file_replace) by ckptctl lossy. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/fileio.h"
#include "ckptfs/packstore.h"
#include "store/chunk_table.h"
#include "store/index.h"
#include "store/manifest.h"

#define CONF_MAX_BYTES (1u << 20)
#define KEEP_NEWEST_MAX 1000000u
#define HEADER "# ckptfs lossy policies (ckptctl lossy): bound, newest kept exact, steps kept exact, " \
	"[longest chain,] series\n"

int ck_lossy_policy_check(const struct ck_lossy_policy *p, struct ck_error *err)
{
	if (!(p->bound > 0 && p->bound <= CK_LOSSY_BOUND_MAX))
		return ck_fail(err, EINVAL, "lossy bound %g: must be over 0 and at most %g", p->bound, CK_LOSSY_BOUND_MAX);
	if (p->keep_newest < 1 || p->keep_newest > KEEP_NEWEST_MAX)
		return ck_fail(err, EINVAL, "keep-newest %u: must be 1 to %u (the newest checkpoint stays exact)",
			       p->keep_newest, KEEP_NEWEST_MAX);
	if (p->chain > CK_PACK_MAX_CHAIN)
		return ck_fail(err, EINVAL, "chain %u: at most %d", p->chain, CK_PACK_MAX_CHAIN);
	return 0;
}

void ck_lossy_policies_free(struct ck_lossy_policy_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].series);
	free(v);
}

/* A decimal number without sign or leading zeros (but "0"). */
static int get_u64(const char *p, const char *end, uint64_t *out)
{
	uint64_t v = 0;

	if (p == end || (*p == '0' && end - p > 1))
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	return 0;
}

/* "KEY=VALUE " at *p: the value's bounds, *p past the blank. */
static int field(const char **p, const char *eol, const char *key, const char **v, const char **vend)
{
	size_t k = strlen(key);
	const char *sp;

	if ((size_t)(eol - *p) < k + 1 || memcmp(*p, key, k) != 0 || (*p)[k] != '=')
		return -1;
	*v = *p + k + 1;
	sp = memchr(*v, ' ', (size_t)(eol - *v));
	if (!sp)
		return -1;
	*vend = sp;
	*p = sp + 1;
	return 0;
}

/* One line: "bound=B keep-newest=N exact-every=K [chain=C ]series=NAME". */
static int parse_line(const char *p, const char *eol, struct ck_lossy_policy_entry *e)
{
	const char *v, *ve;
	char num[64], *end;
	uint64_t u;

	if (field(&p, eol, "bound", &v, &ve) || (size_t)(ve - v) >= sizeof(num) || ve == v)
		return -1;
	memcpy(num, v, (size_t)(ve - v));
	num[ve - v] = '\0';
	errno = 0;
	e->p.bound = strtod(num, &end);
	if (errno || *end || !(num[0] >= '0' && num[0] <= '9'))
		return -1;
	if (field(&p, eol, "keep-newest", &v, &ve) || get_u64(v, ve, &u) || u > KEEP_NEWEST_MAX)
		return -1;
	e->p.keep_newest = (unsigned)u;
	if (field(&p, eol, "exact-every", &v, &ve) || get_u64(v, ve, &u))
		return -1;
	e->p.exact_every = u;
	if (field(&p, eol, "chain", &v, &ve) == 0) {
		if (get_u64(v, ve, &u) || u == 0 || u > CK_PACK_MAX_CHAIN)
			return -1;
		e->p.chain = (unsigned)u;
	}
	if ((size_t)(eol - p) < 8 || memcmp(p, "series=", 7) != 0)
		return -1;
	p += 7;
	e->series = strndup(p, (size_t)(eol - p));
	if (!e->series || strlen(e->series) != (size_t)(eol - p) || ck_manifest_check_name(e->series) < 0)
		return -1;
	return 0;
}

int ck_lossy_policies_parse(const char *text, size_t len, struct ck_lossy_policy_entry **out, size_t *n,
			    struct ck_error *err)
{
	struct ck_lossy_policy_entry *v = NULL;
	size_t nv = 0, cap = 0, line = 0;
	const char *p = text, *end = text + len;

	*out = NULL;
	*n = 0;
	if (len > CONF_MAX_BYTES)
		return ck_fail(err, EINVAL, "lossy.conf: over %u bytes", CONF_MAX_BYTES);
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		struct ck_lossy_policy_entry e = { 0 };

		line++;
		if (!eol) {
			ck_lossy_policies_free(v, nv);
			return ck_fail(err, EINVAL, "lossy.conf line %zu: no newline at the end (torn?)", line);
		}
		if (p == eol || *p == '#') {
			p = eol + 1;
			continue;
		}
		if (parse_line(p, eol, &e) < 0 || ck_lossy_policy_check(&e.p, NULL) < 0) {
			free(e.series);
			ck_lossy_policies_free(v, nv);
			return ck_fail(err, EINVAL, "lossy.conf line %zu: not \"bound=B keep-newest=N exact-every=K "
				       "[chain=C ]series=NAME\" with 0 < B <= %g, N >= 1 and 1 <= C <= %d", line,
				       CK_LOSSY_BOUND_MAX, CK_PACK_MAX_CHAIN);
		}
		for (size_t i = 0; i < nv; i++)
			if (strcmp(v[i].series, e.series) == 0) {
				free(e.series);
				ck_lossy_policies_free(v, nv);
				return ck_fail(err, EINVAL, "lossy.conf line %zu: a second policy for one series", line);
			}
		if (nv == cap) {
			struct ck_lossy_policy_entry *g = realloc(v, (cap ? 2 * cap : 8) * sizeof(*g));

			if (!g) {
				free(e.series);
				ck_lossy_policies_free(v, nv);
				return ck_fail(err, ENOMEM, "out of memory");
			}
			v = g;
			cap = cap ? 2 * cap : 8;
		}
		v[nv++] = e;
		p = eol + 1;
	}
	*out = v;
	*n = nv;
	return 0;
}

static char *conf_path(const char *store)
{
	return ck_path_join(store, CK_LOSSY_CONF);
}

int ck_lossy_policies_load(const char *store, struct ck_lossy_policy_entry **out, size_t *n, struct ck_error *err)
{
	char *path = conf_path(store);
	uint8_t *text = NULL;
	size_t len = 0;
	int rc;

	*out = NULL;
	*n = 0;
	if (!path)
		return ck_fail(err, ENOMEM, "out of memory");
	rc = ck_read_file(path, CONF_MAX_BYTES, &text, &len);
	if (rc == -ENOENT)
		rc = 0;   /* no policy recorded */
	else if (rc < 0)
		ck_fail(err, -rc, "%s: %s", path, rc == -EFBIG ? "over 1 MiB" : strerror(-rc));
	else
		rc = ck_lossy_policies_parse((const char *)text, len, out, n, err);
	free(text);
	free(path);
	return rc;
}

int ck_lossy_policy_get(const char *store, const char *series, struct ck_lossy_policy *out, struct ck_error *err)
{
	struct ck_lossy_policy_entry *v;
	size_t n;
	int rc = ck_lossy_policies_load(store, &v, &n, err);

	if (rc < 0)
		return rc;
	rc = -ENOENT;
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].series, series) == 0) {
			*out = v[i].p;
			rc = 0;
		}
	ck_lossy_policies_free(v, n);
	return rc;
}

/* The policies as lossy.conf text, the series in name order. */
static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct ck_lossy_policy_entry *)a)->series,
		      ((const struct ck_lossy_policy_entry *)b)->series);
}

static int store_conf(const char *store, struct ck_lossy_policy_entry *v, size_t n, struct ck_error *err)
{
	struct ck_buf b = CK_BUF_INIT;
	char *path = conf_path(store), line[96];
	int rc = 0;

	qsort(v, n, sizeof(*v), cmp_entry);
	rc |= ck_buf_puts(&b, HEADER);
	for (size_t i = 0; i < n && rc == 0; i++) {
		snprintf(line, sizeof(line), "bound=%.17g keep-newest=%u exact-every=%" PRIu64 " ", v[i].p.bound,
			 v[i].p.keep_newest, v[i].p.exact_every);
		rc |= ck_buf_puts(&b, line);
		if (v[i].p.chain) {
			snprintf(line, sizeof(line), "chain=%u ", v[i].p.chain);
			rc |= ck_buf_puts(&b, line);
		}
		rc |= ck_buf_puts(&b, "series=");
		rc |= ck_buf_puts(&b, v[i].series);
		rc |= ck_buf_putc(&b, '\n');
	}
	if (rc || !path)
		rc = ck_fail(err, ENOMEM, "out of memory");
	else
		rc = ck_file_replace(path, b.data, b.len, err);
	ck_buf_free(&b);
	free(path);
	return rc;
}

int ck_lossy_policy_set(struct ck_store *st, const char *series, const struct ck_lossy_policy *p,
			struct ck_error *err)
{
	struct ck_lossy_policy_entry *v = NULL;
	size_t n = 0, at;
	int fd, rc;

	if (st->readonly)
		return ck_fail(err, EROFS, "%s: store opened read-only", st->path);
	if (ck_manifest_check_name(series) < 0 || strchr(series, '\n'))
		return ck_fail(err, EINVAL, "'%s': not a series name", series);
	if (p && (rc = ck_lossy_policy_check(p, err)) < 0)
		return rc;
	rc = ck_store_commit_lock(st, &fd, err);
	if (rc < 0)
		return rc;
	rc = ck_lossy_policies_load(st->path, &v, &n, err);
	if (rc < 0)
		goto out;
	for (at = 0; at < n && strcmp(v[at].series, series) != 0; at++)
		;
	if (at == n && p) {
		struct ck_lossy_policy_entry *g = realloc(v, (n + 1) * sizeof(*g));

		if (!g) {
			rc = ck_fail(err, ENOMEM, "out of memory");
			goto out;
		}
		v = g;
		v[n].series = strdup(series);
		if (!v[n].series) {
			rc = ck_fail(err, ENOMEM, "out of memory");
			goto out;
		}
		n++;
	}
	if (p) {
		v[at].p = *p;
	} else if (at < n) {
		free(v[at].series);
		v[at] = v[--n];
	}
	rc = store_conf(st->path, v, n, err);
out:
	ck_lossy_policies_free(v, n);
	ck_store_unlock(fd);
	return rc;
}
