/* ckptctl verify, first pass: is every file in scope still what import
 * indexed?  Identity (dev, ino, size, mtime) always; in content mode also
 * the XXH3-128 of every storage (torch) / tensor (safetensors) byte range,
 * read in 4 MiB pieces in file order, compared with the hash import
 * recorded.  Content damage with the identity intact (a bit flip, a write
 * that restored the mtime) is exactly what the mount would only find on the
 * first read of the tensor, as EIO. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "ckptfs/clock.h"
#include "ckptfs/packstore.h"
#include "verify.h"

#define READ_CHUNK (4u << 20)

struct scan_file {
	struct ck_store *st;
	struct vfy_report *r;
	const struct ck_ckpt_info *c;
	const struct ck_file_info *f;
	struct ck_tensor_info *t;   /* loaded on the first damage */
	size_t nt;
	int tensors_loaded;
	uint8_t *buf;
	double last_progress;
};

/* At most a few lines a second, overwritten in place (stderr is a TTY). */
static void progress(struct scan_file *sf)
{
	double t;

	if (!sf->r->progress)
		return;
	t = ck_monotonic_s();
	if (t - sf->last_progress < 0.25)
		return;
	sf->last_progress = t;
	fprintf(stderr, "\rverify: %.1f of %.1f MiB hashed (%3.0f%%) %s/%s\033[K",
		(double)sf->r->bytes_hashed / (1 << 20), (double)sf->r->bytes_total / (1 << 20),
		sf->r->bytes_total ? 100.0 * (double)sf->r->bytes_hashed / (double)sf->r->bytes_total : 100.0,
		sf->c->name, sf->f->relpath);
	fflush(stderr);
}

static int load_tensors(struct scan_file *sf)
{
	int rc;

	if (sf->tensors_loaded)
		return 0;
	rc = ck_store_list_tensors(sf->st, sf->f->id, &sf->t, &sf->nt);
	if (rc < 0)
		return rc;
	sf->tensors_loaded = 1;
	return 0;
}

/* Appends a damage of the current file: a whole file (s == NULL) or one
 * storage, with the names of the tensors that use it. */
static int add_damage(struct scan_file *sf, const struct ck_storage_info *s, enum vfy_reason reason,
		      const char *detail)
{
	struct vfy_report *r = sf->r;
	struct vfy_damage *d;
	int rc = 0;

	d = realloc(r->dmg, (r->ndmg + 1) * sizeof(*d));
	if (!d)
		return -ENOMEM;
	r->dmg = d;
	d = &r->dmg[r->ndmg];
	memset(d, 0, sizeof(*d));
	r->ndmg++;   /* counted at once so that vfy_report_free frees a partial entry */
	d->series = strdup(sf->c->series);
	d->ckpt = strdup(sf->c->name);
	d->relpath = strdup(sf->f->relpath);
	d->src_path = strdup(sf->f->src_path);
	d->detail = detail ? strdup(detail) : NULL;
	d->step = sf->c->step;
	d->reason = reason;
	d->file_tensors = sf->f->ntensors;
	if (!d->series || !d->ckpt || !d->relpath || !d->src_path || (detail && !d->detail))
		return -ENOMEM;
	if (!s) {
		d->length = sf->f->size;
		return 0;
	}
	d->storage = strdup(s->key);
	if (!d->storage)
		return -ENOMEM;
	d->offset = s->offset;
	d->length = s->length;
	rc = load_tensors(sf);
	for (size_t i = 0; i < sf->nt && rc == 0; i++) {
		char **v;

		if (strcmp(sf->t[i].storage_key, s->key) != 0)
			continue;
		v = realloc(d->tensors, (d->ntensors + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		d->tensors = v;
		v[d->ntensors] = strdup(sf->t[i].name);
		if (!v[d->ntensors])
			return -ENOMEM;
		d->ntensors++;
	}
	return rc;
}

/* Re-hashes one storage.  0 (intact or damage recorded) or -ENOMEM. */
static int check_range(struct scan_file *sf, int fd, const struct ck_storage_info *s)
{
	XXH3_state_t *xs = XXH3_createState();
	XXH128_hash_t h;
	uint64_t done = 0;
	char why[160];
	int rc = 0;

	if (!xs || XXH3_128bits_reset(xs) != XXH_OK) {
		XXH3_freeState(xs);
		return -ENOMEM;
	}
	while (done < s->length) {
		size_t want = s->length - done < READ_CHUNK ? (size_t)(s->length - done) : READ_CHUNK;
		ssize_t got = pread(fd, sf->buf, want, (off_t)(s->offset + done));

		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(why, sizeof(why), "read error at byte %" PRIu64 ": %s", s->offset + done,
				 strerror(errno));
			rc = add_damage(sf, s, VFY_UNREADABLE, why);
			goto out;
		}
		if (got == 0) {
			snprintf(why, sizeof(why), "the file ends at byte %" PRIu64 ", %" PRIu64 " bytes short",
				 s->offset + done, s->length - done);
			rc = add_damage(sf, s, VFY_SHORT_READ, why);
			goto out;
		}
		XXH3_128bits_update(xs, sf->buf, (size_t)got);
		done += (uint64_t)got;
		sf->r->bytes_hashed += (uint64_t)got;
		progress(sf);
	}
	h = XXH3_128bits_digest(xs);
	if (h.low64 != s->hash_lo || h.high64 != s->hash_hi) {
		snprintf(why, sizeof(why), "xxh3-128 %016" PRIx64 "%016" PRIx64 ", recorded %016" PRIx64 "%016" PRIx64,
			 h.high64, h.low64, s->hash_hi, s->hash_lo);
		rc = add_damage(sf, s, VFY_HASH_MISMATCH, why);
	}
out:
	XXH3_freeState(xs);
	return rc;
}

static int cmp_offset(const void *a, const void *b)
{
	const struct ck_storage_info *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Content pass over one file: every storage in file order. */
static int check_content(struct scan_file *sf, int whole_damaged)
{
	struct ck_storage_info *s;
	size_t n;
	int fd, rc;

	rc = ck_store_list_storages(sf->st, sf->f->id, &s, &n);
	if (rc < 0 || n == 0) {
		if (rc == 0)
			ck_storage_info_free(s, n);
		return rc;
	}
	fd = open(sf->f->src_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char why[160];

		snprintf(why, sizeof(why), "cannot open: %s", strerror(errno));
		ck_storage_info_free(s, n);
		return whole_damaged ? 0 : add_damage(sf, NULL, VFY_UNREADABLE, why);
	}
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	qsort(s, n, sizeof(*s), cmp_offset);
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = check_range(sf, fd, &s[i]);
	close(fd);
	ck_storage_info_free(s, n);
	return rc;
}

static int add_bad(struct vfy_report *r, const struct ck_ckpt_info *c, const struct ck_file_info *f)
{
	struct vfy_bad *b = realloc(r->bad, (r->nbad + 1) * sizeof(*b));

	if (!b)
		return -ENOMEM;
	r->bad = b;
	b = &r->bad[r->nbad++];
	b->series = strdup(c->series);
	b->ckpt = strdup(c->name);
	b->relpath = strdup(f->relpath);
	b->src_path = strdup(f->src_path);
	b->error = strdup(f->error ? f->error : "refused at import");
	if (!b->series || !b->ckpt || !b->relpath || !b->src_path || !b->error)
		return -ENOMEM;
	return 0;
}

/* A packed file is served from its chunks, not its raw file (which may be
 * gone): each chunk that does not decode to its hash damages the storage
 * holding it, or the file when it holds no tensor data. */
static int check_packed(struct scan_file *sf)
{
	struct ck_error err = { { 0 } };
	struct ck_storage_info *s = NULL;
	size_t ns = 0, before = sf->r->ndmg;
	int rc;

	if (!sf->r->content) {
		sf->r->files_ok++;   /* the raw file's identity no longer matters */
		return 0;
	}
	rc = verify_packs_load(sf->st, sf->r, &err);
	if (rc < 0)
		return rc;
	rc = ck_store_list_storages(sf->st, sf->f->id, &s, &ns);
	for (size_t i = 0; i < sf->r->packs.nbad && rc == 0; i++) {
		const struct vfy_pack_bad *b = &sf->r->packs.bad[i];
		const struct ck_storage_info *hit = NULL;

		if (b->file_id != sf->f->id)
			continue;
		for (size_t k = 0; k < ns && !hit; k++)
			if (b->offset >= s[k].offset && b->offset - s[k].offset < s[k].length)
				hit = &s[k];
		rc = add_damage(sf, hit, hit ? VFY_HASH_MISMATCH : VFY_UNREADABLE, b->why);
	}
	ck_storage_info_free(s, ns);
	sf->r->bytes_hashed += sf->f->size;
	if (rc == 0 && sf->r->ndmg == before)
		sf->r->files_ok++;
	return rc;
}

static int check_file(struct scan_file *sf)
{
	const struct ck_file_info *f = sf->f;
	struct ck_error err = { { 0 } };
	size_t before = sf->r->ndmg;
	struct stat sb;
	int rc = 0, whole = 0;

	if (f->kind == CK_FILE_BAD)
		return add_bad(sf->r, sf->c, f);
	if (!ck_file_kind_has_bytes(f->kind))
		return 0;   /* a link or an empty directory: the index is all of it */
	sf->r->files++;
	if (ck_store_file_packed(sf->st, f->id) == 1)
		return check_packed(sf);
	if (ck_store_file_check(sf->st, (struct ck_file_info *)f, 1, &err) < 0) {
		int gone = stat(f->src_path, &sb) < 0;
		int missing = gone && (errno == ENOENT || errno == ENOTDIR);

		if (missing)
			snprintf(err.msg, sizeof(err.msg), "%s: no longer exists", f->src_path);
		rc = add_damage(sf, NULL, missing ? VFY_MISSING : VFY_CHANGED, err.msg);
		if (gone || !S_ISREG(sb.st_mode))
			return rc;   /* nothing left to read */
		whole = 1;
	}
	/* A changed file is refused whole by the mount; its ranges still tell
	 * which tensors were lost (truncated) or rewritten. */
	if (rc == 0 && sf->r->content)
		rc = check_content(sf, whole);
	if (rc == 0 && sf->r->ndmg == before)
		sf->r->files_ok++;
	return rc;
}

int verify_count(struct ck_store *st, const struct ck_ckpt_info *ckpts, size_t n, struct vfy_report *r)
{
	for (size_t i = 0; i < n; i++) {
		struct ck_file_info *f;
		size_t nf;
		int rc = ck_store_list_files(st, ckpts[i].id, &f, &nf);

		if (rc < 0)
			return rc;
		for (size_t j = 0; j < nf && rc == 0; j++) {
			struct ck_storage_info *s;
			size_t ns;

			if (!ck_file_kind_has_bytes(f[j].kind))
				continue;
			rc = ck_store_list_storages(st, f[j].id, &s, &ns);
			for (size_t k = 0; k < ns && rc == 0; k++)
				r->bytes_total += s[k].length;
			if (rc == 0)
				ck_storage_info_free(s, ns);
		}
		ck_file_info_free(f, nf);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int verify_scan(struct ck_store *st, const struct ck_ckpt_info *ckpts, size_t n, struct vfy_report *r)
{
	struct scan_file sf = { .st = st, .r = r };
	int rc = 0;

	if (r->content) {
		sf.buf = malloc(READ_CHUNK);
		if (!sf.buf)
			return -ENOMEM;
	}
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct ck_file_info *f;
		size_t nf;

		rc = ck_store_list_files(st, ckpts[i].id, &f, &nf);
		if (rc < 0)
			break;
		sf.c = &ckpts[i];
		for (size_t j = 0; j < nf && rc == 0; j++) {
			sf.f = &f[j];
			sf.t = NULL;
			sf.nt = 0;
			sf.tensors_loaded = 0;
			rc = check_file(&sf);
			if (sf.tensors_loaded)
				ck_tensor_info_free(sf.t, sf.nt);
		}
		ck_file_info_free(f, nf);
	}
	free(sf.buf);
	return rc;
}
