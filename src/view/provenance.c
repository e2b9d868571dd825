/* Provenance of a composite (or built) file as JSON (the user.ckptfs.sources
 * xattr): which physical files of which checkpoints it is made of, and where
 * each tensor comes from.
 *
 *   {"checkpoint": "run1/checkpoint-20", "file": "model.pt", "kind": "torch",
 *    "synthesized": true,
 *    ["not_merged": "why older saves were left out", (DCP .metadata)]
 *    "sources": [{"series": "run1", "checkpoint": "checkpoint-20", "step": 20,
 *                 "path": "/data/...", "tensors": 8}, ...],
 *    "tensors": {"model.layers.0.weight": "checkpoint-10", ...}}
 *
 * Linux caps an xattr value at 64 KiB: past that the per-tensor map is left
 * out ("tensors_omitted": true; `ckptctl show` lists them all).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/fileio.h"
#include "ckptfs/json.h"
#include "ckptfs/lossy.h"
#include "view_internal.h"

#define XATTR_MAX 65536

/* The document for f (without the per-tensor map unless with_tensors). */
static int sources_json(const char *checkpoint, const char *file, const struct ck_vfile *f, int with_tensors,
			struct jw *w)
{
	jw_begin_obj(w);
	jw_key(w, "checkpoint");
	jw_str(w, checkpoint);
	jw_key(w, "file");
	jw_str(w, file);
	jw_key(w, "kind");
	jw_str(w, f->kind);
	jw_key(w, "synthesized");
	jw_bool(w, f->synthesized);
	if (f->note) {
		jw_key(w, "not_merged");
		jw_str(w, f->note);
	}
	jw_key(w, "sources");
	jw_begin_arr(w);
	for (size_t i = 0; i < f->nsrcs; i++) {
		struct phys_file *pf = f->srcs[i];
		uint64_t count = 0;

		for (size_t t = 0; t < f->ntensors; t++)
			count += f->tensors[t].pf == pf;
		jw_begin_obj(w);
		jw_key(w, "series");
		jw_str(w, pf->ckpt->series->name);
		jw_key(w, "checkpoint");
		jw_str(w, pf->ckpt->info.name);
		jw_key(w, "step");
		jw_int(w, pf->ckpt->info.step);
		jw_key(w, "path");
		jw_str(w, pf->info.src_path);
		jw_key(w, "tensors");
		jw_uint(w, count);
		jw_end_obj(w);
	}
	jw_end_arr(w);
	if (with_tensors) {
		jw_key(w, "tensors");
		jw_begin_obj(w);
		for (size_t t = 0; t < f->ntensors; t++) {
			jw_key(w, f->tensors[t].name);
			jw_str(w, f->tensors[t].pf->ckpt->info.name);
		}
		jw_end_obj(w);
	} else {
		jw_key(w, "tensors_omitted");
		jw_bool(w, 1);
	}
	jw_end_obj(w);
	return jw_error(w);
}

int ck_vfile_sources_json(const struct ck_vfile *f, const char *checkpoint, const char *file, struct ck_buf *out)
{
	struct jw w = { .b = CK_BUF_INIT, .spaced = 1 };
	int rc;

	rc = sources_json(checkpoint, file, f, 1, &w);
	if (!rc && w.b.len + 1 > XATTR_MAX) {
		jw_free(&w);
		rc = sources_json(checkpoint, file, f, 0, &w);
	}
	if (!rc)
		rc = ck_buf_put(out, w.b.data, w.b.len);
	if (!rc)
		rc = ck_buf_putc(out, '\n');
	jw_free(&w);
	return rc;
}

int provenance_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out)
{
	char *where = ck_path_join(n->ckpt->series->name, n->ckpt->info.name);   /* as in the mount */
	struct ck_vfile *f;
	int rc;

	if (!where)
		return -ENOMEM;
	rc = view_node_tensors(v, n, &f);
	if (!rc) {
		rc = ck_vfile_sources_json(f, where, n->relpath && n->relpath[0] ? n->relpath : n->name, out);
		ck_vfile_put(f);
	}
	free(where);
	return rc;
}

/* The lossy sources of a composite (the user.ckptfs.lossy xattr): how
 * and within what they were coded, and the worst error achieved.
 *
 *   {"method": "qres-linf", "bound": 0.05, "max_rel_error": 0.0499,
 *    "sources": [{"checkpoint": "checkpoint-20", "bound": 0.05, "tensors": 81,
 *                 "max_rel_error": 0.0499}]}
 *
 * bound: every element within bound times its tensor's largest |x|.
 * -ENODATA when every byte the file serves is exact. */
int ck_vfile_lossy_json(const struct ck_vfile *f, struct ck_buf *out)
{
	struct jw w = { .b = CK_BUF_INIT, .spaced = 1 };
	struct ck_file_pack_info *pi;
	double bound = 0, worst = 0;
	unsigned method = 0;
	size_t lossy = 0;
	int rc = 0;

	pi = calloc(f->nsrcs ? f->nsrcs : 1, sizeof(*pi));
	if (!pi)
		return -ENOMEM;
	for (size_t i = 0; i < f->nsrcs; i++) {
		if (ck_store_file_pack_info(f->view->store, f->srcs[i]->info.id, &pi[i]) < 0 || !pi[i].lossy) {
			pi[i].lossy = 0;
			continue;
		}
		lossy++;
		method = pi[i].lossy_method;
		if (pi[i].lossy_bound > bound)
			bound = pi[i].lossy_bound;
		if (pi[i].lossy_max_rel > worst)
			worst = pi[i].lossy_max_rel;
	}
	if (lossy) {
		jw_begin_obj(&w);
		jw_key(&w, "method");
		jw_str(&w, ck_lossy_method_name(method));
		jw_key(&w, "bound");
		jw_double(&w, bound);
		jw_key(&w, "max_rel_error");
		jw_double(&w, worst);
		jw_key(&w, "sources");
		jw_begin_arr(&w);
		for (size_t i = 0; i < f->nsrcs; i++) {
			if (!pi[i].lossy)
				continue;
			jw_begin_obj(&w);
			jw_key(&w, "checkpoint");
			jw_str(&w, f->srcs[i]->ckpt->info.name);
			jw_key(&w, "bound");
			jw_double(&w, pi[i].lossy_bound);
			jw_key(&w, "tensors");
			jw_uint(&w, pi[i].lossy_storages);
			jw_key(&w, "max_rel_error");
			jw_double(&w, pi[i].lossy_max_rel);
			jw_end_obj(&w);
		}
		jw_end_arr(&w);
		jw_end_obj(&w);
		rc = jw_error(&w);
		if (!rc)
			rc = ck_buf_put(out, w.b.data, w.b.len);
		if (!rc)
			rc = ck_buf_putc(out, '\n');
	}
	jw_free(&w);
	free(pi);
	return rc ? rc : lossy ? 0 : -ENODATA;
}

int lossy_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out)
{
	struct ck_vfile *f;
	int rc = view_node_vfile(v, n, &f);

	if (rc)
		return rc;
	rc = ck_vfile_lossy_json(f, out);
	ck_vfile_put(f);
	return rc;
}
