/* A checkpoint's catalog (include/ckptfs/catalog.h): its files classified
 * by the rules there, its model weights and optimizer moments with their
 * layers and sources. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/buf.h"
#include "ckptfs/dcp.h"
#include "ckptfs/layers.h"
#include "ckptfs/log.h"
#include "ckptfs/records.h"
#include "ckptfs/str.h"
#include "ctl_int.h"

static const char *const model_entries[] = { "model", "state_dict", "module", "model_state_dict" };
static const char *const optim_entries[] = { "optimizer", "optimizer_state_dict" };
static const char *const torch_model_names[] = { "pytorch_model.bin", "model.pt", "model.pth", "model.bin" };
static const char *const optim_names[] = { "optimizer.pt", "optimizer.bin", "optimizer.pth" };
static const char *const side_exact[] = {
	"config.json", "generation_config.json", "special_tokens_map.json", "added_tokens.json", "vocab.json",
	"vocab.txt", "merges.txt", "spiece.model", "preprocessor_config.json",
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static int in_list(const char *name, const char *const *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, list[i]))
			return 1;
	return 0;
}

/* "PREFIX-*-of-*SUFFIX", the sharded names transformers writes. */
static int is_shard(const char *name, const char *prefix, const char *suffix)
{
	return !strncmp(name, prefix, strlen(prefix)) && ck_ends_with(name, suffix) && strstr(name, "-of-");
}

static int is_side_file(const char *name)
{
	return in_list(name, side_exact, N_OF(side_exact)) || !strncmp(name, "tokenizer", 9) ||
	       !strncmp(name, "chat_template.", 14);
}

long ck_layer_block(const char *layer)
{
	char *end;
	long n;

	if (strncmp(layer, "layers.", 7) || layer[7] < '0' || layer[7] > '9')
		return -1;
	n = strtol(layer + 7, &end, 10);
	return *end || n < 0 ? -1 : n;
}

/* --- building ---------------------------------------------------------------- */

struct builder {
	struct ck_view *v;
	struct ck_catalog *cat;
	const struct ck_layer_rules *rules;
	size_t capfiles;
};

static void item_free(struct ck_cat_item *it)
{
	if (it)
		free(it->name);
	free(it);
}

static void entry_free(struct ck_cat_tensor *e)
{
	for (size_t i = 0; i < e->npieces; i++)
		item_free(e->pieces[i].item);
	free(e->pieces);
	free(e->name);
	free(e->path);
	free(e->param);
	free(e->moment);
	free(e->layer);
}

static void entries_free(struct ck_cat_tensor *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		entry_free(&v[i]);
	free(v);
}

void ck_catalog_free(struct ck_catalog *c)
{
	if (!c)
		return;
	entries_free(c->weights, c->nweights);
	entries_free(c->moments, c->nmoments);
	entries_free(c->pt_weights, c->npt_weights);
	for (size_t i = 0; i < c->nstates; i++) {
		free(c->states[i].param);
		free(c->states[i].layer);
	}
	free(c->states);
	free(c->st_files);
	ck_strv_free(c->side_names, c->nside);
	free(c->side_files);
	ck_strv_free(c->paths, c->nfiles);
	free(c->files);
	free(c->by_name);
	free(c->pt_by_name);
	free(c->states_by_param);
	free(c);
}

static int layer_of(struct builder *b, const char *name, char **out)
{
	char layer[256];

	if (!b->rules || ck_layer_of(b->rules, name, layer, sizeof(layer)))
		snprintf(layer, sizeof(layer), "other");
	*out = strdup(layer);
	return *out ? 0 : -ENOMEM;
}

static int add_file(struct builder *b, const char *path, const struct ck_vnode *n)
{
	struct ck_catalog *c = b->cat;

	if (c->nfiles == b->capfiles) {
		size_t cap = b->capfiles ? b->capfiles * 2 : 16;
		char **p = realloc(c->paths, cap * sizeof(*p));
		const struct ck_vnode **f;

		if (!p)
			return -ENOMEM;
		c->paths = p;
		f = realloc(c->files, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		c->files = f;
		b->capfiles = cap;
	}
	c->paths[c->nfiles] = strdup(path);
	if (!c->paths[c->nfiles])
		return -ENOMEM;
	c->files[c->nfiles++] = n;
	return 0;
}

/* Every file under dir, by relative path. */
static int collect_files(struct builder *b, const struct ck_vnode *dir)
{
	const struct ck_vnode **kids;
	size_t n;
	uint64_t changes;
	int rc = ck_view_children(b->v, dir, &kids, &n, &changes);

	for (size_t i = 0; i < n && !rc; i++) {
		const char *rel = ck_vnode_relpath(kids[i]);

		rc = rel ? add_file(b, rel, kids[i]) : collect_files(b, kids[i]);
	}
	free(kids);
	return rc;
}

/* Tensors of one file, as ck_view_tensors gives them. */
struct tensor_list {
	struct ck_cat_tensor *v;
	size_t n, cap;
	const struct ck_vnode *file;
	const char *prefix;         /* kept and stripped, or NULL for all */
	int rc;
};

static int on_tensor(void *ctx, const struct ck_vtensor *t)
{
	struct tensor_list *l = ctx;
	struct ck_cat_tensor *e;
	const char *name = t->name;

	if (l->prefix) {
		size_t k = strlen(l->prefix);

		if (strncmp(name, l->prefix, k) || name[k] != '.' || !name[k + 1])
			return 0;
		name += k + 1;
	}
	if (l->n == l->cap) {
		e = ck_grow(l->v, &l->cap, sizeof(*e), 64);
		if (!e)
			return l->rc = -ENOMEM;
		l->v = e;
	}
	e = &l->v[l->n];
	memset(e, 0, sizeof(*e));
	e->name = strdup(name);
	e->path = strdup(t->name);
	/* The view's layer is the name's when nothing was stripped (the rules
	 * are not run twice). */
	e->layer = name == t->name && t->layer ? strdup(t->layer) : NULL;
	l->n++;
	if (!e->name || !e->path || (name == t->name && t->layer && !e->layer))
		return l->rc = -ENOMEM;
	e->dtype = t->dtype;
	e->ndim = t->ndim;
	if (t->ndim > 0)
		memcpy(e->shape, t->shape, (size_t)t->ndim * sizeof(*e->shape));
	e->source = t->source;
	e->offset = t->src_offset;
	e->nbytes = t->nbytes;
	e->contiguous = t->contiguous;
	e->node = t->node;
	e->src_ckpt = t->src_ckpt;
	e->src_step = t->src_step;
	e->file = l->file;
	return 0;
}

static int file_tensors(struct builder *b, const struct ck_vnode *file, const char *prefix, struct tensor_list *l)
{
	int rc;

	l->file = file;
	l->prefix = prefix;
	rc = ck_view_tensors(b->v, file, on_tensor, l);
	if (l->rc)
		return l->rc;
	if (rc == -ENOMEM)
		return rc;
	if (rc < 0)
		ck_warn("%s/%s: %s: its tensors are left out of the catalog: %s", b->cat->ckpt.series,
			b->cat->ckpt.name, ck_vnode_relpath(file)[0] ? ck_vnode_relpath(file) : "(file)", strerror(-rc));
	return 0;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp((*(struct ck_cat_tensor *const *)a)->name, (*(struct ck_cat_tensor *const *)b)->name);
}

/* Entries by name, ties in list order (a stable sort). */
static int name_then_pos_cmp(const void *a, const void *b)
{
	const struct ck_cat_tensor *x = *(struct ck_cat_tensor *const *)a, *y = *(struct ck_cat_tensor *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : (x < y ? -1 : x > y);
}

/* Drops entries whose name an earlier entry has (files in name order: the
 * first file holding a name keeps it). */
static int dedupe(struct tensor_list *l)
{
	struct ck_cat_tensor **idx = malloc((l->n + 1) * sizeof(*idx));
	unsigned char *drop = calloc(l->n + 1, 1);
	size_t k = 0;

	if (!idx || !drop) {
		free(idx);
		free(drop);
		return -ENOMEM;
	}
	for (size_t i = 0; i < l->n; i++)
		idx[i] = &l->v[i];
	qsort(idx, l->n, sizeof(*idx), name_then_pos_cmp);
	for (size_t i = 1; i < l->n; i++)
		if (!strcmp(idx[i - 1]->name, idx[i]->name))
			drop[idx[i] - l->v] = 1;
	for (size_t i = 0; i < l->n; i++) {
		if (drop[i])
			entry_free(&l->v[i]);
		else
			l->v[k++] = l->v[i];
	}
	l->n = k;
	free(idx);
	free(drop);
	return 0;
}

/* The entry of a model state dict in a combined file's tree, or NULL. */
static const char *model_entry_of(const struct pk_node *root)
{
	if (!root || root->kind != PK_DICT)
		return NULL;
	for (size_t i = 0; i < N_OF(model_entries); i++) {
		const struct pk_node *e = pk_dict_get_str(root, model_entries[i]);

		if (e && e->kind == PK_DICT)
			return model_entries[i];
	}
	return NULL;
}

static int is_torch(const struct ck_vnode *n)
{
	return ck_vnode_file_kind(n) == CK_FILE_TORCH;
}

/* Rules 1-3 of the header: which files hold the model weights. */
static int find_model(struct builder *b, const struct ck_vnode ***torch_files, size_t *ntorch)
{
	struct ck_catalog *c = b->cat;
	const struct ck_vnode **tf = calloc(c->nfiles + 1, sizeof(*tf));
	size_t nt = 0;

	c->st_files = calloc(c->nfiles + 1, sizeof(*c->st_files));
	if (!tf || !c->st_files) {
		free(tf);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->nfiles; i++) {
		const char *p = c->paths[i];

		if (strchr(p, '/'))
			continue;
		if (ck_vnode_file_kind(c->files[i]) == CK_FILE_SAFETENSORS &&
		    (!strcmp(p, "model.safetensors") || is_shard(p, "model-", ".safetensors")))
			c->st_files[c->nst_files++] = c->files[i];
		else if (is_torch(c->files[i]) &&
			 (in_list(p, torch_model_names, N_OF(torch_model_names)) || is_shard(p, "pytorch_model-", ".bin") ||
			  !p[0]))
			tf[nt++] = c->files[i];
	}
	/* A combined file (rule 3): the state dict sits under an entry. */
	if (nt == 1 || !nt) {
		const struct ck_vnode *cand = nt ? tf[0] : NULL;

		for (size_t i = 0; !nt && !c->nst_files && i < c->nfiles; i++)
			if (!strchr(c->paths[i], '/') && is_torch(c->files[i]) &&
			    !in_list(c->paths[i], optim_names, N_OF(optim_names))) {
				const struct pk_node *root;

				if (!ck_view_file_tree(b->v, c->files[i], &root) && model_entry_of(root)) {
					cand = c->files[i];
					break;
				}
			}
		if (cand) {
			const struct pk_node *root;

			if (!ck_view_file_tree(b->v, cand, &root) && model_entry_of(root)) {
				c->torch_entry = model_entry_of(root);
				tf[0] = cand;
				nt = 1;
			}
		}
	}
	*torch_files = tf;
	*ntorch = nt;
	return 0;
}

static int entry_layers(struct builder *b, struct ck_cat_tensor *v, size_t n)
{
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++) {
		v[i].role = CK_CAT_WEIGHT;
		v[i].src_series = b->cat->ckpt.series;
		v[i].param = strdup(v[i].name);
		if (!v[i].param)
			rc = -ENOMEM;
		else if (!v[i].layer)
			rc = layer_of(b, v[i].name, &v[i].layer);
	}
	return rc;
}

/* A copy of it (none for NULL): 0 or -ENOMEM. */
static int item_copy(const struct ck_cat_item *it, struct ck_cat_item **out)
{
	*out = NULL;
	if (!it)
		return 0;
	*out = malloc(sizeof(**out));
	if (!*out)
		return -ENOMEM;
	**out = *it;
	(*out)->name = strdup(it->name);
	if (!(*out)->name) {
		free(*out);
		*out = NULL;
		return -ENOMEM;
	}
	return 0;
}

int cat_entry_copy(const struct ck_cat_tensor *src, struct ck_cat_tensor *dst)
{
	*dst = *src;
	dst->name = strdup(src->name);
	dst->path = strdup(src->path);
	dst->param = src->param ? strdup(src->param) : NULL;
	dst->moment = src->moment ? strdup(src->moment) : NULL;
	dst->layer = src->layer ? strdup(src->layer) : NULL;
	dst->pieces = NULL;
	dst->npieces = 0;
	if (src->npieces && (dst->pieces = calloc(src->npieces, sizeof(*dst->pieces)))) {
		for (size_t i = 0; i < src->npieces; i++) {
			dst->pieces[i] = src->pieces[i];
			if (item_copy(src->pieces[i].item, &dst->pieces[i].item))
				break;
			dst->npieces++;
		}
	}
	if (dst->npieces != src->npieces || !dst->name || !dst->path || (src->param && !dst->param) || (src->moment && !dst->moment) ||
	    (src->layer && !dst->layer)) {
		entry_free(dst);
		return -ENOMEM;
	}
	return 0;
}

/* Weights: the torch state dict's tensors (with nodes), the safetensors
 * files' (bytes, in the torch order where it has them). */
static int load_weights(struct builder *b)
{
	struct ck_catalog *c = b->cat;
	const struct ck_vnode **tf = NULL;
	struct tensor_list pt = { 0 }, st = { 0 };
	size_t nt = 0;
	int rc;

	rc = find_model(b, &tf, &nt);
	for (size_t i = 0; i < nt && !rc; i++)
		rc = file_tensors(b, tf[i], c->torch_entry, &pt);
	if (!rc && nt)
		rc = dedupe(&pt);
	for (size_t i = 0; i < c->nst_files && !rc; i++)
		rc = file_tensors(b, c->st_files[i], NULL, &st);
	if (!rc && c->nst_files)
		rc = dedupe(&st);
	if (!rc)
		rc = entry_layers(b, pt.v, pt.n);
	if (!rc)
		rc = entry_layers(b, st.v, st.n);
	if (rc)
		goto out;
	c->torch_model = nt ? tf[0] : NULL;
	c->pt_weights = pt.v;
	c->npt_weights = pt.n;
	pt.v = NULL;
	pt.n = 0;
	if (!c->nst_files) {
		c->model = c->torch_model ? (c->torch_entry ? CK_CAT_MODEL_COMBINED : CK_CAT_MODEL_TORCH)
					  : CK_CAT_MODEL_NONE;
		c->weights = calloc(c->npt_weights + 1, sizeof(*c->weights));
		if (!c->weights) {
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < c->npt_weights && !rc; i++)
			if (!(rc = cat_entry_copy(&c->pt_weights[i], &c->weights[i])))
				c->nweights++;
		goto out;
	}
	c->model = CK_CAT_MODEL_SAFETENSORS;
	/* safetensors bytes in the state dict's order: names the torch file has
	 * first, in its order, then the others in file order. */
	{
		struct ck_cat_tensor **sidx = malloc((st.n + 1) * sizeof(*sidx)), key, *kp = &key, **hit;
		unsigned char *used = calloc(st.n + 1, 1);

		c->weights = calloc(st.n + 1, sizeof(*c->weights));
		if (!sidx || !used || !c->weights) {
			free(sidx);
			free(used);
			rc = -ENOMEM;
			goto out;
		}
		for (size_t i = 0; i < st.n; i++)
			sidx[i] = &st.v[i];
		qsort(sidx, st.n, sizeof(*sidx), name_cmp);
		for (size_t i = 0; i < c->npt_weights; i++) {
			key.name = c->pt_weights[i].name;
			hit = st.n ? bsearch(&kp, sidx, st.n, sizeof(*sidx), name_cmp) : NULL;
			if (hit && !used[*hit - st.v]) {
				used[*hit - st.v] = 1;
				c->weights[c->nweights++] = **hit;
			}
		}
		for (size_t i = 0; i < st.n; i++)
			if (!used[i])
				c->weights[c->nweights++] = st.v[i];
		free(sidx);
		free(used);
		free(st.v);   /* the strings moved into c->weights */
		st.v = NULL;
		st.n = 0;
	}
out:
	entries_free(pt.v, pt.n);
	entries_free(st.v, st.n);
	free(tf);
	return rc;
}

/* --- rule 4: a DCP save -------------------------------------------------------- */

#define DCP_MODEL_PREFIX "model."
#define MAX_DCP_METADATA (256u << 20)

static const char *const dcp_optim_prefixes[] = { "optim.state.", "optimizer.state." };

/* The .metadata as the mount serves it (the merged save): 0 and *out, or
 * -errno (logged). */
static int dcp_read_metadata(struct builder *b, const struct ck_vnode *n, struct ck_dcp_meta **out)
{
	struct ck_vfile *f = NULL;
	struct ck_error err = { "" };
	uint8_t *buf = NULL;
	uint64_t size, done = 0;
	int rc = ck_view_open_file(b->v, n, &f);

	if (rc)
		return rc;
	size = ck_vfile_size(f);
	if (size > MAX_DCP_METADATA) {
		ck_vfile_put(f);
		return -EFBIG;
	}
	buf = malloc(size + 1);
	rc = buf ? 0 : -ENOMEM;
	while (!rc && done < size) {
		ssize_t got = ck_vfile_read(f, buf + done, (size_t)(size - done), done);

		if (got <= 0)
			rc = got < 0 ? (int)got : -EIO;
		else
			done += (uint64_t)got;
	}
	ck_vfile_put(f);
	if (!rc) {
		rc = ck_dcp_parse(buf, (size_t)size, out, &err);
		if (rc && rc != -ENOMEM)
			ck_warn("%s/%s: .metadata: %s", b->cat->ckpt.series, b->cat->ckpt.name, err.msg);
	}
	free(buf);
	return rc;
}

static int item_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ck_cat_tensor *)a)->path, ((const struct ck_cat_tensor *)b)->path);
}

static const struct ck_cat_tensor *find_item(const struct tensor_list *items, const char *name)
{
	struct ck_cat_tensor key;

	key.path = (char *)name;
	return items->n ? bsearch(&key, items->v, items->n, sizeof(key), item_cmp) : NULL;
}

/* Whether an item's bytes are the chunk's elements: the storage of its
 * blob (the view lists the range the store recorded under the item's
 * name), of the chunk's dtype and exactly its size. */
static int item_raw(const struct ck_cat_tensor *it, const struct ck_dcp_entry *e, const uint64_t *sizes)
{
	uint64_t n = ck_dtype_size(e->dtype);

	for (int d = 0; d < e->ndim; d++)
		n *= sizes[d];
	return it->contiguous && it->dtype == e->dtype && it->nbytes == n && n;
}

static int run_cmp(const void *a, const void *b)
{
	const struct ctl_run *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* Runs of a tensor larger than this are not served (each is an extent of
 * every file built from the tensor). */
#define MAX_RUNS (1u << 22)

/* The dimension chunk c splits e in: the last in which it does not span
 * the whole tensor (-1: it is the whole tensor).  Each of its rows over
 * the dimensions before that one is one run. */
static int split_dim(const struct ck_dcp_chunk *c, const struct ck_dcp_entry *e)
{
	int D = -1;

	for (int d = 0; d < e->ndim; d++)
		if (c->sizes[d] != e->size[d])
			D = d;
	return D;
}

int ctl_dcp_runs(const struct ck_dcp_meta *m, const struct ck_dcp_entry *e, const size_t *order,
		 struct ctl_run **out, size_t *n)
{
	uint64_t gstride[CK_MAX_DIMS], numel = 1, total = 0, cap = 0, end = 0;
	struct ctl_run *r;
	size_t nr = 0;

	*out = NULL;
	*n = 0;
	for (int d = e->ndim; d-- > 0;) {
		gstride[d] = numel;
		numel *= e->size[d];
	}
	for (size_t k = 0; k < e->nchunks; k++) {
		const struct ck_dcp_chunk *c = &m->chunks[order[k]];
		uint64_t runs = 1;
		int D = split_dim(c, e);

		for (int d = 0; d < e->ndim; d++)
			if (c->offsets[d] > e->size[d] || c->sizes[d] > e->size[d] - c->offsets[d])
				return -1;
		for (int d = 0; d < D; d++)
			runs *= c->sizes[d];
		cap += runs;
		if (cap > MAX_RUNS)
			return -1;
	}
	r = malloc((cap ? cap : 1) * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (size_t k = 0; k < e->nchunks; k++) {
		const struct ck_dcp_chunk *c = &m->chunks[order[k]];
		uint64_t idx[CK_MAX_DIMS] = { 0 }, len = 1, from = 0;
		int D = split_dim(c, e);

		for (int d = D < 0 ? 0 : D; d < e->ndim; d++)
			len *= c->sizes[d];
		for (int d = 0; d < e->ndim; d++)
			if (!c->sizes[d])
				len = 0;
		if (!len)
			continue;   /* an empty chunk holds nothing */
		for (;;) {
			uint64_t at = 0;
			int d;

			for (d = 0; d < e->ndim; d++)
				at += (c->offsets[d] + (d < D ? idx[d] : 0)) * gstride[d];
			r[nr++] = (struct ctl_run){ at, from, len, k };
			total += len;
			from += len;
			/* the next row over the dimensions before D */
			for (d = D - 1; d >= 0 && ++idx[d] == c->sizes[d]; d--)
				idx[d] = 0;
			if (d < 0)
				break;
		}
	}
	qsort(r, nr, sizeof(*r), run_cmp);
	for (size_t i = 0; i < nr; i++) {
		if (r[i].at != end) {
			free(r);
			return -1;   /* a gap or an overlap */
		}
		end += r[i].len;
	}
	if (total != numel || end != numel) {
		free(r);
		return -1;
	}
	*out = r;
	*n = nr;
	return 0;
}

/* An entry for DCP tensor e from its items: its bytes and provenance, the
 * whole tensor's dtype and shape, name and path (the FQN) given.  Its
 * pieces are the runs of its chunks (ctl_dcp_runs) when it has several. */
static int dcp_entry(struct builder *b, const struct ck_dcp_meta *m, const struct ck_dcp_entry *e,
		     const struct tensor_list *items, const char *name, struct ck_cat_tensor *out)
{
	const struct ck_cat_tensor **its = calloc(e->nchunks + 1, sizeof(*its));
	size_t *order = calloc(e->nchunks + 1, sizeof(*order));
	char **names = calloc(e->nchunks + 1, sizeof(*names));
	struct ctl_run *runs = NULL;
	size_t nruns = 0, esize = ck_dtype_size(e->dtype);
	int tiled = -1, rc = 0;

	memset(out, 0, sizeof(*out));
	if (!its || !order || !names) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t k = 0; k < e->nchunks; k++)
		order[k] = e->chunks[k];
	out->name = strdup(name);
	out->path = strdup(e->fqn);
	if (!out->name || !out->path) {
		rc = -ENOMEM;
		goto out;
	}
	out->dtype = e->dtype;
	out->ndim = e->ndim;
	memcpy(out->shape, e->size, sizeof(out->shape));
	out->file = b->cat->dcp_save;
	out->contiguous = 1;
	for (size_t k = 0; k < e->nchunks && !rc; k++) {
		const struct ck_dcp_chunk *c = &m->chunks[order[k]];

		names[k] = ck_dcp_item_name(e, c);
		its[k] = names[k] ? find_item(items, names[k]) : NULL;
		if (!names[k]) {
			rc = -ENOMEM;
			break;
		}
		if (!its[k]) {
			/* a store indexed before DCP items had names */
			ck_warn("%s/%s: DCP item %s has no bytes in the index: tensor '%s' left out",
				b->cat->ckpt.series, b->cat->ckpt.name, names[k], e->fqn);
			rc = -ENOENT;
			break;
		}
		if (!item_raw(its[k], e, c->sizes))
			out->contiguous = 0;
		out->nbytes += its[k]->nbytes;
	}
	if (rc || !e->nchunks)
		goto out;
	tiled = ctl_dcp_runs(m, e, order, &runs, &nruns);
	if (tiled == -ENOMEM) {
		rc = -ENOMEM;
		goto out;
	}
	if (tiled)
		out->contiguous = 0;
	/* The first chunk in the tensor's order gives the provenance. */
	{
		const struct ck_cat_tensor *first = its[tiled == 0 && nruns ? runs[0].k : 0];

		out->source = first->source;
		out->offset = first->offset;
		out->src_ckpt = first->src_ckpt;
		out->src_step = first->src_step;
	}
	if (tiled || nruns < 2)
		goto out;   /* not served; or one run, the item's bytes */
	out->pieces = calloc(nruns, sizeof(*out->pieces));
	if (!out->pieces) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nruns; i++) {
		const struct ck_cat_tensor *it = its[runs[i].k];
		struct ck_cat_piece *p = &out->pieces[i];

		p->source = it->source;
		p->offset = it->offset + runs[i].from * esize;
		p->nbytes = runs[i].len * esize;
		out->npieces++;
		if (runs[i].from == 0) {   /* the item's first run carries it */
			const struct ck_dcp_chunk *c = &m->chunks[order[runs[i].k]];

			p->item = calloc(1, sizeof(*p->item));
			if (!p->item) {
				rc = -ENOMEM;
				break;
			}
			p->item->name = names[runs[i].k];
			names[runs[i].k] = NULL;
			p->item->nbytes = it->nbytes;
			memcpy(p->item->shape, c->sizes, sizeof(p->item->shape));
		}
	}
out:
	for (size_t k = 0; names && k < e->nchunks; k++)
		free(names[k]);
	free(names);
	free(its);
	free(order);
	free(runs);
	if (rc)
		entry_free(out);
	return rc;
}

/* The weight whose name P leaves one component in rest = "P.<moment>"
 * (the longest), or NULL. */
static const struct ck_cat_tensor *moment_param(const struct ck_cat_tensor *w, size_t nw, const char *rest)
{
	const struct ck_cat_tensor *best = NULL;

	for (size_t i = 0; i < nw; i++) {
		size_t k = strlen(w[i].name);

		if (!strncmp(rest, w[i].name, k) && rest[k] == '.' && rest[k + 1] && !strchr(rest + k + 1, '.') &&
		    (!best || k > strlen(best->name)))
			best = &w[i];
	}
	return best;
}

static int push_entry(struct tensor_list *l, struct ck_cat_tensor *e)
{
	if (l->n == l->cap) {
		struct ck_cat_tensor *v = ck_grow(l->v, &l->cap, sizeof(*v), 64);

		if (!v)
			return -ENOMEM;
		l->v = v;
	}
	l->v[l->n++] = *e;
	return 0;
}

/* The moment of DCP tensor e ("optim.state." + rest), named after its
 * parameter among the weights. */
static int dcp_moment(struct builder *b, const struct ck_dcp_meta *m, const struct ck_dcp_entry *e,
		      const struct tensor_list *items, const char *rest, struct tensor_list *out)
{
	struct ck_catalog *c = b->cat;
	const struct ck_cat_tensor *w = moment_param(c->weights, c->nweights, rest);
	const char *dot = strrchr(rest, '.');
	char param[600], full[800];
	struct ck_cat_tensor t;
	int rc;

	if (!dot || !dot[1])
		return 0;
	if (w)
		snprintf(param, sizeof(param), "%s", w->name);
	else
		snprintf(param, sizeof(param), "state.%.*s", (int)(dot - rest), rest);
	snprintf(full, sizeof(full), "optimizer.%s.%s", param, dot + 1);
	rc = dcp_entry(b, m, e, items, full, &t);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	t.role = CK_CAT_MOMENT;
	t.src_series = c->ckpt.series;
	t.param = strdup(param);
	t.moment = strdup(dot + 1);
	t.layer = w ? strdup(w->layer) : strdup("optimizer");
	if (!w)
		c->moments_named = 0;
	if (!t.param || !t.moment || !t.layer || push_entry(out, &t)) {
		entry_free(&t);
		return -ENOMEM;
	}
	return 0;
}

static int is_dcp_save(const struct ck_vnode *n)
{
	const char *rel = ck_vnode_relpath(n), *slash = rel ? strrchr(rel, '/') : NULL;

	return rel && !strcmp(slash ? slash + 1 : rel, CK_DCP_METADATA) && ck_vnode_file_kind(n) == CK_FILE_OTHER;
}

/* Every tensor of the DCP save whose .metadata is n, whole (its chunks
 * assembled), name and path its FQN: for the previous saved value of a
 * tensor (the layers view), which a sharded tensor's items alone do not
 * give.  A save that cannot be read has none. */
static int dcp_tensors(struct builder *b, const struct ck_vnode *n, struct tensor_list *out)
{
	struct tensor_list items = { 0 };
	struct ck_dcp_meta *m = NULL;
	int rc;

	b->cat->dcp_save = n;
	rc = dcp_read_metadata(b, n, &m);
	if (rc)
		return rc == -ENOMEM ? rc : 0;
	rc = file_tensors(b, n, NULL, &items);
	if (!rc && items.n)
		qsort(items.v, items.n, sizeof(*items.v), item_cmp);
	for (size_t i = 0; i < m->nentries && !rc; i++) {
		const struct ck_dcp_entry *e = &m->entries[i];
		struct ck_cat_tensor t;

		if (e->is_bytes)
			continue;
		rc = dcp_entry(b, m, e, &items, e->fqn, &t);
		if (rc == -ENOENT)
			rc = 0;
		else if (!rc && push_entry(out, &t)) {
			entry_free(&t);
			rc = -ENOMEM;
		}
	}
	entries_free(items.v, items.n);
	ck_dcp_free(m);
	return rc;
}

static int load_dcp(struct builder *b)
{
	struct ck_catalog *c = b->cat;
	struct tensor_list items = { 0 }, w = { 0 }, mom = { 0 };
	struct ck_dcp_meta *m = NULL;
	size_t klen = strlen(DCP_MODEL_PREFIX);
	int rc;

	for (size_t i = 0; i < c->nfiles && !c->dcp_save; i++)
		if (!strcmp(c->paths[i], CK_DCP_METADATA) && ck_vnode_file_kind(c->files[i]) == CK_FILE_OTHER)
			c->dcp_save = c->files[i];
	if (!c->dcp_save)
		return 0;
	rc = dcp_read_metadata(b, c->dcp_save, &m);
	if (rc) {
		if (rc == -ENOMEM)
			return rc;
		ck_warn("%s/%s: its DCP save is left out of the catalog: %s", c->ckpt.series, c->ckpt.name,
			strerror(-rc));
		c->dcp_save = NULL;
		return 0;
	}
	rc = file_tensors(b, c->dcp_save, NULL, &items);
	if (!rc && items.n)
		qsort(items.v, items.n, sizeof(*items.v), item_cmp);
	for (size_t i = 0; i < m->nentries && !rc; i++) {
		const struct ck_dcp_entry *e = &m->entries[i];
		struct ck_cat_tensor t;

		if (e->is_bytes || strncmp(e->fqn, DCP_MODEL_PREFIX, klen) || !e->fqn[klen])
			continue;
		rc = dcp_entry(b, m, e, &items, e->fqn + klen, &t);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		if (!rc && push_entry(&w, &t)) {
			entry_free(&t);
			rc = -ENOMEM;
		}
	}
	if (!rc)
		rc = entry_layers(b, w.v, w.n);
	if (!rc) {
		entries_free(c->weights, c->nweights);   /* rules 1-3's empty list */
		c->weights = w.v;
		c->nweights = w.n;
		w.v = NULL;
		w.n = 0;
		c->model = c->nweights ? CK_CAT_MODEL_DCP : CK_CAT_MODEL_NONE;
		c->moments_named = 1;
	}
	for (size_t i = 0; i < m->nentries && !rc; i++) {
		const struct ck_dcp_entry *e = &m->entries[i];

		for (size_t p = 0; p < N_OF(dcp_optim_prefixes) && !e->is_bytes; p++) {
			size_t k = strlen(dcp_optim_prefixes[p]);

			if (!strncmp(e->fqn, dcp_optim_prefixes[p], k)) {
				rc = dcp_moment(b, m, e, &items, e->fqn + k, &mom);
				break;
			}
		}
	}
	if (!rc) {
		c->moments = mom.v;
		c->nmoments = mom.n;
		mom.v = NULL;
		mom.n = 0;
	}
	entries_free(items.v, items.n);
	entries_free(w.v, w.n);
	entries_free(mom.v, mom.n);
	ck_dcp_free(m);
	return rc;
}

/* --- the optimizer ---------------------------------------------------------- */

/* The optimizer's tensors by node (the tree walk and ck_view_tensors meet there). */
struct node_map {
	struct tensor_list l;
	size_t cap;
	size_t *slot;   /* index + 1 */
};

static size_t ptr_slot(const void *p, size_t cap)
{
	return (size_t)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ULL) & (cap - 1);
}

static int node_map_build(struct node_map *m)
{
	m->cap = 16;
	while (m->cap < m->l.n * 2)
		m->cap *= 2;
	m->slot = calloc(m->cap, sizeof(*m->slot));
	if (!m->slot)
		return -ENOMEM;
	for (size_t i = 0; i < m->l.n; i++) {
		size_t s = ptr_slot(m->l.v[i].node, m->cap);

		if (!m->l.v[i].node)
			continue;
		while (m->slot[s])
			s = (s + 1) & (m->cap - 1);
		m->slot[s] = i + 1;
	}
	return 0;
}

static const struct ck_cat_tensor *node_map_get(const struct node_map *m, const struct pk_node *n)
{
	for (size_t s = ptr_slot(n, m->cap); m->slot[s]; s = (s + 1) & (m->cap - 1))
		if (m->l.v[m->slot[s] - 1].node == n)
			return &m->l.v[m->slot[s] - 1];
	return NULL;
}

static int key_text(const struct pk_node *k, char *out, size_t size)
{
	return pk_key_to_path(k, out, size);
}

/* The shape of a parameter from its moments: the first tensor moment
 * other than 'step' (a scalar count). */
static void state_shape(const struct node_map *m, const struct pk_node *value, struct optim_shape *out)
{
	out->ndim = -1;
	if (!value || value->kind != PK_DICT)
		return;
	for (size_t i = 0; i + 1 < value->n; i += 2) {
		const struct ck_cat_tensor *t = node_map_get(m, value->items[i + 1]);
		const struct pk_node *k = value->items[i];

		if (!t || (k->kind == PK_STR && !strcmp(k->v.str.s, "step")))
			continue;
		out->ndim = t->ndim;
		memcpy(out->shape, t->shape, sizeof(out->shape));
		return;
	}
}

/* Integer keys of 'state' -> their entry, for the params lists. */
struct int_key {
	int64_t key;
	size_t entry;
};

static int int_key_cmp(const void *a, const void *b)
{
	const struct int_key *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* The entry of state whose key is the integer k, or -1. */
static long state_entry(const struct int_key *keys, size_t n, int64_t k)
{
	struct int_key probe = { k, 0 }, *hit = n ? bsearch(&probe, keys, n, sizeof(*keys), int_key_cmp) : NULL;

	return hit ? (long)hit->entry : -1;
}

/* Names integer-keyed state through param_groups: 'param_names' where the
 * groups have them, else optim_match against the torch model's order. */
static int name_by_groups(struct builder *b, const struct pk_node *osd, const struct node_map *m,
			  const char **names)
{
	struct ck_catalog *c = b->cat;
	const struct pk_node *groups = pk_dict_get_str(osd, "param_groups");
	const struct pk_node *state = pk_dict_get_str(osd, "state");
	struct optim_shape *model = NULL, *shapes = NULL, **gs = NULL;
	size_t *glen = NULL, *match = NULL, total = 0, nmodel = 0, at = 0;
	const struct ck_cat_tensor **mt = NULL, **tied = NULL;
	struct int_key *keys = NULL;
	size_t nkeys = 0, tcap;
	int with_names = 1, rc = 0;

	if (!groups || groups->kind != PK_LIST || !groups->n)
		return 0;
	keys = calloc(state->n / 2 + 1, sizeof(*keys));
	if (!keys)
		return -ENOMEM;
	for (size_t s = 0; s + 1 < state->n; s += 2)
		if (state->items[s]->kind == PK_INT)
			keys[nkeys++] = (struct int_key){ state->items[s]->v.i, s / 2 };
	qsort(keys, nkeys, sizeof(*keys), int_key_cmp);
	for (size_t g = 0; g < groups->n; g++) {
		const struct pk_node *gr = groups->items[g], *params = pk_dict_get_str(gr, "params"),
				     *pn = pk_dict_get_str(gr, "param_names");

		if (!params || params->kind != PK_LIST)
			goto out;
		for (size_t i = 0; i < params->n; i++)
			if (params->items[i]->kind != PK_INT)
				goto out;
		if (!pn || pn->kind != PK_LIST || pn->n != params->n)
			with_names = 0;
		total += params->n;
	}
	if (with_names) {
		for (size_t g = 0; g < groups->n; g++) {
			const struct pk_node *gr = groups->items[g], *params = pk_dict_get_str(gr, "params"),
					     *pn = pk_dict_get_str(gr, "param_names");

			for (size_t i = 0; i < params->n; i++) {
				long e = state_entry(keys, nkeys, params->items[i]->v.i);

				if (e >= 0 && pn->items[i]->kind == PK_STR)
					names[e] = pn->items[i]->v.str.s;
			}
		}
		goto out;
	}
	if (!c->npt_weights)
		goto out;   /* no state-dict order to match against */
	/* The model's parameters as model.parameters() gives them: a tensor
	 * sharing the bytes of an earlier one (a tied weight) counts once. */
	model = calloc(c->npt_weights + 1, sizeof(*model));
	mt = calloc(c->npt_weights + 1, sizeof(*mt));
	shapes = calloc(total + 1, sizeof(*shapes));
	gs = calloc(groups->n, sizeof(*gs));
	glen = calloc(groups->n, sizeof(*glen));
	match = calloc(total + 1, sizeof(*match));
	if (!model || !mt || !shapes || !gs || !glen || !match) {
		rc = -ENOMEM;
		goto out;
	}
	tcap = 16;
	while (tcap < c->npt_weights * 2)
		tcap *= 2;
	tied = calloc(tcap, sizeof(*tied));
	if (!tied) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < c->npt_weights; i++) {
		const struct ck_cat_tensor *t = &c->pt_weights[i];
		size_t s = (size_t)((((uintptr_t)t->source >> 4) ^ t->offset) * 0x9e3779b97f4a7c15ULL) & (tcap - 1);
		int seen = 0;

		for (; tied[s] && !seen; s = (s + 1) & (tcap - 1))
			seen = tied[s]->source == t->source && tied[s]->offset == t->offset &&
			       tied[s]->nbytes == t->nbytes;
		if (seen)
			continue;
		tied[s] = t;
		mt[nmodel] = t;
		model[nmodel].ndim = t->ndim;
		memcpy(model[nmodel].shape, t->shape, sizeof(t->shape));
		nmodel++;
	}
	for (size_t g = 0; g < groups->n; g++) {
		const struct pk_node *params = pk_dict_get_str(groups->items[g], "params");

		gs[g] = &shapes[at];
		glen[g] = params->n;
		for (size_t i = 0; i < params->n; i++) {
			long e = state_entry(keys, nkeys, params->items[i]->v.i);

			state_shape(m, e >= 0 ? state->items[2 * e + 1] : NULL, &shapes[at++]);
		}
	}
	rc = optim_match(model, nmodel, (const struct optim_shape *const *)gs, glen, groups->n, match);
	if (rc == -ENOENT) {
		ck_info("%s/%s: optimizer state has no parameter names and does not match the model's "
			"parameters by order and shape: its moments stay in layer 'optimizer'",
			c->ckpt.series ? c->ckpt.series : "", c->ckpt.name);
		rc = 0;
		goto out;
	}
	if (rc)
		goto out;
	at = 0;
	for (size_t g = 0; g < groups->n; g++) {
		const struct pk_node *params = pk_dict_get_str(groups->items[g], "params");

		for (size_t i = 0; i < params->n; i++, at++) {
			long e = state_entry(keys, nkeys, params->items[i]->v.i);

			if (e >= 0)
				names[e] = mt[match[at]]->name;
		}
	}
out:
	free(keys);
	free(tied);
	free(model);
	free(mt);
	free(shapes);
	free(gs);
	free(glen);
	free(match);
	return rc;
}

static const struct ck_vnode *find_optimizer(struct builder *b, const struct pk_node **osd)
{
	struct ck_catalog *c = b->cat;
	const struct pk_node *root;

	for (size_t i = 0; i < c->nfiles; i++)
		if (in_list(c->paths[i], optim_names, N_OF(optim_names)) && is_torch(c->files[i]) &&
		    !ck_view_file_tree(b->v, c->files[i], &root) && root->kind == PK_DICT &&
		    pk_dict_get_str(root, "state")) {
			*osd = root;
			return c->files[i];
		}
	if (c->torch_entry && !ck_view_file_tree(b->v, c->torch_model, &root)) {
		for (size_t i = 0; i < N_OF(optim_entries); i++) {
			const struct pk_node *o = pk_dict_get_str(root, optim_entries[i]);

			if (o && o->kind == PK_DICT && pk_dict_get_str(o, "state")) {
				c->optim_entry = optim_entries[i];
				*osd = o;
				return c->torch_model;
			}
		}
	}
	return NULL;
}

static int load_optimizer(struct builder *b)
{
	struct ck_catalog *c = b->cat;
	const struct pk_node *osd = NULL, *state;
	struct node_map m = { { 0 }, 0, NULL };
	const char **names = NULL;
	size_t nent, cap = 0;
	int rc;

	c->optim_file = find_optimizer(b, &osd);
	if (!c->optim_file)
		return 0;
	state = pk_dict_get_str(osd, "state");
	if (!state || state->kind != PK_DICT)
		return 0;
	rc = file_tensors(b, c->optim_file, NULL, &m.l);
	if (!rc)
		rc = node_map_build(&m);
	nent = state->n / 2;
	names = calloc(nent + 1, sizeof(*names));
	c->states = calloc(nent + 1, sizeof(*c->states));
	if (!rc && (!names || !c->states))
		rc = -ENOMEM;
	if (!rc) {
		for (size_t s = 0; s < nent; s++)
			if (state->items[2 * s]->kind == PK_STR)
				names[s] = state->items[2 * s]->v.str.s;
		rc = name_by_groups(b, osd, &m, names);
	}
	c->moments_named = 1;
	for (size_t s = 0; s < nent && !rc; s++) {
		const struct pk_node *val = state->items[2 * s + 1];
		struct ck_cat_state *cs = &c->states[c->nstates];
		char key[256], param[300];

		if (key_text(state->items[2 * s], key, sizeof(key)))
			snprintf(key, sizeof(key), "?");
		if (names[s])
			snprintf(param, sizeof(param), "%s", names[s]);
		else
			snprintf(param, sizeof(param), "state.%s", key);
		if (!names[s])
			c->moments_named = 0;
		cs->key = state->items[2 * s];
		cs->value = val;
		cs->param = strdup(param);
		if (!cs->param) {
			rc = -ENOMEM;
			break;
		}
		c->nstates++;
		if (names[s])
			rc = layer_of(b, names[s], &cs->layer);
		else
			rc = (cs->layer = strdup("optimizer")) ? 0 : -ENOMEM;
		for (size_t i = 0; !rc && val && val->kind == PK_DICT && i + 1 < val->n; i += 2) {
			const struct ck_cat_tensor *t = node_map_get(&m, val->items[i + 1]);
			struct ck_cat_tensor *e;
			char mname[256], full[600];

			if (!t || key_text(val->items[i], mname, sizeof(mname)))
				continue;
			if (c->nmoments == cap) {
				e = ck_grow(c->moments, &cap, sizeof(*e), 64);
				if (!e) {
					rc = -ENOMEM;
					break;
				}
				c->moments = e;
			}
			snprintf(full, sizeof(full), "optimizer.%s.%s", param, mname);
			e = &c->moments[c->nmoments];
			*e = *t;
			e->name = strdup(full);
			e->path = strdup(t->path);
			e->param = strdup(param);
			e->moment = strdup(mname);
			e->layer = strdup(cs->layer);
			e->role = CK_CAT_MOMENT;
			e->src_series = c->ckpt.series;
			if (!e->name || !e->path || !e->param || !e->moment || !e->layer) {
				entry_free(e);
				rc = -ENOMEM;
				break;
			}
			c->nmoments++;
		}
	}
	free(names);
	free(m.slot);
	entries_free(m.l.v, m.l.n);
	return rc;
}

/* --- the rest ------------------------------------------------------------------ */

static int load_side_files(struct builder *b)
{
	struct ck_catalog *c = b->cat;

	c->side_names = calloc(c->nfiles + 1, sizeof(*c->side_names));
	c->side_files = calloc(c->nfiles + 1, sizeof(*c->side_files));
	if (!c->side_names || !c->side_files)
		return -ENOMEM;
	for (size_t i = 0; i < c->nfiles; i++) {
		if (strchr(c->paths[i], '/') || !is_side_file(c->paths[i]))
			continue;
		c->side_names[c->nside] = strdup(c->paths[i]);
		if (!c->side_names[c->nside])
			return -ENOMEM;
		c->side_files[c->nside++] = c->files[i];
	}
	return 0;
}

static int state_cmp(const void *a, const void *b)
{
	return strcmp((*(struct ck_cat_state *const *)a)->param, (*(struct ck_cat_state *const *)b)->param);
}

static int build_index(struct ck_catalog *c)
{
	size_t k = 0;

	c->by_name = malloc((c->nweights + c->nmoments + 1) * sizeof(*c->by_name));
	if (!c->by_name)
		return -ENOMEM;
	for (size_t i = 0; i < c->nweights; i++)
		c->by_name[k++] = &c->weights[i];
	for (size_t i = 0; i < c->nmoments; i++)
		c->by_name[k++] = &c->moments[i];
	qsort(c->by_name, k, sizeof(*c->by_name), name_cmp);
	c->nby_name = k;
	c->pt_by_name = malloc((c->npt_weights + 1) * sizeof(*c->pt_by_name));
	c->states_by_param = malloc((c->nstates + 1) * sizeof(*c->states_by_param));
	if (!c->pt_by_name || !c->states_by_param)
		return -ENOMEM;
	for (size_t i = 0; i < c->npt_weights; i++)
		c->pt_by_name[i] = &c->pt_weights[i];
	qsort(c->pt_by_name, c->npt_weights, sizeof(*c->pt_by_name), name_cmp);
	for (size_t i = 0; i < c->nstates; i++)
		c->states_by_param[i] = &c->states[i];
	qsort(c->states_by_param, c->nstates, sizeof(*c->states_by_param), state_cmp);
	for (size_t i = 0; i < c->nweights; i++) {
		long blk = ck_layer_block(c->weights[i].layer);

		if (blk >= 0 && (size_t)blk + 1 > c->nblocks)
			c->nblocks = (size_t)blk + 1;
	}
	return 0;
}

const struct ck_cat_tensor *ck_catalog_find(const struct ck_catalog *c, const char *name)
{
	struct ck_cat_tensor key, *kp = &key, **hit;

	key.name = (char *)name;
	hit = c->nby_name ? bsearch(&kp, c->by_name, c->nby_name, sizeof(*c->by_name), name_cmp) : NULL;
	return hit ? *hit : NULL;
}

const struct ck_cat_tensor *ck_catalog_find_pt(const struct ck_catalog *c, const char *name)
{
	struct ck_cat_tensor key, *kp = &key, **hit;

	key.name = (char *)name;
	hit = c->npt_weights ? bsearch(&kp, c->pt_by_name, c->npt_weights, sizeof(*c->pt_by_name), name_cmp) : NULL;
	return hit ? *hit : NULL;
}

const struct ck_cat_state *ck_catalog_find_state(const struct ck_catalog *c, const char *param)
{
	struct ck_cat_state key, *kp = &key, **hit;

	key.param = (char *)param;
	hit = c->nstates ? bsearch(&kp, c->states_by_param, c->nstates, sizeof(*c->states_by_param), state_cmp)
			 : NULL;
	return hit ? *hit : NULL;
}

static const char *const block_words[] = { "layers", "layer", "h", "blocks", "block" };

int ck_block_rename(const char *name, long from, long to, char *out, size_t size)
{
	for (const char *seg = name; seg; seg = strchr(seg, '.') ? strchr(seg, '.') + 1 : NULL) {
		for (size_t w = 0; w < N_OF(block_words); w++) {
			size_t k = strlen(block_words[w]);
			const char *num = seg + k + 1, *end;
			long n;

			if (strncmp(seg, block_words[w], k) || seg[k] != '.' || *num < '0' || *num > '9')
				continue;
			for (end = num; *end >= '0' && *end <= '9'; end++)
				;
			if (*end && *end != '.')
				continue;
			n = strtol(num, NULL, 10);
			if (n != from)
				continue;
			if ((size_t)snprintf(out, size, "%.*s%ld%s", (int)(num - name), name, to, end) >= size)
				return -ENOSPC;
			return 0;
		}
	}
	return -ENOENT;
}

int ck_catalog_build(struct ck_view *v, const struct ck_vnode *ckpt, unsigned flags, struct ck_catalog **out)
{
	struct builder b = { v, NULL, ck_view_layer_rules(v), 0 };
	int rc;

	b.cat = calloc(1, sizeof(*b.cat));
	if (!b.cat)
		return -ENOMEM;
	b.cat->flags = flags & CK_CAT_WEIGHTS;
	rc = ck_view_checkpoint(v, ckpt, &b.cat->ckpt);
	if (!rc)
		rc = b.cat->ckpt.is_file ? add_file(&b, "", ckpt) : collect_files(&b, ckpt);
	if (!rc)
		rc = load_weights(&b);
	if (!rc && b.cat->model == CK_CAT_MODEL_NONE)
		rc = load_dcp(&b);
	/* An eval box walking weights/ through a series would otherwise
	 * parse every optimizer pickle it never reads. */
	if (!rc && !b.cat->dcp_save && !(flags & CK_CAT_WEIGHTS))
		rc = load_optimizer(&b);
	if (!rc)
		rc = load_side_files(&b);
	if (!rc)
		rc = build_index(b.cat);
	if (rc) {
		ck_catalog_free(b.cat);
		return rc;
	}
	*out = b.cat;
	return 0;
}

void cat_vtensor(const struct ck_cat_tensor *e, struct ck_vtensor *out)
{
	memset(out, 0, sizeof(*out));
	out->name = e->name;
	out->layer = e->layer;
	out->dtype = e->dtype;
	out->ndim = e->ndim;
	out->shape = e->shape;
	out->src_ckpt = e->src_ckpt;
	out->src_step = e->src_step;
	out->src_offset = e->offset;
	out->nbytes = e->nbytes;
	out->source = e->source;
	out->contiguous = e->contiguous;
	out->node = e->node;
}

static int path_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ck_cat_tensor *)a)->path, ((const struct ck_cat_tensor *)b)->path);
}

int cat_file_entries(struct ck_view *v, const struct ck_vnode *file, struct ck_cat_tensor **out, size_t *n)
{
	struct builder b = { v, NULL, NULL, 0 };
	struct ck_catalog dummy = { 0 };
	struct tensor_list l = { 0 };
	int rc;

	b.cat = &dummy;
	dummy.ckpt.series = "";
	dummy.ckpt.name = ck_vnode_name(file);
	if (is_dcp_save(file))
		rc = dcp_tensors(&b, file, &l);
	else
		rc = file_tensors(&b, file, NULL, &l);
	if (rc) {
		entries_free(l.v, l.n);
		return rc;
	}
	if (l.n)
		qsort(l.v, l.n, sizeof(*l.v), path_cmp);
	*out = l.v;
	*n = l.n;
	return 0;
}

void cat_entries_free(struct ck_cat_tensor *v, size_t n)
{
	entries_free(v, n);
}

int ck_cat_read(struct ck_view *v, const struct ck_cat_tensor *e, void *buf, size_t len, uint64_t off)
{
	unsigned char *out = buf;
	uint64_t at = 0;
	int rc = 0;

	if (off > e->nbytes || len > e->nbytes - off)
		return -EINVAL;
	if (!e->npieces)
		return ck_vsource_read(v, e->source, buf, len, e->offset + off);
	for (size_t i = 0; i < e->npieces && len && !rc; at += e->pieces[i++].nbytes) {
		const struct ck_cat_piece *p = &e->pieces[i];
		uint64_t k;

		if (off >= at + p->nbytes)
			continue;
		k = p->nbytes - (off - at) < len ? p->nbytes - (off - at) : len;
		rc = ck_vsource_read(v, p->source, out, (size_t)k, p->offset + (off - at));
		out += k;
		off += k;
		len -= (size_t)k;
	}
	return rc;
}
