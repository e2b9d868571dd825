/* Parameter names of optimizer state.
 *
 * torch optimizers built from named_parameters() record each group's
 * parameter FQNs next to its indices:
 *   {'state': {0: {...}, 1: {...}},
 *    'param_groups': [{'params': [0, 1], 'param_names': ['model.layers.0.w', ...], ...}]}
 * With them, "state.1.exp_avg" belongs to the layer of 'model.layers.0.w'
 * instead of the catch-all "optimizer".  The optimizer dict may sit at the
 * root of the file or a few dict levels down ({'optimizer': ...},
 * DeepSpeed's {'optimizer_state_dict': {'base_optimizer_state': ...}}).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/walk.h"
#include "ingester.h"

#define SCAN_DEPTH 3    /* dict levels searched for optimizer state_dicts */

struct optim_map {
	char *prefix;            /* path of the optimizer dict plus ".", or "" at the root */
	size_t n, cap;
	int64_t *index;
	const char **name;       /* point into the pickle document */
};

struct ck_optim_names {
	struct optim_map *maps;
	size_t n, cap;
};

static int map_add(struct optim_map *m, int64_t index, const char *name)
{
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		int64_t *ni = realloc(m->index, cap * sizeof(*ni));
		const char **nn;

		if (!ni)
			return -ENOMEM;
		m->index = ni;
		nn = realloc(m->name, cap * sizeof(*nn));
		if (!nn)
			return -ENOMEM;
		m->name = nn;
		m->cap = cap;
	}
	m->index[m->n] = index;
	m->name[m->n] = name;
	m->n++;
	return 0;
}

/* Adds the (index, name) pairs of one param group.  Groups whose lists
 * disagree in length or types are ignored: better no names than wrong ones. */
static int add_group(struct optim_map *m, const struct pk_node *group)
{
	const struct pk_node *params, *names;
	size_t i;
	int rc;

	if (group->kind != PK_DICT)
		return 0;
	params = pk_dict_get_str(group, "params");
	names = pk_dict_get_str(group, "param_names");
	if (!params || !names || params->kind != PK_LIST || names->kind != PK_LIST || params->n != names->n)
		return 0;
	for (i = 0; i < params->n; i++) {
		if (params->items[i]->kind != PK_INT || names->items[i]->kind != PK_STR)
			return 0;
	}
	for (i = 0; i < params->n; i++) {
		rc = map_add(m, params->items[i]->v.i, names->items[i]->v.str.s);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int try_optimizer(struct ck_optim_names *o, const struct pk_node *dict, const char *prefix)
{
	const struct pk_node *state = pk_dict_get_str(dict, "state");
	const struct pk_node *groups = pk_dict_get_str(dict, "param_groups");
	struct optim_map m = { 0 };
	size_t i;
	int rc = 0;

	if (!state || !groups || state->kind != PK_DICT || groups->kind != PK_LIST)
		return 0;
	for (i = 0; i < groups->n && rc == 0; i++)
		rc = add_group(&m, groups->items[i]);
	if (rc == 0 && m.n) {
		if (o->n == o->cap) {
			struct optim_map *nm = ck_grow(o->maps, &o->cap, sizeof(*nm), 4);

			if (!nm)
				rc = -ENOMEM;
			else
				o->maps = nm;
		}
		if (rc == 0) {
			m.prefix = strdup(prefix);
			if (!m.prefix)
				rc = -ENOMEM;
		}
		if (rc == 0) {
			o->maps[o->n++] = m;
			return 0;
		}
	}
	free(m.index);
	free(m.name);
	return rc;
}

static int scan(struct ck_optim_names *o, const struct pk_node *node, const char *prefix, int depth)
{
	char key[CK_WALK_MAX_KEY];
	size_t i, plen = strlen(prefix);
	int rc;

	if (!node || node->kind != PK_DICT)
		return 0;
	rc = try_optimizer(o, node, prefix);
	if (rc < 0 || depth == SCAN_DEPTH)
		return rc;
	for (i = 0; i + 1 < node->n; i += 2) {
		char *sub;

		if (!node->items[i + 1] || node->items[i + 1]->kind != PK_DICT)
			continue;
		if (pk_key_to_path(node->items[i], key, sizeof(key)) < 0)
			continue;
		sub = malloc(plen + strlen(key) + 2);
		if (!sub)
			return -ENOMEM;
		strcpy(sub, prefix);
		strcat(sub, key);
		strcat(sub, ".");
		rc = scan(o, node->items[i + 1], sub, depth + 1);
		free(sub);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int ck_optim_names_scan(const struct pk_node *root, struct ck_optim_names **out)
{
	struct ck_optim_names *o = calloc(1, sizeof(*o));
	int rc;

	if (!o)
		return -ENOMEM;
	rc = scan(o, root, "", 0);
	if (rc < 0) {
		ck_optim_names_free(o);
		return rc;
	}
	*out = o;
	return 0;
}

const char *ck_optim_names_lookup(const struct ck_optim_names *o, const char *path)
{
	size_t i, j;

	for (i = 0; o && i < o->n; i++) {
		const struct optim_map *m = &o->maps[i];
		size_t plen = strlen(m->prefix);
		const char *p = path;
		char *end;
		long long idx;

		if (strncmp(p, m->prefix, plen) != 0 || strncmp(p + plen, "state.", 6) != 0)
			continue;
		p += plen + 6;
		if (*p < '0' || *p > '9')
			continue;
		idx = strtoll(p, &end, 10);
		if (*end != '.' && *end != '\0')
			continue;
		for (j = 0; j < m->n; j++) {
			if (m->index[j] == idx)
				return m->name[j];
		}
	}
	return NULL;
}

void ck_optim_names_free(struct ck_optim_names *o)
{
	size_t i;

	if (!o)
		return;
	for (i = 0; i < o->n; i++) {
		free(o->maps[i].prefix);
		free(o->maps[i].index);
		free(o->maps[i].name);
	}
	free(o->maps);
	free(o);
}
