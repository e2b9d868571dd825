/* torch DCP saves in the view: a save's .metadata, merged.
 *
 * A DCP save is a directory of data files and a .metadata that says which
 * file holds which item.  torch's reader opens `<dir>/<relative_path>` for
 * every item it loads, so a composite save needs only a .metadata: the
 * newest save's items and, for every FQN only older saves have, those of
 * the newest older save that has it (ck_dcp_merge), their relative paths
 * pointing into CK_VIEW_DCP_FROM/<checkpoint>/, where the namespace shows
 * that save's data files under their own names (view.c) -- never next to
 * the newest save's files, whose names the older files share.  Saves that
 * do not merge (another torch family, a dtype or shape changed) end the
 * merge; the composite says why (f->note: user.ckptfs.sources, the log).
 *
 * Every tensor item is listed (ck_view_tensors: `ckptctl show`, `stats`)
 * with the bytes the store recorded for it under its item name
 * (ck_ingest_dcp_names).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/memtune.h"
#include "view_internal.h"

/* Parsed .metadata of this many bytes and more are given back to the
 * kernel once freed (ck_release_memory): the daemon keeps smaller bursts. */
#define BIG_METADATA (8u << 20)

int dcp_is_metadata(const struct ck_vnode *n)
{
	return !n->is_dir && n->nversions && !strcmp(n->name, CK_DCP_METADATA) &&
	       n->versions[0].pf->info.kind == CK_FILE_OTHER;
}

static const char *node_desc(const struct ck_vnode *n)
{
	return n->relpath && n->relpath[0] ? n->relpath : n->name;
}

/* The first byte: a DCP .metadata is a pickle (PROTO). */
static int is_pickle(struct ck_view *v, struct phys_file *pf)
{
	uint8_t b = 0;

	return !phys_open_fd(v, pf) && pf->info.size && !phys_read(pf, &b, 1, 0) && b == 0x80;
}

/* The file of checkpoint ck at dir/rel (dir: the .metadata's directory). */
static struct phys_file *file_of(const struct view_ckpt *ck, const char *dir, size_t dlen, const char *rel)
{
	for (size_t i = 0; i < ck->nfiles; i++) {
		const char *r = ck->files[i]->info.relpath;

		if (ck->files[i]->reclaimed)
			continue;
		if (dlen ? !strncmp(r, dir, dlen) && r[dlen] == '/' && !strcmp(r + dlen + 1, rel) : !strcmp(r, rel))
			return ck->files[i];
	}
	return NULL;
}

static int add_from(struct ck_vfile *f, struct phys_file *pf, const char *ckpt, const char *rel)
{
	struct vdcp_from *v;
	size_t n = strlen(ckpt) + 1 + strlen(rel) + 1;

	for (size_t i = 0; i < f->nfrom; i++)
		if (f->from[i].pf == pf)
			return 0;
	if (f->nfrom == f->capfrom) {
		if (!(v = ck_grow(f->from, &f->capfrom, sizeof(*v), 4)))
			return -ENOMEM;
		f->from = v;
	}
	v = &f->from[f->nfrom];
	v->pf = pf;
	v->path = malloc(n);
	if (!v->path)
		return -ENOMEM;
	snprintf(v->path, n, "%s/%s", ckpt, rel);
	f->nfrom++;
	return vfile_add_src(f, pf);
}

/* The items of the merged save: listed as tensors, older data files noted. */
static int list_items(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, const struct ck_dcp_source *src,
		      const struct ck_dcp_merged *mg, struct ck_vfile *f)
{
	const char *rel = n->relpath ? n->relpath : "", *slash = strrchr(rel, '/');
	size_t dlen = slash ? (size_t)(slash - rel) : 0;
	int rc = 0;

	for (size_t i = 0; i < mg->npicks && !rc; i++) {
		const struct ck_dcp_pick *p = &mg->picks[i];
		const struct ck_dcp_meta *m = src[p->source].meta;
		const struct ck_dcp_entry *e = &m->entries[p->entry];
		const struct view_ckpt *ck = pfs[p->source]->ckpt;

		for (size_t k = 0; k < e->nchunks && !rc; k++) {
			const struct ck_dcp_chunk *c = &m->chunks[e->chunks[k]];
			struct phys_file *pf = file_of(ck, rel, dlen, c->relpath);
			const struct phys_range *r;
			char *item;

			if (!pf) {
				ck_err("%s/%s: %s's .metadata names %s, which the index does not hold", n->ckpt->info.name,
				       node_desc(n), ck->info.name, c->relpath);
				return -EIO;
			}
			if (p->source && (rc = add_from(f, pf, ck->info.name, c->relpath)))
				break;
			if (e->is_bytes)
				continue;
			item = ck_dcp_item_name(e, c);
			rc = item ? phys_load_ranges(v, pf) : -ENOMEM;
			r = rc ? NULL : phys_find_range(pf, item);
			/* Stores indexed before items had names have no range to show. */
			if (r)
				rc = vfile_add_tensor(f, item, e->dtype, e->ndim, c->sizes, pf, r->offset, r->length);
			free(item);
		}
	}
	return rc;
}

static void free_metas(struct ck_dcp_source *src, size_t n, struct phys_file **pfs)
{
	uint64_t bytes = 0;

	for (size_t i = 0; src && i < n; i++) {
		ck_dcp_free((struct ck_dcp_meta *)src[i].meta);
		bytes += pfs[i]->info.size;
	}
	if (bytes >= BIG_METADATA)
		ck_release_memory();
}

int dcp_list_items(struct ck_view *v, struct ck_vnode *n, struct ck_vfile *f)
{
	struct phys_file *newest = n->versions[0].pf;
	struct ck_dcp_meta *m = NULL;
	struct ck_dcp_source src = { NULL, NULL, NULL };
	struct ck_dcp_merged mg = { 0 };
	struct ck_error err = { "" };
	int rc;

	if (!f->tensors_pending)
		return 0;
	rc = phys_read_dcp(v, newest, &m);
	if (rc)
		return -EIO;
	src.meta = m;
	rc = ck_dcp_merge(&src, 1, 0, &mg, &err);
	if (!rc)
		rc = list_items(v, n, &newest, &src, &mg, f);
	if (!rc)
		f->tensors_pending = 0;
	ck_dcp_merged_free(&mg);
	free_metas(&src, 1, &newest);
	return rc;
}

int dcp_build_metadata(struct ck_view *v, struct ck_vnode *n, struct phys_file **pfs, size_t np, struct ck_vfile *f)
{
	struct ck_dcp_source *src = NULL;
	char **prefix = NULL;
	struct ck_dcp_merged mg = { 0 };
	struct ck_error err = { "" };
	const struct ck_vnode *from = NULL;
	size_t nsrc = 0;
	int rc = 0;

	/* The older saves' files go under a name the save itself must not use. */
	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; n->parent && i < n->parent->nchildren; i++)
		if (!strcmp(n->parent->children[i]->name, CK_VIEW_DCP_FROM))
			from = n->parent->children[i];
	if (from && !from->dcp_meta)
		from = NULL;
	pthread_rwlock_unlock(&v->ns_lock);
	if (np > 1 && !from) {
		np = 1;
		f->note = strdup("older saves not merged: the save has a file or directory named " CK_VIEW_DCP_FROM);
	}
	/* Nothing to merge, or another tool's .metadata: the file as it is,
	 * its items read only when someone asks for them. */
	if ((np == 1 && !v->opts.always_synthesize) || !is_pickle(v, pfs[0])) {
		f->tensors_pending = is_pickle(v, pfs[0]);
		return vfile_add_phys(f, pfs[0], 0, pfs[0]->info.size);
	}
	src = calloc(np, sizeof(*src));
	prefix = calloc(np, sizeof(*prefix));
	if (!src || !prefix) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < np && !rc; i++) {
		size_t len = strlen(CK_VIEW_DCP_FROM) + strlen(pfs[i]->ckpt->info.name) + 3;
		struct ck_dcp_meta *m;

		rc = phys_read_dcp(v, pfs[i], &m);
		if (rc) {
			ck_err("%s/%s: cannot use the version from %s", n->ckpt->info.name, node_desc(n),
			       pfs[i]->ckpt->info.name);
			rc = -EIO;
			break;
		}
		src[i].meta = m;
		nsrc++;
		prefix[i] = malloc(len);
		if (!prefix[i]) {
			rc = -ENOMEM;
			break;
		}
		snprintf(prefix[i], len, "%s/%s/", CK_VIEW_DCP_FROM, pfs[i]->ckpt->info.name);
		src[i].prefix = i ? prefix[i] : NULL;
		src[i].name = pfs[i]->ckpt->info.name;
	}
	if (rc)
		goto out;
	rc = ck_dcp_merge(src, nsrc, v->opts.always_synthesize ? CK_DCP_MERGE_ALWAYS_EMIT : 0, &mg, &err);
	if (rc) {
		ck_err("%s/%s: cannot merge the saves: %s", n->ckpt->info.name, node_desc(n), err.msg);
		rc = rc == -ENOMEM ? rc : -EIO;
		goto out;
	}
	if (mg.nmerged < nsrc) {
		char note[640];

		snprintf(note, sizeof(note), "older saves from %s on not merged: %s", pfs[mg.nmerged]->ckpt->info.name,
			 mg.why);
		free(f->note);
		f->note = strdup(note);
		ck_warn("%s/%s: %s", n->ckpt->info.name, node_desc(n), note);
	}
	if (mg.bytes.len) {
		f->synthesized = 1;
		rc = vfile_add_mem(f, mg.bytes.data, mg.bytes.len);
		/* the .metadata of every save an item comes from */
		for (size_t i = 0; i < mg.npicks && !rc; i++)
			rc = vfile_add_src(f, pfs[mg.picks[i].source]);
	} else {
		rc = vfile_add_phys(f, pfs[0], 0, pfs[0]->info.size);
	}
	if (!rc)
		rc = list_items(v, n, pfs, src, &mg, f);
out:
	ck_dcp_merged_free(&mg);
	free_metas(src, nsrc, pfs);
	for (size_t i = 0; prefix && i < np; i++)
		free(prefix[i]);
	free(prefix);
	free(src);
	return rc;
}
