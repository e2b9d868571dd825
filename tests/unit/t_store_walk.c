/* The tensor walk (walk.h) over pickles assembled opcode by opcode here,
 * the way torch.save writes them (docs/formats.md §2.2): nested dicts,
 * lists and tuples, nn.Parameter wrappers, a file that is one tensor, and
 * hostile shapes (deep nesting, a list that contains itself, a DAG whose
 * paths explode) that must end with an error instead of a crash or a hang. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/pickle.h"
#include "ckptfs/walk.h"
#include "t_store_pk.h"
#include "testutil.h"

static struct pk_doc *parse(struct pk *p)
{
	struct ck_error err = { { 0 } };
	struct pk_doc *doc = NULL;
	int rc;

	pka_op(p, ".", 1);
	rc = pk_parse(p->b.data, p->b.len, NULL, &doc, &err);
	CHECK(rc == 0, "pk_parse: %s", err.msg);
	ck_buf_free(&p->b);
	return rc == 0 ? doc : NULL;
}

/* ---- collecting the walk ---- */

struct seen {
	char paths[32][128];
	unsigned rows[32];
	int n;
	int stop_after;   /* > 0: stop the walk after that many tensors */
};

static int on_tensor(void *ctx, const char *path, const struct pk_node *node, const struct pk_tensor *t)
{
	struct seen *s = ctx;

	if (s->n < 32) {
		snprintf(s->paths[s->n], sizeof(s->paths[0]), "%s", path);
		s->rows[s->n] = t->ndim ? (unsigned)t->shape[0] : 0;
	}
	s->n++;
	CHECK(node && pk_as_tensor(node) == t, "%s: node and tensor disagree", path);
	return s->stop_after && s->n == s->stop_after ? 42 : 0;
}

static void state_tree(void)
{
	struct pk p = { .b = CK_BUF_INIT };
	struct seen s = { .n = 0 };
	struct pk_doc *doc;
	int rc;

	/* {'model': {'layers.0.weight': T(2,3), 'embed': P(4,3)},
	 *  'state': {0: {'exp_avg': T(5), 'step': T(1)}},
	 *  'list': [T(6), (T(7), 'x'), {'deep': T(8)}],
	 *  'epoch': 3} */
	pka_op(&p, "\x80\x02}", 3);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "model");
	pka_op(&p, "}", 1);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "layers.0.weight");
	pka_tensor(&p, 2, 3);
	pka_str(&p, "embed");
	pka_parameter(&p, 4, 3);
	pka_op(&p, "u", 1);
	pka_str(&p, "state");
	pka_op(&p, "}", 1);
	pka_put(&p);
	pka_int1(&p, 0);
	pka_op(&p, "}", 1);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "exp_avg");
	pka_tensor(&p, 5, 0);
	pka_str(&p, "step");
	pka_tensor(&p, 1, 0);
	pka_op(&p, "u", 1);
	pka_op(&p, "s", 1);
	pka_str(&p, "list");
	pka_op(&p, "]", 1);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_tensor(&p, 6, 0);
	pka_tensor(&p, 7, 0);
	pka_str(&p, "x");
	pka_op(&p, "\x86", 1);
	pka_put(&p);
	pka_op(&p, "}", 1);
	pka_put(&p);
	pka_str(&p, "deep");
	pka_tensor(&p, 8, 0);
	pka_op(&p, "s", 1);
	pka_op(&p, "e", 1);
	pka_str(&p, "epoch");
	pka_int1(&p, 3);
	pka_op(&p, "u", 1);
	doc = parse(&p);
	if (!doc)
		return;
	rc = ck_walk_tensors(pk_doc_root(doc), on_tensor, &s);
	CHECK(rc == 0, "walk returned %d", rc);
	CHECK(s.n == 7, "%d tensors", s.n);
	if (s.n == 7) {
		static const char *const want[] = {
			"model.layers.0.weight", "model.embed", "state.0.exp_avg", "state.0.step",
			"list.0", "list.1.0", "list.2.deep",
		};
		static const unsigned rows[] = { 2, 4, 5, 1, 6, 7, 8 };
		int i;

		for (i = 0; i < 7; i++) {
			CHECK(!strcmp(s.paths[i], want[i]), "tensor %d is '%s', want '%s'", i, s.paths[i], want[i]);
			CHECK(s.rows[i] == rows[i], "%s: %u rows, want %u", want[i], s.rows[i], rows[i]);
		}
	}
	/* A non-zero return stops the walk and is passed back. */
	memset(&s, 0, sizeof(s));
	s.stop_after = 3;
	rc = ck_walk_tensors(pk_doc_root(doc), on_tensor, &s);
	CHECK(rc == 42 && s.n == 3, "early stop: rc %d after %d tensors", rc, s.n);
	pk_doc_free(doc);
}

static void single_tensor(void)
{
	struct pk p = { .b = CK_BUF_INIT };
	struct seen s = { .n = 0 };
	struct pk_doc *doc;

	pka_op(&p, "\x80\x02", 2);
	pka_tensor(&p, 3, 2);
	doc = parse(&p);
	if (!doc)
		return;
	CHECK(ck_walk_tensors(pk_doc_root(doc), on_tensor, &s) == 0, "walk of a tensor");
	CHECK(s.n == 1 && s.paths[0][0] == '\0' && s.rows[0] == 3, "root tensor: %d, '%s'", s.n, s.paths[0]);
	pk_doc_free(doc);
}

static void deep_nesting(void)
{
	struct pk p = { .b = CK_BUF_INIT };
	struct seen s = { .n = 0 };
	struct pk_doc *doc;
	int i, rc;

	/* CK_WALK_MAX_DEPTH + 10 lists, each inside the one before. */
	pka_op(&p, "\x80\x02", 2);
	for (i = 0; i < CK_WALK_MAX_DEPTH + 10; i++)
		pka_op(&p, "]", 1);
	pka_tensor(&p, 1, 0);
	for (i = 0; i < CK_WALK_MAX_DEPTH + 10; i++)
		pka_op(&p, "a", 1);
	doc = parse(&p);
	if (!doc)
		return;
	rc = ck_walk_tensors(pk_doc_root(doc), on_tensor, &s);
	CHECK(rc == -ELOOP && s.n == 0, "deep nesting: rc %d, %d tensors", rc, s.n);
	pk_doc_free(doc);
}

static void self_containing(void)
{
	struct pk p = { .b = CK_BUF_INIT };
	struct seen s = { .n = 0 };
	struct pk_doc *doc;
	int rc;

	/* l = [T]; l.append(l) */
	pka_op(&p, "\x80\x02]", 3);
	pka_put(&p);
	pka_tensor(&p, 2, 0);
	pka_op(&p, "a", 1);
	pka_op(&p, "h\x00" "a", 3);
	doc = parse(&p);
	if (!doc)
		return;
	rc = ck_walk_tensors(pk_doc_root(doc), on_tensor, &s);
	CHECK(rc == 0 && s.n == 1 && !strcmp(s.paths[0], "0"), "cycle: rc %d, %d tensors", rc, s.n);
	pk_doc_free(doc);
}

static void exploding_dag(void)
{
	struct pk p = { .b = CK_BUF_INIT };
	struct seen s = { .n = 0 };
	struct pk_doc *doc;
	char get[2] = { 'h', 0 };
	int i, rc;

	/* l0 = [T]; l(i) = [l(i-1), l(i-1)]: 2^60 paths in a few hundred bytes. */
	pka_op(&p, "\x80\x02]", 3);
	pka_tensor(&p, 1, 0);
	pka_op(&p, "a", 1);
	for (i = 0; i < 60; i++) {
		/* memoize the previous list as 200 + (i % 2), then build [prev, prev] */
		char mput[2] = { 'q', (char)(200 + i % 2) };

		pka_op(&p, mput, 2);
		pka_op(&p, "0", 1);                          /* POP: only memo refers to it now */
		get[1] = (char)(200 + i % 2);
		pka_op(&p, "(", 1);
		pka_op(&p, get, 2);
		pka_op(&p, get, 2);
		pka_op(&p, "l", 1);
	}
	doc = parse(&p);
	if (!doc)
		return;
	rc = ck_walk_tensors_max(pk_doc_root(doc), 100000, on_tensor, &s);
	CHECK(rc == -E2BIG && s.n > 0 && s.n < 100000, "exploding DAG: rc %d after %d tensors", rc, s.n);
	/* The same shape, small enough: every path is reported. */
	pk_doc_free(doc);
	memset(&s, 0, sizeof(s));
	p.b = (struct ck_buf)CK_BUF_INIT;
	pka_op(&p, "\x80\x02]", 3);
	pka_tensor(&p, 1, 0);
	pka_op(&p, "a", 1);
	for (i = 0; i < 10; i++) {
		char mput[2] = { 'q', (char)(200 + i % 2) };

		pka_op(&p, mput, 2);
		pka_op(&p, "0", 1);                          /* POP: only memo refers to it now */
		get[1] = (char)(200 + i % 2);
		pka_op(&p, "(", 1);
		pka_op(&p, get, 2);
		pka_op(&p, get, 2);
		pka_op(&p, "l", 1);
	}
	doc = parse(&p);
	if (!doc)
		return;
	rc = ck_walk_tensors(pk_doc_root(doc), on_tensor, &s);
	CHECK(rc == 0 && s.n == 1024, "shared lists: rc %d, %d tensors", rc, s.n);
	CHECK(!strcmp(s.paths[0], "0.0.0.0.0.0.0.0.0.0.0") && !strcmp(s.paths[1], "0.0.0.0.0.0.0.0.0.1.0"),
	      "shared lists: paths '%s', '%s'", s.paths[0], s.paths[1]);
	pk_doc_free(doc);
}

static int on_unreadable(void *ctx, const char *path, const struct pk_node *node)
{
	struct seen *s = ctx;

	snprintf(s->paths[31], sizeof(s->paths[31]), "%s", path);
	return 7;
}

/* A rebuild call the VM cannot read (its storage's numel is a string) is
 * passed over by the plain walk and reported through opts.unreadable. */
static void unreadable_tensor(void)
{
	static const struct ck_walk_opts opts = { .unreadable = on_unreadable };
	struct pk p = { .b = CK_BUF_INIT };
	struct seen s = { .n = 0 };
	struct pk_doc *doc;
	int rc;

	pka_op(&p, "\x80\x02}", 3);
	pka_put(&p);
	pka_op(&p, "(", 1);
	pka_str(&p, "good");
	pka_tensor(&p, 2, 0);
	pka_str(&p, "bad");
	pka_global(&p, "torch._utils", "_rebuild_tensor_v2");
	pka_op(&p, "((", 2);
	pka_str(&p, "storage");
	pka_global(&p, "torch", "FloatStorage");
	pka_str(&p, "9");
	pka_str(&p, "cpu");
	pka_str(&p, "many");                       /* numel must be an int */
	pka_op(&p, "tQ", 2);
	pka_int1(&p, 0);
	pka_int1(&p, 4);
	pka_op(&p, "\x85", 1);
	pka_int1(&p, 1);
	pka_op(&p, "\x85\x89", 2);
	pka_global(&p, "collections", "OrderedDict");
	pka_op(&p, ")RtRu", 5);
	doc = parse(&p);
	if (!doc)
		return;
	rc = ck_walk_tensors(pk_doc_root(doc), on_tensor, &s);
	CHECK(rc == 0 && s.n == 1 && !strcmp(s.paths[0], "good"), "plain walk: rc %d, %d tensors", rc, s.n);
	memset(&s, 0, sizeof(s));
	rc = ck_walk_tensors_opts(pk_doc_root(doc), &opts, on_tensor, &s);
	CHECK(rc == 7 && s.n == 1 && !strcmp(s.paths[31], "bad"), "unreadable: rc %d, path '%s'", rc, s.paths[31]);
	pk_doc_free(doc);
}

int main(void)
{
	unreadable_tensor();
	state_tree();
	single_tensor();
	deep_nesting();
	self_containing();
	exploding_dag();
	CHECK(ck_walk_tensors(NULL, on_tensor, NULL) == 0, "NULL root");
	return test_result();
}
