/* The lossy tier's records: policies in STORE/lossy.conf recorded,
 * replaced and removed through the API and read back, malformed files
 * refused with the line; file maps with a lossy section written and read
 * back, damaged ones refused. */
#include "config.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/packstore.h"
#include "ckptfs/store.h"
#include "store/chunk_table.h"
#include "testutil.h"

static void policies(void)
{
	char dir[] = "/tmp/t_lossy_policy.XXXXXX", store[64], conf[80], cmd[96];
	struct ck_lossy_policy p = { .bound = 0.05, .keep_newest = 2 }, q;
	struct ck_error err = { "" };
	struct ck_store *st;
	FILE *f;

	SETUP(mkdtemp(dir) != NULL);
	snprintf(store, sizeof(store), "%s/st", dir);
	snprintf(conf, sizeof(conf), "%s/" CK_LOSSY_CONF, store);
	SETUP(ck_store_init(store, &err) == 0 && ck_store_open(store, 0, &st, &err) == 0);
	CHECK(ck_lossy_policy_get(store, "run", &q, &err) == -ENOENT, "a policy before any was set");
	CHECK(ck_lossy_policy_set(st, "run", &p, &err) == 0, "set: %s", err.msg);
	p.bound = 0.01;
	p.exact_every = 1000;
	CHECK(ck_lossy_policy_set(st, "other run", &p, &err) == 0, "set a second: %s", err.msg);
	CHECK(ck_lossy_policy_get(store, "run", &q, &err) == 0 && q.bound == 0.05 && q.keep_newest == 2 &&
	      q.exact_every == 0, "run's policy reads back");
	CHECK(ck_lossy_policy_get(store, "other run", &q, &err) == 0 && q.bound == 0.01 && q.exact_every == 1000,
	      "a series name with a blank");
	CHECK(q.chain == 0, "a chain read back where none was set: %u", q.chain);
	/* A chain is written only when set, so files without one stay as they were. */
	p.chain = 8;
	CHECK(ck_lossy_policy_set(st, "chained", &p, &err) == 0 && ck_lossy_policy_get(store, "chained", &q, &err) == 0 &&
	      q.chain == 8 && q.exact_every == 1000, "a chain reads back: %u", q.chain);
	SETUP((f = fopen(conf, "r")) != NULL);
	{
		char text[1024];
		size_t len = fread(text, 1, sizeof(text) - 1, f);

		text[len] = 0;
		CHECK(strstr(text, "exact-every=1000 chain=8 series=chained\n") &&
		      strstr(text, "exact-every=0 series=run\n"), "lossy.conf as written:\n%s", text);
	}
	fclose(f);
	p.chain = 65;
	CHECK(ck_lossy_policy_set(st, "chained", &p, &err) == -EINVAL, "a chain over 64 accepted");
	p.chain = 0;
	CHECK(ck_lossy_policy_set(st, "chained", NULL, &err) == 0, "removing the chained policy: %s", err.msg);
	p.bound = 0.2;
	CHECK(ck_lossy_policy_set(st, "run", &p, &err) == 0 && ck_lossy_policy_get(store, "run", &q, &err) == 0 &&
	      q.bound == 0.2, "a policy replaced");
	CHECK(ck_lossy_policy_set(st, "run", NULL, &err) == 0 && ck_lossy_policy_get(store, "run", &q, &err) == -ENOENT &&
	      ck_lossy_policy_get(store, "other run", &q, &err) == 0, "a policy removed, the other kept");
	p.bound = 0.0;
	CHECK(ck_lossy_policy_set(st, "run", &p, &err) == -EINVAL, "bound 0 accepted");
	p.bound = 0.6;
	CHECK(ck_lossy_policy_set(st, "run", &p, &err) == -EINVAL, "bound over 0.5 accepted");
	p.bound = 0.1;
	p.keep_newest = 0;
	CHECK(ck_lossy_policy_set(st, "run", &p, &err) == -EINVAL, "keeping no checkpoint exact accepted");
	p.keep_newest = 1;
	CHECK(ck_lossy_policy_set(st, "a/b", &p, &err) == -EINVAL, "a series name with a slash");
	/* A damaged file: the line is named, compaction's get fails. */
	SETUP((f = fopen(conf, "a")) != NULL);
	fputs("bound=0.1 keep-newest=2 series=x\n", f);
	fclose(f);
	err.msg[0] = 0;
	CHECK(ck_lossy_policy_get(store, "other run", &q, &err) == -EINVAL && strstr(err.msg, "line 3"),
	      "a malformed line: %s", err.msg);
	ck_store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	CHECK(system(cmd) == 0, "cleanup");
}

static void parse(void)
{
	static const struct {
		const char *text;
		int ok;
	} cases[] = {
		{ "", 1 },
		{ "# only a comment\n\n", 1 },
		{ "bound=0.05 keep-newest=2 exact-every=0 series=run\n", 1 },
		{ "bound=1e-3 keep-newest=1 exact-every=5 series=r\n", 1 },
		{ "bound=0.05 keep-newest=2 exact-every=0 series=run", 0 },            /* torn: no newline */
		{ "bound=0.05 keep-newest=2 exact-every=0 series=\n", 0 },
		{ "bound=-0.05 keep-newest=2 exact-every=0 series=run\n", 0 },
		{ "bound=nan keep-newest=2 exact-every=0 series=run\n", 0 },
		{ "bound=0.05 keep-newest=02 exact-every=0 series=run\n", 0 },
		{ "bound=0.05  keep-newest=2 exact-every=0 series=run\n", 0 },
		{ "keep-newest=2 bound=0.05 exact-every=0 series=run\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=0 series=..\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=0 series=r\nbound=0.1 keep-newest=3 exact-every=0 series=r\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=99999999999999999999 series=r\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=0 chain=8 series=r\n", 1 },
		{ "bound=0.05 keep-newest=2 exact-every=0 chain=64 series=chain=2\n", 1 },
		{ "bound=0.05 keep-newest=2 exact-every=0 chain=0 series=r\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=0 chain=65 series=r\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=0 chain=08 series=r\n", 0 },
		{ "bound=0.05 keep-newest=2 chain=8 exact-every=0 series=r\n", 0 },
		{ "bound=0.05 keep-newest=2 exact-every=0 chain= series=r\n", 0 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ck_lossy_policy_entry *v = NULL;
		struct ck_error err = { "" };
		size_t n = 0;
		int rc = ck_lossy_policies_parse(cases[i].text, strlen(cases[i].text), &v, &n, &err);

		CHECK(cases[i].ok ? rc == 0 : rc == -EINVAL && err.msg[0], "case %zu: rc %d (%s)", i, rc, err.msg);
		ck_lossy_policies_free(v, n);
	}
}

static void fmaps(void)
{
	struct ck_fmap m = { .flags = CK_FMAP_PACKED | CK_FMAP_LOSSY, .size = 300, .nchunks = 2,
			     .lossy_method = 1, .lossy_bound = 0.05, .nlossy = 2 }, back;
	struct ck_fmap_chunk chunks[2] = { { { 1, 2 }, 100, 4 }, { { 3, 4 }, 200, 1 } };
	struct ck_lossy_storage l[2] = { { 0, CK_DT_F32, 2.0, 0.1 }, { 3, CK_DT_BF16, 1.0, 0.0 } };
	struct ck_error err = { "" };
	struct ck_buf b = CK_BUF_INIT;

	m.chunks = chunks;
	m.lossy = l;
	SETUP(ck_fmap_put(&b, &m) == 0);
	CHECK(ck_fmap_get(b.data, b.len, &back, &err) == 0, "lossy map: %s", err.msg);
	CHECK(back.flags == m.flags && back.nlossy == 2 && back.lossy_bound == 0.05 && back.lossy[1].storage == 3 &&
	      back.lossy[1].dtype == CK_DT_BF16 && back.lossy[0].max_err == 0.1, "lossy map reads back");
	ck_fmap_clear(&back);
	for (size_t cut = 0; cut < b.len; cut++)
		CHECK(ck_fmap_get(b.data, cut, &back, &err) < 0, "a map cut at %zu parses", cut);
	/* an error past its bound (0.1 > 0.05 * 1.0) is damage */
	l[1].max_err = 0.1;
	b.len = 0;
	SETUP(ck_fmap_put(&b, &m) == 0);
	CHECK(ck_fmap_get(b.data, b.len, &back, &err) == -EIO, "an error past the bound read back");
	l[1].max_err = 0;
	m.flags = CK_FMAP_LOSSY;   /* lossy but not packed */
	b.len = 0;
	SETUP(ck_fmap_put(&b, &m) == 0);
	CHECK(ck_fmap_get(b.data, b.len, &back, &err) == -EIO, "a lossy raw map read back");
	ck_buf_free(&b);
}

int main(void)
{
	parse();
	policies();
	fmaps();
	return test_result();
}
