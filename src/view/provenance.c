/* Provenance of a composite file as JSON (the user.ckptfs.sources xattr):
 * which physical files of which checkpoints it is made of, and where each
 * tensor comes from.
 *
 *   {"checkpoint": "run1/checkpoint-20", "file": "model.pt", "kind": "torch",
 *    "synthesized": true,
 *    "sources": [{"series": "run1", "checkpoint": "checkpoint-20", "step": 20, "path": "/data/...",
 *                 "tensors": 8}, ...],
 *    "tensors": {"model.layers.0.weight": "checkpoint-10", ...}}
 *
 * Linux caps an xattr value at 64 KiB: past that the per-tensor map is left
 * out ("tensors_omitted": true; `ckptctl show` lists them all).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/json.h"
#include "view_internal.h"

#define XATTR_MAX 65536

static int put_key(struct ck_buf *b, const char *k)
{
	int rc = js_put_string(b, k, strlen(k));

	return rc ? rc : ck_buf_puts(b, ": ");
}

static int sources_json(const char *checkpoint, const char *file, const struct ck_vfile *f, int with_tensors,
			struct ck_buf *b)
{
	int rc;

	rc = ck_buf_puts(b, "{");
	if (!rc)
		rc = put_key(b, "checkpoint");
	if (!rc)
		rc = js_put_string(b, checkpoint, strlen(checkpoint));
	if (!rc)
		rc = ck_buf_puts(b, ", ");
	if (!rc)
		rc = put_key(b, "file");
	if (!rc)
		rc = js_put_string(b, file, strlen(file));
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
			rc = put_key(b, "series");
		if (!rc)
			rc = js_put_string(b, pf->ckpt->series->name, strlen(pf->ckpt->series->name));
		if (!rc)
			rc = ck_buf_puts(b, ", ");
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

int ck_vfile_sources_json(const struct ck_vfile *f, const char *checkpoint, const char *file, struct ck_buf *out)
{
	struct ck_buf b = CK_BUF_INIT;
	int rc;

	rc = sources_json(checkpoint, file, f, 1, &b);
	if (!rc && b.len > XATTR_MAX) {
		b.len = 0;
		rc = sources_json(checkpoint, file, f, 0, &b);
	}
	if (!rc)
		rc = ck_buf_put(out, b.data, b.len);
	ck_buf_free(&b);
	return rc;
}

int provenance_json(struct ck_view *v, struct ck_vnode *n, struct ck_buf *out)
{
	struct ck_vfile *f;
	char ckpt[1024];
	int rc;

	rc = view_node_vfile(v, n, &f);
	if (rc)
		return rc;
	snprintf(ckpt, sizeof(ckpt), "%s/%s", n->ckpt->series->name, n->ckpt->info.name);
	rc = ck_vfile_sources_json(f, ckpt, n->relpath && n->relpath[0] ? n->relpath : n->name, out);
	ck_vfile_put(f);
	return rc;
}
