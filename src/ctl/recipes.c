/* recipes/NAME/: a recipe (include/ckptfs/recipe.h) as a checkpoint, and
 * its weights under weights/@recipes/NAME/.
 *
 * The checkpoint has the base's files (base_model, or the last slice's
 * model), so a trainer resumes from it as from the base:
 *   - its safetensors model files, each with the output tensors the base
 *     keeps there, the bytes from each tensor's source;
 *   - its torch.save model file (or the model entry of a combined file):
 *     the base's state dict with every tensor replaced by its source's
 *     (storages renumbered, records copied as extents);
 *   - its optimizer state_dict: the base's, 'state' holding for each
 *     parameter the moments of the checkpoint its weights come from,
 *     'param_groups' the base's;
 *   - every other file (scheduler, trainer state, config, tokenizer, RNG
 *     states) the base's composite as it is.
 * A recipe that no longer checks against the store (a checkpoint it names
 * deleted) is a directory holding RECIPE_ERROR, which says why. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "ckptfs/store.h"
#include "ctl_int.h"

#define ERROR_FILE "RECIPE_ERROR"

struct recipe_entry {
	char *name;
	char *key;                  /* the file's identity: a new version is a new entry */
	int loaded;
	char *error;                /* why it does not check, or NULL */
	struct ck_recipe *r;
	struct ck_recipe_plan *plan;
	struct ck_catalog *weights; /* the output's weights (weights/@recipes/NAME/) */
	struct pk_doc *doc;         /* nodes of composed state trees */
};

struct recipe_cache {
	struct recipe_entry **v;
	size_t n;
};

static void entry_free(struct recipe_entry *e)
{
	free(e->name);
	free(e->key);
	free(e->error);
	ck_recipe_free(e->r);
	ck_recipe_plan_free(e->plan);
	ck_catalog_free(e->weights);
	pk_doc_free(e->doc);
	free(e);
}

void recipes_free(struct ck_ctl *c)
{
	if (!c->recipes)
		return;
	for (size_t i = 0; i < c->recipes->n; i++)
		entry_free(c->recipes->v[i]);
	free(c->recipes->v);
	free(c->recipes);
	c->recipes = NULL;
}

/* Appends the inode number of checkpoint ref as the view lists it now (0:
 * not listed). */
static int key_ref(struct ck_ctl *c, const struct ck_recipe_ref *ref, struct ck_buf *key)
{
	const struct ck_vnode *n;
	struct ck_vattr a;

	if (ctl_find_checkpoint(c, ref->series, ref->ckpt, &n) || ck_view_getattr(c->view, n, &a))
		a.ino = 0;
	return ck_buf_printf(key, ":%llu", (unsigned long long)a.ino);
}

/* A recipe's version: its file's identity and the nodes of the checkpoints
 * it names, so that a checkpoint deleted (or a series reloaded) makes a new
 * version, checked again. */
static int recipe_key(struct ck_ctl *c, const char *name, struct ck_buf *key)
{
	struct ck_error err = { "" };
	struct ck_recipe *r = NULL;
	struct stat sb;
	char *text = NULL;
	size_t len = 0;
	unsigned line;
	int rc = ck_store_recipe_stat(c->store, name, &sb);

	if (rc)
		return rc;
	rc = ck_buf_printf(key, "%llu:%llu:%lld", (unsigned long long)sb.st_ino, (unsigned long long)sb.st_size,
			   (long long)ck_timespec_ns(sb.st_mtim));
	if (!rc && !ck_store_recipe_read(c->store, name, &text, &len, &err) &&
	    !ck_recipe_parse(text, len, &r, &line, &err)) {
		for (size_t i = 0; i < r->nslices && !rc; i++)
			rc = key_ref(c, &r->slices[i].model, key);
		for (size_t i = 0; i < r->nweights && !rc; i++)
			rc = key_ref(c, &r->weights[i].model, key);
		if (!rc)
			rc = key_ref(c, &r->base, key);
	}
	ck_recipe_free(r);
	free(text);
	if (!rc)
		rc = ck_buf_putc(key, 0);
	return rc;
}

int recipes_list_names(struct ck_ctl *c, struct ctl_specs *out, const struct ctl_type *type)
{
	char **names = NULL;
	size_t n = 0;
	int rc = ck_store_recipe_list(c->store, &names, &n);

	for (size_t i = 0; i < n && !rc; i++) {
		struct ck_buf key = CK_BUF_INIT;

		if (!recipe_key(c, names[i], &key))
			rc = ctl_spec_add(out, names[i], (const char *)key.data, 1, type, names[i], NULL, NULL, NULL);
		ck_buf_free(&key);
	}
	ck_strv_free(names, n);
	return rc;
}

uint64_t ctl_recipes_stamp(struct ck_ctl *c, struct ctl_node *dir)
{
	char path[4096];
	struct stat sb;
	uint64_t st = 0;

	snprintf(path, sizeof(path), "%s/%s", c->store, CK_STORE_RECIPES_DIR);
	if (stat(path, &sb) == 0)
		st = (uint64_t)ck_timespec_ns(sb.st_mtim) + sb.st_ino;
	return st * 31 + ctl_namespace_stamp(c, dir);
}

/* --- loading ------------------------------------------------------------------ */

static int cat_get(void *ctx, const struct ck_vnode *ckpt, struct ck_catalog **out)
{
	return ctl_catalog(ctx, ckpt, 0, out);
}

/* The weights catalog of the output: the plan's tensors under their output
 * names, the base's side files. */
static int output_catalog(const char *name, const struct ck_recipe_plan *plan, struct ck_catalog **out)
{
	const struct ck_catalog *base = plan->base;
	struct ck_catalog *c = calloc(1, sizeof(*c));
	int rc = 0;

	if (!c)
		return -ENOMEM;
	c->ckpt.name = name;
	c->ckpt.step = base->ckpt.step;
	c->model = base->model;
	c->weights = calloc(plan->nw + 1, sizeof(*c->weights));
	c->side_names = calloc(base->nside + 1, sizeof(*c->side_names));
	c->side_files = calloc(base->nside + 1, sizeof(*c->side_files));
	if (!c->weights || !c->side_names || !c->side_files)
		rc = -ENOMEM;
	for (size_t i = 0; i < plan->nw && !rc; i++) {
		struct ck_cat_tensor *e = &c->weights[c->nweights];

		rc = cat_entry_copy(plan->w[i].t, e);
		if (rc)
			break;
		c->nweights++;
		free(e->name);
		free(e->layer);
		e->name = strdup(plan->w[i].out->name);
		e->layer = strdup(plan->w[i].out->layer);
		if (!e->name || !e->layer)
			rc = -ENOMEM;
	}
	for (size_t i = 0; i < base->nside && !rc; i++) {
		c->side_names[i] = strdup(base->side_names[i]);
		c->side_files[i] = base->side_files[i];
		if (!c->side_names[i])
			rc = -ENOMEM;
		else
			c->nside++;
	}
	if (rc) {
		ck_catalog_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static void load(struct ck_ctl *c, struct recipe_entry *e)
{
	struct ck_catalog_source cats = { cat_get, c };
	struct ck_error err = { "" };
	char *text = NULL, msg[1024];
	size_t len = 0;
	unsigned line = 0;
	int rc;

	e->loaded = 1;
	rc = ck_store_recipe_read(c->store, e->name, &text, &len, &err);
	if (!rc)
		rc = ck_recipe_parse(text, len, &e->r, &line, &err);
	if (!rc)
		rc = ck_recipe_check(c->view, e->r, &cats, &e->plan, &line, &err);
	if (!rc)
		rc = output_catalog(e->name, e->plan, &e->weights);
	if (!rc)
		rc = (e->doc = pk_doc_new()) ? 0 : -ENOMEM;
	free(text);
	if (!rc)
		return;
	if (line)
		snprintf(msg, sizeof(msg), "recipes/%s.yaml:%u: %s\n", e->name, line, ck_error_text(&err, rc));
	else
		snprintf(msg, sizeof(msg), "recipes/%s.yaml: %s\n", e->name, ck_error_text(&err, rc));
	e->error = strdup(msg);
	ck_warn("recipe %s does not check against the store: %s", e->name, msg);
}

/* The loaded entry of recipe name at version key (under build_lock). */
static int recipe_get(struct ck_ctl *c, const char *name, const char *key, struct recipe_entry **out)
{
	struct recipe_entry *e = NULL, **v;

	pthread_mutex_lock(&c->build_lock);
	if (!c->recipes && !(c->recipes = calloc(1, sizeof(*c->recipes)))) {
		pthread_mutex_unlock(&c->build_lock);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->recipes->n && !e; i++)
		if (!strcmp(c->recipes->v[i]->name, name) && !strcmp(c->recipes->v[i]->key, key))
			e = c->recipes->v[i];
	if (!e) {
		v = realloc(c->recipes->v, (c->recipes->n + 1) * sizeof(*v));
		e = v ? calloc(1, sizeof(*e)) : NULL;
		if (v)
			c->recipes->v = v;
		if (e) {
			e->name = strdup(name);
			e->key = strdup(key);
		}
		if (!e || !e->name || !e->key) {
			if (e)
				entry_free(e);
			pthread_mutex_unlock(&c->build_lock);
			return -ENOMEM;
		}
		c->recipes->v[c->recipes->n++] = e;
	}
	if (!e->loaded)
		load(c, e);
	pthread_mutex_unlock(&c->build_lock);
	*out = e;
	return 0;
}

int recipe_weights_catalog(struct ck_ctl *c, const char *name, const char *key, struct ck_catalog **out)
{
	struct recipe_entry *e;
	int rc = recipe_get(c, name, key, &e);

	if (rc)
		return rc;
	if (e->error)
		return -EIO;
	*out = e->weights;
	return 0;
}

/* --- composing the torch.save files -------------------------------------------------- */

static struct pk_node *dict_like(struct pk_doc *doc, const struct pk_node *tmpl)
{
	struct pk_node *n = pk_new(doc, PK_DICT);

	if (n) {
		n->cls = tmpl->cls;
		n->flags = tmpl->flags;
		n->state = tmpl->state;
	}
	return n;
}

static int out_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct plan_weight *const *)a)->out->name,
		      (*(const struct plan_weight *const *)b)->out->name);
}

/* The base's state dict m with each tensor replaced by its source's. */
static int compose_model(struct recipe_entry *e, const struct pk_node *m, struct pk_node **out)
{
	const struct ck_recipe_plan *pl = e->plan;
	const struct plan_weight **idx = malloc((pl->npt + 1) * sizeof(*idx));
	struct pk_node *d = dict_like(e->doc, m);
	int rc = idx && d ? 0 : -ENOMEM;

	for (size_t i = 0; i < pl->npt && !rc; i++)
		idx[i] = &pl->pt[i];
	if (!rc)
		qsort(idx, pl->npt, sizeof(*idx), out_cmp);
	for (size_t i = 0; i + 1 < m->n && !rc; i += 2) {
		struct pk_node *k = m->items[i], *v = m->items[i + 1];

		if (k->kind == PK_STR && pk_as_tensor(v)) {
			struct ck_cat_tensor probe = { .name = k->v.str.s };
			struct plan_weight pw = { .out = &probe }, *pp = &pw;
			const struct plan_weight **hit = bsearch(&pp, idx, pl->npt, sizeof(*idx), out_cmp);

			if (!hit || !(*hit)->t->node) {
				ck_err("recipe %s: no source for '%s'", e->name, k->v.str.s);
				rc = -EIO;
				break;
			}
			v = (struct pk_node *)(*hit)->t->node;
		}
		rc = pk_append(e->doc, d, k);
		if (!rc)
			rc = pk_append(e->doc, d, v);
	}
	free(idx);
	if (!rc)
		*out = d;
	return rc;
}

/* The base's optimizer state_dict o with each parameter's moments from
 * its source. */
static int compose_optimizer(struct recipe_entry *e, const struct pk_node *o, struct pk_node **out)
{
	const struct ck_recipe_plan *pl = e->plan;
	struct pk_node *d = dict_like(e->doc, o);
	int rc = d ? 0 : -ENOMEM;

	for (size_t i = 0; i + 1 < o->n && !rc; i += 2) {
		struct pk_node *k = o->items[i], *v = o->items[i + 1];

		if (k->kind == PK_STR && !strcmp(k->v.str.s, "state") && v->kind == PK_DICT) {
			struct pk_node *s = dict_like(e->doc, v);
			size_t at = 0;

			if (!s) {
				rc = -ENOMEM;
				break;
			}
			for (size_t j = 0; j + 1 < v->n && !rc; j += 2) {
				struct pk_node *sv = v->items[j + 1];

				if (at < pl->ns && pl->s[at].base->key == v->items[j])
					sv = (struct pk_node *)pl->s[at++].src->value;
				rc = pk_append(e->doc, s, v->items[j]);
				if (!rc)
					rc = pk_append(e->doc, s, sv);
			}
			v = s;
		}
		if (!rc)
			rc = pk_append(e->doc, d, k);
		if (!rc)
			rc = pk_append(e->doc, d, v);
	}
	if (!rc)
		*out = d;
	return rc;
}

static int optimizer_of(struct ck_ctl *c, const struct ck_catalog *base, const struct pk_node **o)
{
	const struct pk_node *root;
	int rc = ck_view_file_tree(c->view, base->optim_file, &root);

	if (rc)
		return rc;
	*o = base->optim_entry ? pk_dict_get_str(root, base->optim_entry) : root;
	return *o ? 0 : -EIO;
}

static int build_torch(struct ck_ctl *c, struct recipe_entry *e, const struct ck_vnode *file, const char *rel,
		       struct ck_vfile **out)
{
	const struct ck_catalog *base = e->plan->base;
	const struct pk_node *root, *opt = NULL;
	struct pk_node *res = NULL, *model = NULL, *optim = NULL;
	char what[1024];
	int rc = ck_view_file_tree(c->view, file, &root);

	snprintf(what, sizeof(what), "recipe %s: %s", e->name, rel);
	if (!rc && base->optim_file == file)
		rc = optimizer_of(c, base, &opt);
	if (!rc && opt)
		rc = compose_optimizer(e, opt, &optim);
	if (!rc && file == base->torch_model)
		rc = compose_model(e, base->torch_entry ? pk_dict_get_str(root, base->torch_entry) : root, &model);
	if (!rc && !base->torch_entry && !base->optim_entry)
		res = model ? model : optim;
	if (!rc && !res) {
		/* A combined file: its other entries stay the base's. */
		res = dict_like(e->doc, root);
		rc = res ? 0 : -ENOMEM;
		for (size_t i = 0; i + 1 < root->n && !rc; i += 2) {
			struct pk_node *k = root->items[i], *v = root->items[i + 1];

			if (k->kind == PK_STR && model && base->torch_entry && !strcmp(k->v.str.s, base->torch_entry))
				v = model;
			else if (k->kind == PK_STR && optim && base->optim_entry && !strcmp(k->v.str.s, base->optim_entry))
				v = optim;
			rc = pk_append(e->doc, res, k);
			if (!rc)
				rc = pk_append(e->doc, res, v);
		}
	}
	if (!rc)
		rc = ck_view_compose_torch(c->view, file, res, what, out);
	if (rc)
		ck_err("%s: cannot be composed: %s", what, strerror(-rc));
	return rc ? -EIO : 0;
}

/* A safetensors model file of the base, with the output tensors it holds there. */
static int build_st(struct ck_ctl *c, struct recipe_entry *e, const struct ck_vnode *file, const char *rel,
		    struct ck_vfile **out)
{
	const struct ck_recipe_plan *pl = e->plan;
	struct st_pick *p = calloc(pl->nw + 1, sizeof(*p));
	char what[1024];
	size_t n = 0;
	int rc;

	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < pl->nw; i++)
		if (pl->w[i].out->file == file) {
			p[n].name = pl->w[i].out->name;
			p[n++].e = pl->w[i].t;
		}
	snprintf(what, sizeof(what), "recipe %s: %s", e->name, rel);
	rc = ctl_safetensors(c->view, p, n, what, out);
	free(p);
	return rc;
}

/* --- the tree ----------------------------------------------------------------------- */

static int recipe_label(struct ck_ctl *c, struct ctl_node *n, struct ck_buf *label, int64_t *step)
{
	struct recipe_entry *e;
	int rc = recipe_get(c, n->arg[0], n->arg[2] ? n->arg[2] : n->key, &e);

	if (rc)
		return -ENODATA;
	*step = e->plan ? e->plan->base->ckpt.step : -1;
	return ck_buf_printf(label, "recipe %s", n->arg[0]);
}

static int file_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	struct recipe_entry *e;
	const struct ck_catalog *base;
	int rc = recipe_get(c, n->arg[0], n->arg[2], &e);

	if (rc)
		return rc;
	if (e->error)
		return -EIO;
	base = e->plan->base;
	for (size_t i = 0; i < base->nfiles; i++) {
		const struct ck_vnode *f = base->files[i];

		if (strcmp(base->paths[i], n->arg[1]))
			continue;
		for (size_t k = 0; k < base->nst_files; k++)
			if (base->st_files[k] == f)
				return build_st(c, e, f, n->arg[1], out);
		if (f == base->torch_model || f == base->optim_file) {
			pthread_mutex_lock(&c->build_lock);
			rc = build_torch(c, e, f, n->arg[1], out);
			pthread_mutex_unlock(&c->build_lock);
			return rc;
		}
		return ck_view_open_file(c->view, f, out);
	}
	return -ENOENT;
}

static const struct ctl_type recipe_file = {
	.renamable = 1,
	.kind = "recipe",
	.build = file_build,
	.ckpt = recipe_label,
};

static int error_build(struct ck_ctl *c, struct ctl_node *n, struct ck_vfile **out)
{
	struct recipe_entry *e;
	int rc = recipe_get(c, n->arg[0], n->arg[2], &e);

	if (rc)
		return rc;
	return ck_vfile_from_bytes(c->view, "text", e->error ? e->error : "", e->error ? strlen(e->error) : 0, out);
}

static const struct ctl_type recipe_error = {
	.renamable = 1,
	.kind = "recipe-error",
	.build = error_build,
};

/* The files of the base under prefix (a directory of the checkpoint, ""
 * at the top): files, and the first component of deeper paths as
 * directories.  arg[0] the recipe, arg[1] the prefix, arg[2] its version. */
static int list_under(struct ck_ctl *c, const char *name, const char *version, const char *prefix,
		      struct ctl_specs *out, const struct ctl_type *subdir);

static int sub_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out);

static const struct ctl_type recipe_sub = {
	.renamable = 1,
	.kind = "recipe",
	.list = sub_list,
	.ckpt = recipe_label,
};

static int sub_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	return list_under(c, dir->arg[0], dir->arg[2], dir->arg[1], out, &recipe_sub);
}

static int list_under(struct ck_ctl *c, const char *name, const char *version, const char *prefix,
		      struct ctl_specs *out, const struct ctl_type *subdir)
{
	struct recipe_entry *e;
	const struct ck_catalog *base;
	size_t plen = strlen(prefix);
	int rc = recipe_get(c, name, version, &e);

	if (rc)
		return rc;
	if (e->error)
		return prefix[0] ? 0
				 : ctl_spec_add(out, ERROR_FILE, NULL, 0, &recipe_error, name, NULL, version, NULL);
	base = e->plan->base;
	for (size_t i = 0; i < base->nfiles && !rc; i++) {
		const char *p = base->paths[i], *rest, *slash;
		char sub[4096];

		if (plen && (strncmp(p, prefix, plen) || p[plen] != '/'))
			continue;
		rest = plen ? p + plen + 1 : p;
		slash = strchr(rest, '/');
		if (!slash) {
			rc = ctl_spec_add(out, rest[0] ? rest : name, NULL, 0, &recipe_file, name, p, version, NULL);
			continue;
		}
		snprintf(sub, sizeof(sub), "%.*s", (int)(slash - p), p);
		rc = ctl_spec_add(out, sub + (plen ? plen + 1 : 0), NULL, 1, subdir, name, sub, version, NULL);
	}
	return rc;
}

static int dir_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	return list_under(c, dir->arg[0], dir->key, "", out, &recipe_sub);
}

static const struct ctl_type recipe_dir = {
	.renamable = 1,
	.kind = "recipe",
	.list = dir_list,
	.ckpt = recipe_label,
};

static int root_list(struct ck_ctl *c, struct ctl_node *dir, struct ctl_specs *out)
{
	(void)dir;
	return recipes_list_names(c, out, &recipe_dir);
}

const struct ctl_type ctl_recipes_root = {
	.kind = "recipes",
	.list = root_list,
	.stamp = ctl_recipes_stamp,
};
