/* Fuzz target: bytes as a whole safetensors file (header length, header,
 * byte buffer; the file size is the input size).  A file that parses is
 * laid out again with st_layout, whose header must parse for the same data
 * size with the same tensors. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "ckptfs/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Same names, whatever the order (empty tensors share offsets, and the
 * reader and the writer order those differently). */
static int same_names(const struct st_tensor *x, const struct st_tensor *y, size_t n)
{
	const char **a = malloc((n ? n : 1) * sizeof(*a)), **b = malloc((n ? n : 1) * sizeof(*b));
	int same = a && b;

	for (size_t i = 0; same && i < n; i++) {
		a[i] = x[i].name;
		b[i] = y[i].name;
	}
	if (same && n > 1) {
		qsort(a, n, sizeof(*a), cmp_str);
		qsort(b, n, sizeof(*b), cmp_str);
	}
	for (size_t i = 0; same && i < n; i++)
		same = !strcmp(a[i], b[i]);
	free(a);
	free(b);
	return same || !a || !b;
}

static void relayout(const struct st_file *f)
{
	struct st_tensor *t = calloc(f->n ? f->n : 1, sizeof(*t));
	struct ck_buf out = CK_BUF_INIT;
	struct st_file again;
	uint64_t data_len = f->n ? f->tensors[f->n - 1].end : 0;

	if (!t)
		return;
	memcpy(t, f->tensors, f->n * sizeof(*t));
	if (st_layout(t, f->n, f->meta, f->nmeta, &out, NULL))
		abort();
	if (st_parse((const char *)out.data + 8, out.len - 8, out.len + data_len, &again, NULL))
		abort();
	if (again.n != f->n || again.nmeta != f->nmeta)
		abort();
	for (size_t i = 0; i < f->n; i++)
		if (again.tensors[i].begin != t[i].begin || again.tensors[i].end != t[i].end)
			abort();
	if (!same_names(again.tensors, t, f->n))
		abort();
	st_file_free(&again);
	ck_buf_free(&out);
	free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct st_file f;
	struct ck_error err;
	uint64_t n;

	if (size < 8 || st_header_len(data, size, &n, &err))
		return 0;
	err.msg[0] = 0;
	if (st_parse((const char *)data + 8, (size_t)n, size, &f, &err)) {
		if (!err.msg[0])
			abort();
		return 0;
	}
	relayout(&f);
	st_file_free(&f);
	return 0;
}
