/* pk_parse / pk_emit on every real torch.save fixture:
 *   - data.pkl parses; every tensor has a valid dtype and shape, and its
 *     storage record exists and holds numel * element size bytes;
 *   - re-emitting with the keys kept gives back data.pkl byte for byte
 *     (these files were written by torch's protocol-2 pickler);
 *   - the re-emitted pickle parses to the same tensors;
 *   - every prefix of a real data.pkl is refused with a located error;
 *   - the deliberately broken file fails as torch fails ("stack underflow");
 *   - legacy (pre-1.6) files are a sequence of pickles that pk_doc_length
 *     walks one by one.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/pickle.h"
#include "t_pickle_util.h"

#define MAX_MEMBERS 512

struct summary {
	size_t ntensors;
	char desc[8192];
	size_t len;
};

/* Depth-first over dicts, lists, tuples and calls (bounded: fixtures are
 * small and acyclic; the depth cap keeps a broken parser from looping). */
static void collect(const struct pk_node *n, struct summary *s, int depth)
{
	const struct pk_tensor *t;

	if (!n || depth > 64)
		return;
	t = pk_as_tensor(n);
	if (t && n->kind == PK_TENSOR) {
		int w = snprintf(s->desc + s->len, sizeof(s->desc) - s->len, "%s:%s:%llu:%d;",
				 t->storage->key, ck_dtype_name(t->dtype),
				 (unsigned long long)t->offset, t->ndim);

		if (w > 0 && (size_t)w < sizeof(s->desc) - s->len)
			s->len += (size_t)w;
		s->ntensors++;
		return;
	}
	for (size_t i = 0; i < n->n; i++)
		collect(n->items[i], s, depth + 1);
	collect(n->args, s, depth + 1);
	collect(n->state, s, depth + 1);
}

static void check_tensor_sanity(const char *file, const struct pk_node *n,
				const struct t_zip_member *m, int nm, int depth)
{
	const struct pk_tensor *t;

	if (!n || depth > 64)
		return;
	t = pk_as_tensor(n);
	if (t) {
		char rec[300];
		const struct t_zip_member *r;
		uint64_t nbytes = t->storage->numel * ck_dtype_size(t->storage->dtype);

		CHECK_MSG(ck_dtype_size(t->dtype) > 0, "%s: tensor dtype", file);
		CHECK_MSG(t->ndim >= 0 && t->ndim <= CK_MAX_DIMS, "%s: ndim %d", file, t->ndim);
		CHECK_MSG(t->version == 2 || t->version == 3, "%s: version", file);
		snprintf(rec, sizeof(rec), "data/%s", t->storage->key);
		r = t_zip_find(m, nm, rec);
		CHECK_MSG(r != NULL, "%s: no record %s", file, rec);
		if (r)
			CHECK_MSG(nbytes <= r->size, "%s: %s holds %llu bytes, storage needs %llu", file,
				  rec, (unsigned long long)r->size, (unsigned long long)nbytes);
	}
	for (size_t i = 0; i < n->n; i++)
		check_tensor_sanity(file, n->items[i], m, nm, depth + 1);
	check_tensor_sanity(file, n->args, m, nm, depth + 1);
	check_tensor_sanity(file, n->state, m, nm, depth + 1);
}

/* Returns 1 when the re-emission is byte-identical. */
static int check_zip_fixture(const char *file, const uint8_t *zip, size_t len, int *prefix_done)
{
	static struct t_zip_member m[MAX_MEMBERS];
	const struct t_zip_member *pkl;
	struct ck_error err = { "" };
	struct pk_doc *doc = NULL, *again = NULL;
	struct ck_buf out = CK_BUF_INIT;
	struct summary *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	int nm, identical = 0;

	if (!a || !b) {
		CHECK(!"out of memory");
		goto done;
	}
	nm = t_zip_members(zip, len, m, MAX_MEMBERS);
	pkl = nm > 0 ? t_zip_find(m, nm, "data.pkl") : NULL;
	CHECK_MSG(pkl != NULL, "%s: no data.pkl", file);
	if (!pkl)
		goto done;
	if (pk_parse(pkl->data, (size_t)pkl->size, NULL, &doc, &err)) {
		CHECK_MSG(0, "%s: %s", file, err.msg);
		goto done;
	}
	CHECK_MSG(pk_doc_protocol(doc) == 2, "%s: protocol %d", file, pk_doc_protocol(doc));
	CHECK_MSG(pk_doc_length(doc) == pkl->size, "%s: parsed %zu of %llu bytes", file,
		  pk_doc_length(doc), (unsigned long long)pkl->size);
	check_tensor_sanity(file, pk_doc_root(doc), m, nm, 0);
	for (size_t i = 0; i < pk_doc_nstorages(doc); i++) {
		const struct pk_storage *st = pk_doc_storage(doc, i);

		CHECK(st->index == i);
		CHECK_MSG(st->dtype != CK_DT_INVALID, "%s: storage %s dtype", file, st->key);
	}
	for (size_t i = 0; i < pk_doc_nglobals(doc); i++) {
		const struct pk_node *g = pk_doc_global(doc, i);

		CHECK_MSG(!pk_global_is_dangerous(g->v.global.module, g->v.global.name),
			  "%s: %s.%s flagged", file, g->v.global.module, g->v.global.name);
	}
	collect(pk_doc_root(doc), a, 0);

	if (pk_emit(pk_doc_root(doc), NULL, &out, &err)) {
		CHECK_MSG(0, "%s: emit: %s", file, err.msg);
		goto done;
	}
	identical = out.len == pkl->size && !memcmp(out.data, pkl->data, out.len);
	CHECK_MSG(identical, "%s: re-emitted data.pkl differs (%zu vs %llu bytes)", file, out.len,
		  (unsigned long long)pkl->size);
	if (pk_parse(out.data, out.len, NULL, &again, &err)) {
		CHECK_MSG(0, "%s: re-parse: %s", file, err.msg);
		goto done;
	}
	collect(pk_doc_root(again), b, 0);
	CHECK_MSG(a->ntensors == b->ntensors && !strcmp(a->desc, b->desc), "%s: tensors differ", file);
	CHECK_MSG(pk_doc_nstorages(doc) == pk_doc_nstorages(again), "%s: storages differ", file);

	/* Every proper prefix must fail cleanly, naming where. */
	if (!*prefix_done && pkl->size > 1000) {
		*prefix_done = 1;
		for (size_t cut = 0; cut < pkl->size; cut++) {
			struct pk_doc *d = NULL;

			err.msg[0] = '\0';
			CHECK_MSG(pk_parse(pkl->data, cut, NULL, &d, &err) == -EINVAL && !d,
				  "%s: prefix of %zu bytes parsed", file, cut);
			CHECK_MSG(strstr(err.msg, "offset") != NULL, "%s: prefix %zu: '%s'", file, cut,
				  err.msg);
			pk_doc_free(d);
		}
	}
done:
	pk_doc_free(doc);
	pk_doc_free(again);
	ck_buf_free(&out);
	free(a);
	free(b);
	return identical;
}

static void check_broken(const char *path)
{
	struct ck_error err = { "" };
	struct pk_doc *doc = NULL;
	uint8_t *buf;
	size_t len;

	buf = t_read_file(path, &len);
	CHECK_MSG(buf != NULL, "cannot read %s", path);
	if (!buf)
		return;
	CHECK(pk_parse(buf, len, NULL, &doc, &err) == -EINVAL);
	CHECK_MSG(strstr(err.msg, "stack underflow") && strstr(err.msg, "offset 0"), "'%s'", err.msg);
	pk_doc_free(doc);
	free(buf);
}

/* A legacy file: magic number, protocol version, system info, the object
 * (legacy 6-field persistent ids stay PK_PERSID), then the storage keys. */
static void check_legacy(const char *file, const uint8_t *buf, size_t len)
{
	struct ck_error err = { "" };
	size_t off = 0;
	int k;

	for (k = 0; k < 5; k++) {
		struct pk_doc *doc = NULL;

		if (pk_parse(buf + off, len - off, NULL, &doc, &err)) {
			CHECK_MSG(0, "%s: pickle %d at %zu: %s", file, k, off, err.msg);
			return;
		}
		if (k == 0)
			CHECK_MSG(pk_doc_root(doc)->kind == PK_LONG, "%s: magic number", file);
		if (k == 1)
			CHECK_MSG(pk_doc_root(doc)->kind == PK_INT && pk_doc_root(doc)->v.i == 1001,
				  "%s: protocol version", file);
		if (k == 4)
			CHECK_MSG(pk_doc_root(doc)->kind == PK_LIST && pk_doc_root(doc)->n >= 1,
				  "%s: storage keys", file);
		CHECK(pk_doc_nstorages(doc) == 0);
		off += pk_doc_length(doc);
		pk_doc_free(doc);
	}
	CHECK_MSG(off < len, "%s: no storage data after the pickles", file);
}

int main(void)
{
	const char *fixtures = t_fixtures_dir();
	char dir[4096], path[4400];
	struct dirent *de;
	int nzip = 0, nsame = 0, nlegacy = 0, prefix_done = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/torch2x", fixtures);
	d = opendir(dir);
	CHECK_MSG(d != NULL, "cannot open %s", dir);
	if (!d)
		return 1;
	while ((de = readdir(d))) {
		uint8_t *buf;
		size_t len;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		buf = t_read_file(path, &len);
		CHECK_MSG(buf != NULL, "cannot read %s", path);
		if (!buf)
			continue;
		if (len >= 4 && !memcmp(buf, "PK\3\4", 4)) {
			nzip++;
			nsame += check_zip_fixture(de->d_name, buf, len, &prefix_done);
		} else if (strstr(de->d_name, "legacy") && len > 2 && buf[0] == 0x80) {
			nlegacy++;
			check_legacy(de->d_name, buf, len);
		}
		free(buf);
	}
	closedir(d);
	snprintf(path, sizeof(path), "%s/burn_reader_broken.pt", dir);
	check_broken(path);
	CHECK(nzip > 0 && nlegacy > 0 && prefix_done);
	printf("%d zip fixtures, %d re-emitted byte-identical; %d legacy files walked\n",
	       nzip, nsame, nlegacy);
	return t_failures ? 1 : 0;
}
