/* Freeing the plain records ingest fills (include/ckptfs/records.h). */
#include "config.h"

#include <stdlib.h>

#include "ckptfs/records.h"

void ck_file_info_clear(struct ck_file_info *f)
{
	free(f->relpath);
	free(f->src_path);
	free(f->error);
	free(f->target);
	f->relpath = f->src_path = f->error = f->target = NULL;
}

void ck_storage_info_clear(struct ck_storage_info *s)
{
	free(s->key);
	s->key = NULL;
}

void ck_tensor_info_clear(struct ck_tensor_info *t)
{
	free(t->name);
	free(t->layer);
	free(t->storage_key);
	t->name = t->layer = t->storage_key = NULL;
}

void ck_file_info_free(struct ck_file_info *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		ck_file_info_clear(&v[i]);
	free(v);
}

void ck_storage_info_free(struct ck_storage_info *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		ck_storage_info_clear(&v[i]);
	free(v);
}

void ck_tensor_info_free(struct ck_tensor_info *v, size_t n)
{
	size_t i;

	for (i = 0; v && i < n; i++)
		ck_tensor_info_clear(&v[i]);
	free(v);
}

const char *ck_file_kind_name(enum ck_file_kind kind)
{
	switch (kind) {
	case CK_FILE_OTHER:
		return "other";
	case CK_FILE_TORCH:
		return "torch";
	case CK_FILE_SAFETENSORS:
		return "safetensors";
	case CK_FILE_SAFETENSORS_INDEX:
		return "safetensors-index";
	case CK_FILE_BAD:
		return "bad";
	case CK_FILE_SYMLINK:
		return "symlink";
	case CK_FILE_DIR:
		return "dir";
	}
	return "unknown";
}
