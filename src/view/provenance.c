/* Provenance of a composite file as JSON (the user.ckptfs.sources xattr):
 * which physical files of which checkpoints it is made of, and where each
 * tensor comes from.
 *
 *   {"checkpoint": "run1/checkpoint-20", "file": "model.pt", "kind": "torch",
 *    "synthesized": true,
 *    "sources": [{"checkpoint": "checkpoint-20", "step": 20, "path": "/data/...", "tensors": 8}, ...],
 *    "tensors": {"model.layers.0.weight": "checkpoint-10", ...}}
 *
 * Linux caps an xattr value at 64 KiB: past that the per-tensor map is left
 * out ("tensors_omitted": true; `ckptctl show` lists them all).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "ckptfs/lossy.h"
#include "view_internal.h"

#define XATTR_MAX 65536

static int put_key(struct ck_buf *b, const char *k)
{
	int rc = js_put_string(b, k, strlen(k));

	return rc ? rc : ck_buf_puts(b, ": ");
}

static int sources_json(struct ck_vnode *n, struct ck_vfile *f, int with_tensors, struct ck_buf *b)
{
	int rc;

	rc = ck_buf_puts(b, "{");
	if (!rc)
		rc = put_key(b, "checkpoint");
	if (!rc)
		rc = ck_buf_printf(b, "\"%s/%s\", ", n->ckpt->series->name, n->ckpt->info.name);
	if (!rc)
		rc = put_key(b, "file");
	if (!rc)
		rc = js_put_string(b, n->relpath && n->relpath[0] ? n->relpath : n->name,
				   strlen(n->relpath && n->relpath[0] ? n->relpath : n->name));
	if (!rc)
		rc = ck_buf_printf(b, ", \"kind\": \"%s\", \"synthesized\": %s, \"sources\": [", f->kind,
				   f->synthesized ? "true" : "false");
	for (size_t i = 0; i < f->nsrcs && !rc; i++) {
		struct phys_file *pf = f->srcs[i];
		size_t count = 0;

		for (size_t t = 0; t < f->ntensors; t++)
			count += f->tensors[t].pf == pf;
		rc = ck_buf_puts(b, i ? ", {" : "{");
		if (!rc)
			rc = put_key(b, "checkpoint");
		if (!rc)
			rc = js_put_string(b, pf->ckpt->info.name, strlen(pf->ckpt->info.name));
		if (!rc)
			rc = ck_buf_printf(b, ", \"step\": %lld, ", (long long)pf->ckpt->info.step);
		if (!rc)
			rc = put_key(b, "path");
		if (!rc)
			rc = js_put_string(b, pf->info.src_path, strlen(pf->info.src_path));
		if (!rc)
			rc = ck_buf_printf(b, ", \"tensors\": %zu}", count);
	}
	if (!rc)
		rc = ck_buf_puts(b, "]");
	if (!rc && with_tensors) {
		rc = ck_buf_puts(b, ", \"tensors\": {");
		for (size_t t = 0; t < f->ntensors && !rc; t++) {
			if (t)
				rc = ck_buf_puts(b, ", ");
			if (!rc)
				rc = put_key(b, f->tensors[t].name);
			if (!rc)
				rc = js_put_string(b, f->tensors[t].pf->ckpt->info.name,
						   strlen(f->tensors[t].pf->ckpt->info.name));
		}
		if (!rc)
			rc = ck_buf_puts(b, "}");
	} else if (!rc) {
		rc = ck_buf_puts(b, ", \"tensors_omitted\": true");
	}
	return rc ? rc : ck_buf_puts(b, "}\n");
}

int provenance_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out)
{
	struct ck_buf b = CK_BUF_INIT;
	struct ck_vfile *f;
	int rc;

	rc = view_node_vfile(v, n, &f);
	if (rc)
		return rc;
	rc = sources_json(n, f, 1, &b);
	if (!rc && b.len > XATTR_MAX) {
		b.len = 0;
		rc = sources_json(n, f, 0, &b);
	}
	if (!rc)
		rc = ck_buf_put(out, b.data, b.len);
	ck_buf_free(&b);
	ck_vfile_put(f);
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
int lossy_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out)
{
	struct ck_buf b = CK_BUF_INIT;
	struct ck_vfile *f;
	double bound = 0, worst = 0;
	unsigned method = 0;
	size_t lossy = 0;
	int rc;

	rc = view_node_vfile(v, n, &f);
	if (rc)
		return rc;
	rc = ck_buf_puts(&b, "\"sources\": [");
	for (size_t i = 0; i < f->nsrcs && !rc; i++) {
		struct phys_file *pf = f->srcs[i];
		struct ck_file_pack_info pi;

		if (ck_store_file_pack_info(v->store, pf->info.id, &pi) < 0 || !pi.lossy)
			continue;
		rc = ck_buf_puts(&b, lossy++ ? ", {" : "{");
		if (!rc)
			rc = put_key(&b, "checkpoint");
		if (!rc)
			rc = js_put_string(&b, pf->ckpt->info.name, strlen(pf->ckpt->info.name));
		if (!rc)
			rc = ck_buf_printf(&b, ", \"bound\": %.15g, \"tensors\": %u, \"max_rel_error\": %.15g}",
					   pi.lossy_bound, pi.lossy_storages, pi.lossy_max_rel);
		if (pi.lossy_bound > bound)
			bound = pi.lossy_bound;
		if (pi.lossy_max_rel > worst)
			worst = pi.lossy_max_rel;
		method = pi.lossy_method;
	}
	if (!rc && lossy)
		rc = ck_buf_printf(out, "{\"method\": \"%s\", \"bound\": %.15g, \"max_rel_error\": %.15g, ",
				   ck_lossy_method_name(method), bound, worst);
	if (!rc && lossy)
		rc = ck_buf_put(out, b.data, b.len);
	if (!rc && lossy)
		rc = ck_buf_puts(out, "]}\n");
	ck_buf_free(&b);
	ck_vfile_put(f);
	return rc ? rc : lossy ? 0 : -ENODATA;
}
