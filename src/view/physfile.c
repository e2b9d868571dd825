/* Physical files of the store as the view uses them: one shared fd each,
 * identity checks, lazily parsed content and first-read hash verification. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/fileio.h"
#include "ckptfs/log.h"
#include "view_internal.h"

int phys_open_fd(struct ck_view *v, struct phys_file *pf)
{
	int fd, rc = packed_get(v, pf, NULL);

	if (rc)
		return rc < 0 ? rc : 0;   /* packed: read through the pack, no fd */
	pthread_mutex_lock(&v->lock);
	if (pf->fd < 0 && atomic_load(&pf->packed_known)) {
		/* a refresh found it packed meanwhile */
		pthread_mutex_unlock(&v->lock);
		rc = packed_get(v, pf, NULL);
		return rc < 0 ? rc : 0;
	}
	if (pf->fd < 0) {
		fd = open(pf->info.src_path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rc = -errno;
			ck_err("%s: cannot open: %s", pf->info.src_path, strerror(errno));
		} else {
			pf->fd = fd;
		}
	}
	pthread_mutex_unlock(&v->lock);
	return rc;
}

/* A file that failed its identity check with its size unchanged (the store
 * was copied or restored): read again once (ck_store_file_check), one
 * thread at a time; the others find it done. */
static int phys_reidentify(struct ck_view *v, struct phys_file *pf, struct ck_error *err)
{
	struct ck_file_info f;
	int rc;

	pthread_mutex_lock(&v->reid_lock);
	pthread_mutex_lock(&v->lock);
	f = pf->info;
	pthread_mutex_unlock(&v->lock);
	rc = ck_file_check(&f, err);
	if (rc == -ESTALE)
		rc = ck_store_file_check(v->store, &f, 1, err);
	if (rc == 0) {
		pthread_mutex_lock(&v->lock);
		pf->info.dev = f.dev;
		pf->info.ino = f.ino;
		pf->info.mtime_ns = f.mtime_ns;
		pthread_mutex_unlock(&v->lock);
	}
	pthread_mutex_unlock(&v->reid_lock);
	return rc;
}

/* The raw file the view holds open is still the one imported (its path
 * may be gone). */
static int pinned_check(struct phys_file *pf)
{
	struct stat sb;

	if (pf->fd < 0 || fstat(pf->fd, &sb) < 0)
		return -ESTALE;
	return ck_file_identity_same(&pf->info, &sb) ? 0 : -ESTALE;
}

/* Identity check on every open: a file changed behind the store's back is
 * refused, never served.  The stat also gives the file's owner and mode
 * now, which the permission checks of the open use. */
int phys_check(struct ck_view *v, struct phys_file *pf)
{
	struct ck_error err;
	struct ck_owner o;
	int rc, packed;

	packed = packed_get(v, pf, NULL);
	if (packed < 0)
		return packed;
	rc = ck_file_check_owner(&pf->info, &o, &err);
	if (rc == 0)
		phys_owner_update(v, pf, &o);
	if (packed)
		return 0;                 /* packed chunks are checked by hash on decode */
	if (rc && atomic_load(&pf->raw_pinned) && pinned_check(pf) == 0)
		return 0;                 /* coded lossily and removed: the open file is the one imported */
	if (rc && packed_recheck(v, pf) > 0)
		return 0;                 /* compaction packed it and removed the raw file */
	if (rc == -ESTALE)
		rc = phys_reidentify(v, pf, &err);
	if (rc) {
		ck_err("%s/%s: refusing to serve: %s", pf->ckpt->info.name,
		       pf->info.relpath[0] ? pf->info.relpath : pf->ckpt->info.name, err.msg);
		return rc;
	}
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct phys_range *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int range_key_cmp(const void *a, const void *b)
{
	return strcmp((*(struct phys_range *const *)a)->key, (*(struct phys_range *const *)b)->key);
}

int phys_load_ranges(struct ck_view *v, struct phys_file *pf)
{
	struct ck_storage_info *si = NULL;
	size_t n = 0;
	int rc = 0;

	pthread_mutex_lock(&v->lock);
	if (pf->ranges_loaded)
		goto out;
	rc = ck_store_list_storages(v->store, pf->info.id, &si, &n);
	if (rc)
		goto out;
	if (n) {
		pf->ranges = calloc(n, sizeof(*pf->ranges));
		if (!pf->ranges) {
			rc = -ENOMEM;
			goto out;
		}
	}
	for (size_t i = 0; i < n; i++) {
		struct phys_range *r = &pf->ranges[i];

		r->offset = si[i].offset;
		r->length = si[i].length;
		r->hash_lo = si[i].hash_lo;
		r->hash_hi = si[i].hash_hi;
		r->key = si[i].key;
		si[i].key = NULL;
		atomic_init(&r->state, 0);
	}
	pf->nranges = n;
	if (n > 1)
		qsort(pf->ranges, n, sizeof(*pf->ranges), range_cmp);
	pf->ranges_by_key = malloc((n + 1) * sizeof(*pf->ranges_by_key));
	if (!pf->ranges_by_key) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		pf->ranges_by_key[i] = &pf->ranges[i];
	if (n > 1)
		qsort(pf->ranges_by_key, n, sizeof(*pf->ranges_by_key), range_key_cmp);
	pf->ranges_loaded = 1;
out:
	pthread_mutex_unlock(&v->lock);
	ck_storage_info_free(si, n);
	return rc;
}

struct phys_range *phys_find_range(struct phys_file *pf, const char *key)
{
	struct phys_range k = { .key = (char *)key }, *kp = &k, **r;

	if (!pf->ranges_by_key)
		return NULL;
	r = bsearch(&kp, pf->ranges_by_key, pf->nranges, sizeof(*r), range_key_cmp);
	return r ? *r : NULL;
}

int phys_read(struct phys_file *pf, void *buf, size_t len, uint64_t off)
{
	struct ck_vpacked *packed = atomic_load(&pf->packed);

	if (packed)
		return packed_read(packed, buf, len, off, 0);
	return ck_pread_full(pf->fd, buf, len, off);
}

static int tz_pread_phys(void *ctx, void *buf, size_t len, uint64_t off)
{
	struct phys_file *pf = ctx;
	struct ck_vpacked *packed = atomic_load(&pf->packed);

	/* The zip reader reads local headers in large batches; in a packed
	 * file the tensor bytes in between would all have to be decoded. */
	if (packed && pf->ranges_loaded)
		return packed_read_headers(packed, pf->ranges, pf->nranges, buf, len, off);
	return phys_read(pf, buf, len, off);
}

static int parse_torch(struct phys_file *pf, struct ck_error *err)
{
	const struct tz_entry *pkl;
	uint8_t *bytes;
	int rc;

	rc = tz_read(tz_pread_phys, pf, pf->info.size, &pf->ar, err);
	if (rc)
		return rc;
	pkl = tz_find(&pf->ar, "data.pkl");
	if (!pkl)
		return ck_fail(err, EINVAL, "no data.pkl record");
	if (pkl->size > (1ULL << 32))
		return ck_fail(err, EFBIG, "data.pkl of %llu bytes", (unsigned long long)pkl->size);
	bytes = malloc(pkl->size ? pkl->size : 1);
	if (!bytes)
		return -ENOMEM;
	rc = phys_read(pf, bytes, pkl->size, pkl->data_offset);
	if (rc) {
		free(bytes);
		return ck_fail(err, -rc, "reading data.pkl: %s", strerror(-rc));
	}
	rc = pk_parse(bytes, pkl->size, NULL, &pf->doc, err);
	free(bytes);
	if (rc)
		return rc;
	/* Composites mix trees of several files: each storage remembers its file. */
	for (size_t i = 0; i < pk_doc_nstorages(pf->doc); i++)
		pk_doc_storage(pf->doc, i)->user = pf;
	return 0;
}

static int st_name_cmp(const void *a, const void *b)
{
	return strcmp((*(const struct st_tensor *const *)a)->name, (*(const struct st_tensor *const *)b)->name);
}

static int parse_safetensors(struct phys_file *pf, struct ck_error *err)
{
	uint8_t prefix[8];
	uint64_t n;
	char *hdr;
	int rc;

	if (pf->info.size < 8)
		return ck_fail(err, EINVAL, "shorter than 8 bytes");
	rc = phys_read(pf, prefix, 8, 0);
	if (rc)
		return ck_fail(err, -rc, "read: %s", strerror(-rc));
	rc = st_header_len(prefix, pf->info.size, &n, err);
	if (rc)
		return rc;
	hdr = malloc(n + 1);
	if (!hdr)
		return -ENOMEM;
	rc = phys_read(pf, hdr, n, 8);
	if (!rc)
		rc = st_parse(hdr, n, pf->info.size, &pf->st, err);
	free(hdr);
	/* By name too: a composite merges its versions' names in one pass each. */
	if (!rc && !(pf->st_by_name = malloc((pf->st.n + 1) * sizeof(*pf->st_by_name))))
		rc = -ENOMEM;
	if (!rc) {
		for (size_t i = 0; i < pf->st.n; i++)
			pf->st_by_name[i] = &pf->st.tensors[i];
		qsort(pf->st_by_name, pf->st.n, sizeof(*pf->st_by_name), st_name_cmp);
	}
	return rc;
}

/* Parses the container and the state tree once per file (cached for the
 * life of the view; trees are immutable and shared by composites).  Under
 * the file's own lock: the versions of a composite parse in parallel. */
int phys_parse(struct ck_view *v, struct phys_file *pf)
{
	struct ck_error err = { "" };
	int rc;

	rc = phys_open_fd(v, pf);
	if (rc)
		return rc;
	if (atomic_load(&pf->packed) && pf->info.kind == CK_FILE_TORCH)
		phys_load_ranges(v, pf);   /* lets the parse skip tensor bytes; best effort */
	pthread_mutex_lock(&pf->parse_lock);
	if (pf->parsed) {
		rc = pf->parsed < 0 ? pf->parsed : 0;
		goto out;
	}
	switch (pf->info.kind) {
	case CK_FILE_TORCH:
		rc = parse_torch(pf, &err);
		break;
	case CK_FILE_SAFETENSORS:
		rc = parse_safetensors(pf, &err);
		break;
	default:
		rc = 0;
		break;
	}
	if (rc) {
		ck_err("%s: cannot parse: %s", pf->info.src_path, err.msg);
		rc = -EIO;
	}
	pf->parsed = rc ? rc : 1;
out:
	pthread_mutex_unlock(&pf->parse_lock);
	return rc;
}

int phys_read_dcp(struct ck_view *v, struct phys_file *pf, struct ck_dcp_meta **out)
{
	struct ck_error err = { "" };
	uint8_t *data = NULL;
	int rc;

	*out = NULL;
	rc = phys_open_fd(v, pf);
	if (rc)
		return rc;
	rc = pf->info.size > CK_INGEST_MAX_PICKLE ? -EFBIG : 0;
	data = rc ? NULL : malloc(pf->info.size + 1);
	if (!rc && !data)
		rc = -ENOMEM;
	if (!rc)
		rc = phys_read(pf, data, pf->info.size, 0);
	if (!rc)
		rc = ck_dcp_parse(data, pf->info.size, out, &err);
	free(data);
	if (rc)
		ck_err("%s: cannot read it as a DCP .metadata: %s", pf->info.src_path, err.msg[0] ? err.msg : strerror(-rc));
	return rc;
}

/* Hashes [r->offset, +length) of the file.  pread, not mmap: a file
 * truncated behind our back must give an error, not SIGBUS in the daemon.
 * The kernel is told up front that the whole range is needed, so it reads
 * ahead in large requests while we hash. */
static int hash_range(struct phys_file *pf, const struct phys_range *r, XXH128_hash_t *out)
{
	enum { CHUNK = 1 << 20 };
	XXH3_state_t *st;
	uint8_t *buf;
	int rc = 0;

	posix_fadvise(pf->fd, (off_t)r->offset, (off_t)r->length, POSIX_FADV_WILLNEED);
	buf = malloc(CHUNK);
	st = XXH3_createState();
	if (!buf || !st) {
		free(buf);
		XXH3_freeState(st);
		return -ENOMEM;
	}
	XXH3_128bits_reset(st);
	for (uint64_t done = 0; done < r->length && !rc;) {
		size_t len = r->length - done < CHUNK ? (size_t)(r->length - done) : CHUNK;

		rc = phys_read(pf, buf, len, r->offset + done);
		if (!rc)
			XXH3_128bits_update(st, buf, len);
		done += len;
	}
	*out = XXH3_128bits_digest(st);
	XXH3_freeState(st);
	free(buf);
	return rc;
}

/* Claims r for hashing (1: the caller hashes it, then calls range_settle),
 * or gives the verdict another thread reached (0, *verdict 0 or -EIO),
 * waiting for it while that thread is hashing.  The kernel sends several
 * reads of one range at once (readahead); the first reader hashes, the
 * others wait for its verdict instead of hashing the same bytes again. */
static int range_claim(struct ck_view *v, struct phys_range *r, int *verdict)
{
	int state = RANGE_UNCHECKED;

	if (atomic_compare_exchange_strong(&r->state, &state, RANGE_HASHING))
		return 1;
	if (state == RANGE_HASHING) {
		pthread_mutex_lock(&v->verify_lock);
		while ((state = atomic_load(&r->state)) == RANGE_HASHING)
			pthread_cond_wait(&v->verify_done, &v->verify_lock);
		pthread_mutex_unlock(&v->verify_lock);
	}
	*verdict = state == RANGE_GOOD ? 0 : -EIO;
	return 0;
}

/* Records the verdict on a claimed range: read_rc is the read's result,
 * h the hash of the bytes read.  0 when the bytes are right, else -EIO. */
static int range_settle(struct ck_view *v, struct phys_file *pf, struct phys_range *r, int read_rc,
			const XXH128_hash_t *h)
{
	int state;

	if (read_rc) {
		ck_err("%s/%s: tensor '%s': read of %s failed: %s", pf->ckpt->info.name,
		       pf->info.relpath, r->key, pf->info.src_path, strerror(-read_rc));
		state = RANGE_UNCHECKED;   /* a read error may pass: let the next reader try again */
	} else if (h->low64 != r->hash_lo || h->high64 != r->hash_hi) {
		ck_err("%s/%s: tensor '%s': content hash mismatch in %s at offset %llu (%llu bytes): "
		       "the file changed or is damaged; refusing to serve it",
		       pf->ckpt->info.name, pf->info.relpath, r->key, pf->info.src_path,
		       (unsigned long long)r->offset, (unsigned long long)r->length);
		state = RANGE_BAD;
	} else {
		state = RANGE_GOOD;
	}
	pthread_mutex_lock(&v->verify_lock);
	atomic_store(&r->state, state);
	pthread_cond_broadcast(&v->verify_done);
	pthread_mutex_unlock(&v->verify_lock);
	return state == RANGE_GOOD ? 0 : -EIO;
}

/* Verifies a range once in the life of the view and compares it with the
 * hash recorded at import. */
int phys_verify_range(struct ck_view *v, struct phys_file *pf, struct phys_range *r)
{
	XXH128_hash_t h = { 0, 0 };
	int verdict, rc;

	if (!range_claim(v, r, &verdict))
		return verdict;
	rc = hash_range(pf, r, &h);
	return range_settle(v, pf, r, rc, &h);
}

int phys_verify_bytes(struct ck_view *v, struct phys_file *pf, struct phys_range *r, const void *bytes)
{
	XXH128_hash_t h;
	int verdict;

	if (!range_claim(v, r, &verdict))
		return verdict;
	h = XXH3_128bits(bytes, (size_t)r->length);
	return range_settle(v, pf, r, 0, &h);
}

/* Ranges of one file verified by several threads: each takes the next
 * unclaimed range until none is left. */
struct verify_job {
	struct ck_view *v;
	struct phys_file *pf;
	struct phys_range **r;
	size_t n;
	atomic_size_t next;
	atomic_int failed;          /* first -errno seen, or 0 */
};

static void *verify_worker(void *arg)
{
	struct verify_job *j = arg;
	size_t i;

	while ((i = atomic_fetch_add(&j->next, 1)) < j->n) {
		int rc = phys_verify_range(j->v, j->pf, j->r[i]);
		int none = 0;

		if (rc)
			atomic_compare_exchange_strong(&j->failed, &none, rc);
	}
	return NULL;
}

int phys_verify_ranges(struct ck_view *v, struct phys_file *pf, struct phys_range **r, size_t n)
{
	enum { MAX_HELPERS = 3, MIN_BYTES_PER_THREAD = 8 << 20 };
	struct verify_job job = { .v = v, .pf = pf, .r = r, .n = n };
	pthread_t helpers[MAX_HELPERS];
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t bytes = 0;
	size_t want, started = 0;

	atomic_init(&job.next, 0);
	atomic_init(&job.failed, 0);
	for (size_t i = 0; i < n; i++)
		bytes += r[i]->length;
	/* Helpers only where each has enough to hash to pay for its start. */
	want = cpus > 1 ? (size_t)cpus - 1 : 0;
	if (want > MAX_HELPERS)
		want = MAX_HELPERS;
	if (want > bytes / MIN_BYTES_PER_THREAD)
		want = (size_t)(bytes / MIN_BYTES_PER_THREAD);
	if (want > n - 1)
		want = n ? n - 1 : 0;
	for (; started < want; started++)
		if (pthread_create(&helpers[started], NULL, verify_worker, &job))
			break;   /* fewer helpers: the caller hashes the rest */
	verify_worker(&job);
	for (size_t i = 0; i < started; i++)
		pthread_join(helpers[i], NULL);
	return atomic_load(&job.failed);
}

static int tinfo_cmp(const void *a, const void *b)
{
	const struct ck_tensor_info *x = a, *y = b;

	return strcmp(x->name, y->name);
}

const char *phys_tensor_layer(struct ck_view *v, struct phys_file *pf, const char *name)
{
	struct ck_tensor_info key, *t;

	pthread_mutex_lock(&v->lock);
	if (!pf->tinfo_loaded) {
		if (!ck_store_list_tensors(v->store, pf->info.id, &pf->tinfo, &pf->ntinfo) && pf->ntinfo > 1)
			qsort(pf->tinfo, pf->ntinfo, sizeof(*pf->tinfo), tinfo_cmp);
		pf->tinfo_loaded = 1;
	}
	pthread_mutex_unlock(&v->lock);
	if (!pf->ntinfo)
		return NULL;
	key.name = (char *)name;
	t = bsearch(&key, pf->tinfo, pf->ntinfo, sizeof(key), tinfo_cmp);
	return t ? t->layer : NULL;
}

void phys_free(struct phys_file *pf)
{
	if (!pf)
		return;
	ck_tensor_info_free(pf->tinfo, pf->ntinfo);
	packed_free(atomic_load(&pf->packed));
	if (pf->fd >= 0)
		close(pf->fd);
	for (size_t i = 0; i < pf->nranges; i++)
		free(pf->ranges[i].key);
	free(pf->ranges);
	free(pf->ranges_by_key);
	tz_archive_free(&pf->ar);
	pk_doc_free(pf->doc);
	free(pf->st_by_name);
	st_file_free(&pf->st);
	pthread_mutex_destroy(&pf->parse_lock);
	free(pf);   /* pf->info's strings belong to the view's file lists */
}
