/* Parameter names for optimizer state keyed by position (src/ctl/ctl_int.h):
 * each param group is embedded in the model's tensor sequence by shape,
 * and a name is given only where the embedding is forced. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_int.h"

static int fits(const struct optim_shape *param, const struct optim_shape *tensor)
{
	if (param->ndim < 0)
		return 1;
	return param->ndim == tensor->ndim &&
	       !memcmp(param->shape, tensor->shape, (size_t)param->ndim * sizeof(param->shape[0]));
}

/* Earliest and latest embeddings of g[0..n) in model[0..nm): 0, or -ENOENT
 * when there is none or they differ somewhere. */
static int forced(const struct optim_shape *model, size_t nm, const struct optim_shape *g, size_t n, size_t *first,
		  size_t *last)
{
	size_t j = 0;

	for (size_t i = 0; i < n; i++, j++) {
		while (j < nm && !fits(&g[i], &model[j]))
			j++;
		if (j == nm)
			return -ENOENT;
		first[i] = j;
	}
	j = nm;
	for (size_t i = n; i-- > 0;) {
		while (j > 0 && !fits(&g[i], &model[j - 1]))
			j--;
		if (j == 0)
			return -ENOENT;
		last[i] = --j;
	}
	for (size_t i = 0; i < n; i++)
		if (first[i] != last[i])
			return -ENOENT;
	return 0;
}

int optim_match(const struct optim_shape *model, size_t nmodel, const struct optim_shape *const *groups,
		const size_t *group_len, size_t ngroups, size_t *match)
{
	size_t total = 0, at = 0, *last;
	unsigned char *taken;
	int rc = 0;

	for (size_t g = 0; g < ngroups; g++)
		total += group_len[g];
	if (total > nmodel)
		return -ENOENT;
	last = malloc((total + 1) * sizeof(*last));
	taken = calloc(nmodel + 1, 1);
	if (!last || !taken) {
		free(last);
		free(taken);
		return -ENOMEM;
	}
	for (size_t g = 0; g < ngroups && !rc; g++) {
		rc = forced(model, nmodel, groups[g], group_len[g], &match[at], last);
		for (size_t i = 0; i < group_len[g] && !rc; i++) {
			if (taken[match[at + i]])
				rc = -ENOENT;   /* two groups claim one tensor */
			taken[match[at + i]] = 1;
		}
		at += group_len[g];
	}
	free(last);
	free(taken);
	return rc;
}
