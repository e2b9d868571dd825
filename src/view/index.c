/* *.safetensors.index.json of a composite, regenerated from the composite
 * shards so that its weight_map names every tensor the composite serves,
 * in a shard that really holds it, and total_size matches.
 *
 * Shards are the sibling files named by any version of the index.  A tensor
 * stays in the shard the newest index maps it to when that composite shard
 * has it; otherwise it is mapped to the first shard (by name) holding it.
 * When the result equals the newest index, that file is served as it is. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/log.h"
#include "view_internal.h"

static int read_index(struct ck_view *v, struct phys_file *pf, struct st_index *idx, struct ck_error *err)
{
	char *text;
	int rc;

	rc = phys_check(v, pf);
	if (!rc)
		rc = phys_open_fd(v, pf);
	if (rc)
		return rc;
	if (pf->info.size > (64u << 20))
		return ck_fail(err, EFBIG, "%s: index larger than 64 MiB", pf->info.src_path);
	text = malloc(pf->info.size + 1);
	if (!text)
		return -ENOMEM;
	rc = phys_read(pf, text, pf->info.size, 0);
	if (!rc)
		rc = st_index_parse(text, pf->info.size, idx, err);
	free(text);
	return rc;
}

static int strp_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int weight_cmp(const void *a, const void *b)
{
	const struct st_index_weight *x = a, *y = b;

	return strcmp(x->name, y->name);
}

/* Sorted, de-duplicated shard file names referenced by the indexes. */
static int shard_names(struct st_index *idx, size_t nidx, const char ***out, size_t *nout)
{
	const char **names;
	size_t total = 0, k = 0;

	for (size_t i = 0; i < nidx; i++)
		total += idx[i].n;
	names = calloc(total + 1, sizeof(*names));
	if (!names)
		return -ENOMEM;
	for (size_t i = 0; i < nidx; i++)
		for (size_t j = 0; j < idx[i].n; j++)
			names[k++] = idx[i].weights[j].file;
	qsort(names, k, sizeof(*names), strp_cmp);
	*nout = 0;
	for (size_t j = 0; j < k; j++)
		if (!*nout || strcmp(names[*nout - 1], names[j]))
			names[(*nout)++] = names[j];
	*out = names;
	return 0;
}

struct mapped {
	const char *name;
	const char *file;
	uint64_t nbytes;
	int preferred;      /* the newest index maps the tensor to this shard */
};

static int mapped_cmp(const void *a, const void *b)
{
	const struct mapped *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->file, y->file);
}

int composite_build_index(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, size_t np,
			  struct ck_vfile *f)
{
	struct st_index *idx = NULL, out = { 0 };
	struct ck_vfile **shards = NULL;
	const char **names = NULL;
	struct mapped *map = NULL;
	struct ck_buf text = CK_BUF_INIT;
	struct ck_error err = { "" };
	size_t nidx = 0, nnames = 0, nmap = 0, cap = 0;
	int rc = 0, same;

	(void)pfs;
	(void)np;
	idx = calloc(n->nversions, sizeof(*idx));
	if (!idx)
		return -ENOMEM;
	for (size_t i = 0; i < n->nversions && !rc; i++) {
		struct phys_file *pf = n->versions[i].pf;

		if (pf->info.kind != CK_FILE_SAFETENSORS_INDEX)
			continue;
		rc = read_index(v, pf, &idx[nidx], &err);
		if (rc) {
			ck_err("%s/%s: index from %s unusable: %s", n->ckpt->info.name, n->relpath,
			       pf->ckpt->info.name, ck_error_text(&err, rc));
			goto out;
		}
		nidx++;
	}
	rc = shard_names(idx, nidx, &names, &nnames);
	if (rc)
		goto out;
	shards = calloc(nnames + 1, sizeof(*shards));
	if (!shards) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t s = 0; s < nnames; s++) {
		const struct ck_vnode *sib;

		if (ck_view_lookup(v, n->parent, names[s], &sib) || sib->is_dir)
			continue;  /* a shard no version has: nothing to map to it */
		rc = view_node_vfile(v, (struct ck_vnode *)sib, &shards[s]);
		if (rc) {
			ck_err("%s/%s: shard %s cannot be served", n->ckpt->info.name, n->relpath, names[s]);
			goto out;
		}
		cap += shards[s]->ntensors;
	}
	map = calloc(cap + 1, sizeof(*map));
	if (!map) {
		rc = -ENOMEM;
		goto out;
	}
	/* Every (tensor, shard) pair, then one pick per tensor. */
	if (idx[0].n > 1)
		qsort(idx[0].weights, idx[0].n, sizeof(*idx[0].weights), weight_cmp);
	for (size_t s = 0; s < nnames; s++) {
		for (size_t t = 0; shards[s] && t < shards[s]->ntensors; t++) {
			struct st_index_weight key = { shards[s]->tensors[t].name, NULL }, *pref;

			pref = idx[0].n ? bsearch(&key, idx[0].weights, idx[0].n, sizeof(key), weight_cmp) : NULL;
			map[nmap].name = shards[s]->tensors[t].name;
			map[nmap].file = names[s];
			map[nmap].nbytes = shards[s]->tensors[t].nbytes;
			map[nmap].preferred = pref && !strcmp(pref->file, names[s]);
			nmap++;
		}
	}
	if (nmap > 1)
		qsort(map, nmap, sizeof(*map), mapped_cmp);
	out.has_metadata = idx[0].has_metadata;
	out.has_total_size = 1;
	out.nmeta = idx[0].nmeta;
	out.meta = idx[0].meta;
	out.weights = calloc(nmap + 1, sizeof(*out.weights));
	if (!out.weights) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < nmap;) {
		size_t j = i, best = i;

		/* candidates are sorted by shard name: the first is the fallback */
		while (j < nmap && !strcmp(map[j].name, map[i].name)) {
			if (map[j].preferred && !map[best].preferred)
				best = j;
			j++;
		}
		out.weights[out.n].name = (char *)map[best].name;
		out.weights[out.n].file = (char *)map[best].file;
		out.total_size += map[best].nbytes;
		out.n++;
		i = j;
	}
	same = out.n == idx[0].n && idx[0].has_total_size && out.total_size == idx[0].total_size;
	for (size_t i = 0; same && i < out.n; i++)  /* both sorted by name */
		same = !strcmp(out.weights[i].name, idx[0].weights[i].name) &&
		       !strcmp(out.weights[i].file, idx[0].weights[i].file);
	if (same) {
		rc = vfile_add_phys(f, n->versions[0].pf, 0, n->versions[0].pf->info.size);
		goto out;
	}
	f->synthesized = 1;
	rc = st_index_write(&out, &text);
	if (!rc)
		rc = vfile_add_mem(f, text.data, text.len);
out:
	free(out.weights);
	ck_buf_free(&text);
	free(map);
	for (size_t s = 0; s < nnames; s++)
		if (shards && shards[s])
			ck_vfile_put(shards[s]);
	free(shards);
	free(names);
	for (size_t i = 0; i < nidx; i++)
		st_index_free(&idx[i]);
	free(idx);
	return rc;
}
