/* The recipe parser (include/ckptfs/recipe.h): libyaml loads the document
 * (aliases stay references to one node, so the load is linear in the
 * input), then the expanded size of the tree is bounded before anything
 * walks it, and the recipe's keys are read strictly. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "ckptfs/recipe.h"

struct rp {
	yaml_document_t *doc;
	unsigned *line;
	struct ck_error *err;
};

static unsigned line_of(const yaml_node_t *n)
{
	return n ? (unsigned)n->start_mark.line + 1 : 0;
}

static int refuse(struct rp *p, const yaml_node_t *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int refuse(struct rp *p, const yaml_node_t *at, const char *fmt, ...)
{
	va_list ap;

	*p->line = line_of(at);
	if (p->err) {
		va_start(ap, fmt);
		vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

/* --- the document's size, aliases expanded ---------------------------------- */

struct expand {
	yaml_document_t *doc;
	uint64_t *size;       /* by node id - 1: 0 unknown */
	unsigned char *busy;  /* on the current path: an alias cycle */
	unsigned depth;
};

/* Expanded size of node id, saturating past CK_RECIPE_MAX_NODES; UINT64_MAX
 * for a cycle, UINT64_MAX - 1 for nesting too deep. */
static uint64_t expanded(struct expand *x, int id)
{
	yaml_node_t *n = yaml_document_get_node(x->doc, id);
	uint64_t total = 1;

	if (!n)
		return 1;
	if (x->size[id - 1])
		return x->size[id - 1];
	if (x->busy[id - 1])
		return UINT64_MAX;
	if (++x->depth > CK_RECIPE_MAX_DEPTH) {
		x->depth--;
		return UINT64_MAX - 1;
	}
	x->busy[id - 1] = 1;
	if (n->type == YAML_SEQUENCE_NODE) {
		for (yaml_node_item_t *i = n->data.sequence.items.start; i < n->data.sequence.items.top; i++) {
			uint64_t s = expanded(x, *i);

			if (s >= UINT64_MAX - 1) {
				total = s;
				break;
			}
			total += s;
			if (total > CK_RECIPE_MAX_NODES)
				total = CK_RECIPE_MAX_NODES + 1;
		}
	} else if (n->type == YAML_MAPPING_NODE) {
		for (yaml_node_pair_t *pr = n->data.mapping.pairs.start; pr < n->data.mapping.pairs.top; pr++) {
			uint64_t k = expanded(x, pr->key), v = k < UINT64_MAX - 1 ? expanded(x, pr->value) : 0;

			if (k >= UINT64_MAX - 1 || v >= UINT64_MAX - 1) {
				total = k >= UINT64_MAX - 1 ? k : v;
				break;
			}
			total += k + v;
			if (total > CK_RECIPE_MAX_NODES)
				total = CK_RECIPE_MAX_NODES + 1;
		}
	}
	x->busy[id - 1] = 0;
	x->depth--;
	x->size[id - 1] = total;
	return total;
}

static int check_size(struct rp *p)
{
	int nnodes = (int)(p->doc->nodes.top - p->doc->nodes.start);
	struct expand x = { p->doc, NULL, NULL, 0 };
	uint64_t total;

	x.size = calloc((size_t)nnodes + 1, sizeof(*x.size));
	x.busy = calloc((size_t)nnodes + 1, 1);
	if (!x.size || !x.busy) {
		free(x.size);
		free(x.busy);
		return -ENOMEM;
	}
	total = nnodes ? expanded(&x, 1) : 0;
	free(x.size);
	free(x.busy);
	if (total == UINT64_MAX)
		return refuse(p, NULL, "an alias refers to a node that contains it");
	if (total == UINT64_MAX - 1)
		return refuse(p, NULL, "nested deeper than %d levels", CK_RECIPE_MAX_DEPTH);
	if (total > CK_RECIPE_MAX_NODES) {
		*p->line = 0;
		return ck_fail(p->err, E2BIG, "more than %u YAML nodes once aliases are expanded (an alias explosion?)",
			       CK_RECIPE_MAX_NODES);
	}
	return 0;
}

/* --- reading ------------------------------------------------------------------- */

static yaml_node_t *node(struct rp *p, int id)
{
	return yaml_document_get_node(p->doc, id);
}

static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* A scalar value as a new string; refuses other nodes and NUL bytes. */
static int get_string(struct rp *p, const yaml_node_t *n, const char *what, char **out)
{
	const char *s = scalar(n);

	if (!s || strlen(s) != n->data.scalar.length || !*s)
		return refuse(p, n, "%s: expected a non-empty string", what);
	*out = strdup(s);
	return *out ? 0 : -ENOMEM;
}

static int get_int(struct rp *p, const yaml_node_t *n, const char *what, int64_t *out)
{
	const char *s = scalar(n);
	char *end;
	long long v;

	if (!s || !*s || (*s != '-' && (*s < '0' || *s > '9')))
		return refuse(p, n, "%s: expected an integer", what);
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end)
		return refuse(p, n, "%s: expected an integer", what);
	*out = v;
	return 0;
}

/* SERIES/CKPT. */
static int get_ref(struct rp *p, const yaml_node_t *n, struct ck_recipe_ref *ref)
{
	const char *s = scalar(n), *slash;

	if (!s || strlen(s) != n->data.scalar.length)
		return refuse(p, n, "model: expected SERIES/CHECKPOINT");
	slash = strchr(s, '/');
	if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/'))
		return refuse(p, n, "model '%s': expected SERIES/CHECKPOINT of the store", s);
	ref->series = strndup(s, (size_t)(slash - s));
	ref->ckpt = strdup(slash + 1);
	ref->line = line_of(n);
	return ref->series && ref->ckpt ? 0 : -ENOMEM;
}

/* Calls fn for each pair of a mapping with a scalar key, refusing keys
 * given twice. */
typedef int (*pair_fn)(struct rp *p, const char *key, yaml_node_t *k, yaml_node_t *v, void *ctx);

static int each_pair(struct rp *p, const yaml_node_t *map, const char *what, pair_fn fn, void *ctx)
{
	if (!map || map->type != YAML_MAPPING_NODE)
		return refuse(p, map, "%s: expected a mapping", what);
	for (yaml_node_pair_t *a = map->data.mapping.pairs.start; a < map->data.mapping.pairs.top; a++) {
		yaml_node_t *k = node(p, a->key), *v = node(p, a->value);
		const char *key = scalar(k);
		int rc;

		if (!key)
			return refuse(p, k, "%s: keys must be strings", what);
		for (yaml_node_pair_t *b = map->data.mapping.pairs.start; b < a; b++) {
			const char *other = scalar(node(p, b->key));

			if (other && !strcmp(other, key))
				return refuse(p, k, "key '%s' given twice in one mapping", key);
		}
		rc = fn(p, key, k, v, ctx);
		if (rc)
			return rc;
	}
	return 0;
}

static int seq_items(struct rp *p, const yaml_node_t *seq, const char *what, size_t *n)
{
	if (!seq || seq->type != YAML_SEQUENCE_NODE)
		return refuse(p, seq, "%s: expected a list", what);
	*n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
	return 0;
}

struct source_ctx {
	struct ck_recipe_slice *s;
	int has_model, has_range;
};

static int source_pair(struct rp *p, const char *key, yaml_node_t *k, yaml_node_t *v, void *ctx)
{
	struct source_ctx *sc = ctx;
	size_t n = 0;
	int rc;

	if (!strcmp(key, "model")) {
		sc->has_model = 1;
		return get_ref(p, v, &sc->s->model);
	}
	if (!strcmp(key, "layer_range")) {
		rc = seq_items(p, v, "layer_range", &n);
		if (!rc && n != 2)
			rc = refuse(p, v, "layer_range: expected [start, end]");
		if (!rc)
			rc = get_int(p, node(p, v->data.sequence.items.start[0]), "layer_range start", &sc->s->start);
		if (!rc)
			rc = get_int(p, node(p, v->data.sequence.items.start[1]), "layer_range end", &sc->s->end);
		sc->s->line = line_of(v);
		sc->has_range = 1;
		return rc;
	}
	if (!strcmp(key, "parameters"))
		return refuse(p, k, "parameters: a passthrough source takes none (they weight averaging methods)");
	return refuse(p, k, "unknown key '%s' in a source (model, layer_range)", key);
}

struct slice_ctx {
	struct ck_recipe_slice *s;
	int has_sources;
};

static int slice_pair(struct rp *p, const char *key, yaml_node_t *k, yaml_node_t *v, void *ctx)
{
	struct slice_ctx *sl = ctx;
	struct source_ctx sc = { sl->s, 0, 0 };
	size_t n = 0;
	int rc;

	if (!strcmp(key, "sources")) {
		rc = seq_items(p, v, "sources", &n);
		if (!rc && n != 1)
			rc = refuse(p, v,
				    "sources: a passthrough slice takes exactly one source (several would be "
				    "averaged)");
		if (!rc)
			rc = each_pair(p, node(p, v->data.sequence.items.start[0]), "source", source_pair, &sc);
		if (!rc && !sc.has_model)
			rc = refuse(p, node(p, v->data.sequence.items.start[0]), "source: model is missing");
		if (!rc && !sc.has_range)
			rc = refuse(p, node(p, v->data.sequence.items.start[0]), "source: layer_range is missing");
		sl->has_sources = 1;
		return rc;
	}
	if (!strcmp(key, "parameters"))
		return refuse(p, k, "parameters: a passthrough slice takes none");
	return refuse(p, k, "unknown key '%s' in a slice (sources)", key);
}

struct weight_ctx {
	struct ck_recipe_weight *w;
	int has_name, has_model;
};

static int weight_pair(struct rp *p, const char *key, yaml_node_t *k, yaml_node_t *v, void *ctx)
{
	struct weight_ctx *wc = ctx;

	if (!strcmp(key, "name")) {
		wc->has_name = 1;
		wc->w->line = line_of(v);
		return get_string(p, v, "name", &wc->w->name);
	}
	if (!strcmp(key, "model")) {
		wc->has_model = 1;
		return get_ref(p, v, &wc->w->model);
	}
	return refuse(p, k, "unknown key '%s' in a weight (name, model)", key);
}

struct top_ctx {
	struct ck_recipe *r;
	int has_method;
	yaml_node_t *slices;
	yaml_node_t *weights[2];
};

static int read_weights(struct rp *p, struct ck_recipe *r, yaml_node_t *seq, const char *what)
{
	size_t n = 0;
	int rc = seq_items(p, seq, what, &n);
	struct ck_recipe_weight *w;

	if (rc)
		return rc;
	w = realloc(r->weights, (r->nweights + n + 1) * sizeof(*w));
	if (!w)
		return -ENOMEM;
	r->weights = w;
	for (size_t i = 0; i < n && !rc; i++) {
		struct weight_ctx wc = { &r->weights[r->nweights], 0, 0 };
		yaml_node_t *item = node(p, seq->data.sequence.items.start[i]);

		memset(wc.w, 0, sizeof(*wc.w));
		r->nweights++;
		rc = each_pair(p, item, what, weight_pair, &wc);
		if (!rc && !wc.has_name)
			rc = refuse(p, item, "%s: an entry without a name", what);
		if (!rc && !wc.has_model)
			rc = refuse(p, item, "%s: an entry without a model", what);
	}
	return rc;
}

static int top_pair(struct rp *p, const char *key, yaml_node_t *k, yaml_node_t *v, void *ctx)
{
	struct top_ctx *t = ctx;
	const char *s;

	if (!strcmp(key, "merge_method")) {
		s = scalar(v);
		t->has_method = 1;
		if (!s)
			return refuse(p, v, "merge_method: expected a name");
		if (strcmp(s, "passthrough"))
			return refuse(p, v,
				      "merge_method '%s' computes new tensor values (averaging or interpolating "
				      "models): out of scope for recipes, which serve existing bytes without copying; "
				      "use passthrough", s);
		return 0;
	}
	if (!strcmp(key, "slices")) {
		t->slices = v;
		t->r->slices_line = line_of(k);
		return 0;
	}
	if (!strcmp(key, "pre_weights") || !strcmp(key, "post_weights")) {
		t->weights[key[1] == 'o'] = v;
		return 0;
	}
	if (!strcmp(key, "base_model")) {
		t->r->has_base = 1;
		return get_ref(p, v, &t->r->base);
	}
	if (!strcmp(key, "dtype")) {
		t->r->dtype_line = line_of(v);
		return get_string(p, v, "dtype", &t->r->dtype);
	}
	if (!strcmp(key, "models"))
		return refuse(p, k, "models: lists whole models for averaging methods; a recipe takes slices");
	if (!strcmp(key, "parameters"))
		return refuse(p, k, "parameters: passthrough takes none");
	return refuse(p, k,
		      "unknown key '%s' (slices, merge_method, base_model, dtype, pre_weights, post_weights)", key);
}

static int read_recipe(struct rp *p, yaml_node_t *root, struct ck_recipe *r)
{
	struct top_ctx t = { r, 0, NULL, { NULL, NULL } };
	size_t n = 0;
	int rc = each_pair(p, root, "recipe", top_pair, &t);

	if (rc)
		return rc;
	if (!t.has_method)
		return refuse(p, root, "merge_method is missing (recipes are passthrough merges)");
	if (!t.slices)
		return refuse(p, root, "slices are missing");
	rc = seq_items(p, t.slices, "slices", &n);
	if (!rc && !n)
		rc = refuse(p, t.slices, "slices: the list is empty");
	if (rc)
		return rc;
	r->slices = calloc(n, sizeof(*r->slices));
	if (!r->slices)
		return -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		yaml_node_t *item = node(p, t.slices->data.sequence.items.start[i]);
		struct slice_ctx sl = { &r->slices[i], 0 };

		r->nslices++;
		rc = each_pair(p, item, "slice", slice_pair, &sl);
		if (!rc && !sl.has_sources)
			rc = refuse(p, item, "slice: sources are missing");
	}
	for (int w = 0; w < 2 && !rc; w++)
		if (t.weights[w])
			rc = read_weights(p, r, t.weights[w], w ? "post_weights" : "pre_weights");
	if (!rc && !r->has_base) {
		const struct ck_recipe_ref *last = &r->slices[r->nslices - 1].model;

		r->base.series = strdup(last->series);
		r->base.ckpt = strdup(last->ckpt);
		r->base.line = last->line;
		if (!r->base.series || !r->base.ckpt)
			rc = -ENOMEM;
	}
	return rc;
}

int ck_recipe_parse(const char *text, size_t len, struct ck_recipe **out, unsigned *line, struct ck_error *err)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	struct ck_recipe *r;
	struct rp p = { &doc, line, err };
	yaml_node_t *root;
	int rc;

	*line = 0;
	if (len > CK_RECIPE_MAX_BYTES)
		return ck_fail(err, E2BIG, "%zu bytes: a recipe is at most %u bytes", len, CK_RECIPE_MAX_BYTES);
	if (memchr(text, 0, len))
		return ck_fail(err, EINVAL, "the document holds a NUL byte");
	if (!yaml_parser_initialize(&parser))
		return -ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		*line = (unsigned)parser.problem_mark.line + 1;
		rc = parser.error == YAML_MEMORY_ERROR ? -ENOMEM
						      : ck_fail(err, EINVAL, "not YAML: %s",
								parser.problem ? parser.problem : "unreadable");
		yaml_parser_delete(&parser);
		return rc;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		yaml_document_delete(&doc);
		yaml_parser_delete(&parser);
		return ck_fail(err, EINVAL, "the document is empty");
	}
	/* One document only: a second would be silently ignored otherwise. */
	if (yaml_parser_load(&parser, &extra)) {
		yaml_node_t *more = yaml_document_get_root_node(&extra);

		*line = more ? line_of(more) : 0;
		yaml_document_delete(&extra);
		if (more) {
			yaml_document_delete(&doc);
			yaml_parser_delete(&parser);
			return ck_fail(err, EINVAL, "a second YAML document: a recipe is one");
		}
	} else {
		*line = (unsigned)parser.problem_mark.line + 1;
		yaml_document_delete(&doc);
		rc = ck_fail(err, EINVAL, "not YAML: %s", parser.problem ? parser.problem : "unreadable");
		yaml_parser_delete(&parser);
		return rc;
	}
	r = calloc(1, sizeof(*r));
	rc = r ? check_size(&p) : -ENOMEM;
	if (!rc)
		rc = read_recipe(&p, root, r);
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	if (rc) {
		ck_recipe_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

static void ref_free(struct ck_recipe_ref *ref)
{
	free(ref->series);
	free(ref->ckpt);
}

void ck_recipe_free(struct ck_recipe *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->nslices; i++)
		ref_free(&r->slices[i].model);
	free(r->slices);
	for (size_t i = 0; i < r->nweights; i++) {
		free(r->weights[i].name);
		ref_free(&r->weights[i].model);
	}
	free(r->weights);
	ref_free(&r->base);
	free(r->dtype);
	free(r);
}

int ck_recipe_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > CK_RECIPE_MAX_NAME || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char ch = name[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
		      ch == '_' || ch == '-'))
			return 0;
	}
	return 1;
}
