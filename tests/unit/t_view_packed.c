/* The view over packed file versions (src/view/packed.c), without FUSE:
 * three checkpoints committed into a store (a real safetensors file whose
 * tensors change a little from one to the next, a torch.save file and a
 * json file), compacted with keep_raw 1 by a child process (one process
 * must not open the store's LMDB twice) while a view is open, then read
 * through ck_vfile_map and ck_extent_read:
 *   - the open view, whose composites were built on the raw files that
 *     compaction removed, serves the same bytes at the next open (before
 *     any refresh) and after ck_view_refresh;
 *   - a fresh view serves every file exactly, whatever the order and size
 *     of the reads (forward, backward, across chunk boundaries);
 *   - ck_vfile_pages (the daemon's preload) hands out every page, in
 *     order, with the same bytes, raw or packed, in large or small pieces,
 *     and with a byte flipped in a raw file all but the pages around it;
 *   - a bit flipped in a pack makes reads of the damaged chunk fail with
 *     -EIO: a read gives the original bytes or an error, never others;
 *   - ck_view_files_made lists a checkpoint's files once made, each once. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckptfs/log.h"
#include "ckptfs/packstore.h"
#include "ckptfs/store.h"
#include "ckptfs/view.h"
#include "testutil.h"

#define NCKPT 3

static char tmp[256];
static char store[300];
static const char *const names[] = { "model.safetensors", "model.pt", "config.json" };
#define NFILES (sizeof(names) / sizeof(names[0]))

/* What each checkpoint's files hold: originals[ckpt][file]. */
static uint8_t *originals[NCKPT][NFILES];
static size_t lengths[NCKPT][NFILES];

static int exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* Flips the low bit of a few float32 values spread over the tensor bytes
 * of a safetensors file (past its header): a training step's worth of
 * change, so compaction finds both identical and changed chunks. */
static void perturb(uint8_t *st, size_t len, unsigned seed)
{
	uint64_t hdr;

	memcpy(&hdr, st, 8);
	for (size_t off = 8 + hdr + seed * 4; off + 4 <= len; off += 4096 + seed * 4)
		st[off] ^= 1;
}

static void commit(struct ck_store *st, int k, const char *fixtures)
{
	struct ck_error err = { { 0 } };
	char dir[600], p[1024], name[32];

	snprintf(name, sizeof(name), "step-%d", (k + 1) * 10);
	pathf(dir, sizeof(dir), "%s/staging/run/%s", store, name);
	SETUP(run_command(pathf(p, sizeof(p), "mkdir -p '%s'", dir), NULL) == 0);
	originals[k][0] = read_file(pathf(p, sizeof(p), "%s/safetensors/burn_mnist.safetensors", fixtures),
				    &lengths[k][0]);
	SETUP(originals[k][0]);
	if (k)
		perturb(originals[k][0], lengths[k][0], (unsigned)k);
	originals[k][1] = read_file(pathf(p, sizeof(p), "%s/torch2x/burn_reader_state_dict.pt", fixtures),
				    &lengths[k][1]);
	SETUP(originals[k][1]);
	originals[k][2] = (uint8_t *)strdup(k == 1 ? "{\"step\": 20}\n" : "{\"lr\": 0.001}\n");
	SETUP(originals[k][2]);
	lengths[k][2] = strlen((char *)originals[k][2]);
	for (size_t f = 0; f < NFILES; f++)
		write_bytes(pathf(p, sizeof(p), "%s/%s", dir, names[f]), originals[k][f], lengths[k][f]);
	SETUP(ck_store_commit_staged(st, "run", name, NULL, NULL, NULL, &err) == 0);
}

/* ck_store_compact(keep_raw 1) in a child: its exit status. */
static int compact_in_child(void)
{
	pid_t pid = fork();
	int status;

	SETUP(pid >= 0);
	if (pid == 0) {
		struct ck_compact_opts opts = { .keep_raw = 1 };
		struct ck_compact_stats stats = { 0 };
		struct ck_error err = { { 0 } };
		struct ck_store *st;
		int rc = ck_store_open(store, 0, &st, &err);

		if (!rc) {
			rc = ck_store_compact(st, &opts, NULL, NULL, &stats, &err);
			ck_store_close(st);
		}
		if (rc)
			fprintf(stderr, "compaction: %s\n", err.msg);
		else
			printf("compacted %llu files, %llu bytes into %llu\n", (unsigned long long)stats.files,
			       (unsigned long long)stats.logical_bytes, (unsigned long long)stats.stored_bytes);
		fflush(stdout);
		_exit(rc ? 1 : 0);
	}
	SETUP(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

/* Reads [off, off + len) of an open file through the extents: 0, or the
 * first error. */
static int read_range(struct ck_vfile *f, uint64_t off, uint64_t len, uint8_t *out, int *packed)
{
	struct ck_extent ext[8];

	while (len) {
		int n = ck_vfile_map(f, off, len, ext, 8);

		if (n <= 0)
			return n < 0 ? n : -EIO;
		for (int i = 0; i < n; i++) {
			int rc = ck_extent_read(&ext[i], out);

			if (rc)
				return rc;
			if (ext[i].packed && packed)
				*packed = 1;
			out += ext[i].len;
			off += ext[i].len;
			len -= ext[i].len;
		}
	}
	return 0;
}

/* Opens run/step-N/name in v: the file, or NULL with *rc. */
static struct ck_vfile *open_file(struct ck_view *v, int k, size_t f, int *rc)
{
	const struct ck_vnode *n;
	struct ck_vfile *vf = NULL;
	char path[128];

	snprintf(path, sizeof(path), "run/step-%d/%s", (k + 1) * 10, names[f]);
	*rc = ck_view_resolve(v, path, &n);
	if (!*rc)
		*rc = ck_view_open_file(v, n, &vf);
	return *rc ? NULL : vf;
}

/* What ck_vfile_pages handed out: into out, checking that pieces come in
 * order, on pages, whole pages but at the end. */
struct pages_seen {
	uint8_t *out;
	uint64_t size, next;
	size_t page;
	int bad;                /* a piece off its page or out of order */
	uint8_t *got;           /* per page: handed out */
};

static int take_pages(void *ctx, uint64_t off, const void *bytes, size_t len)
{
	struct pages_seen *s = ctx;

	if (off % s->page || off < s->next || off + len > s->size ||
	    (len % s->page && off + len != s->size) || !len)
		s->bad = 1;
	if (!s->bad) {
		memcpy(s->out + off, bytes, len);
		for (uint64_t p = off / s->page; p < (off + len + s->page - 1) / s->page; p++)
			s->got[p] = 1;
	}
	s->next = off + len;
	return 0;
}

/* Reads the whole file the way the daemon's preload does (ck_vfile_pages
 * with cap-byte pieces): 0 when every page came, in order and on pages;
 * -EIO otherwise, or ck_vfile_pages' error. */
static int read_pieces(struct ck_vfile *f, uint64_t len, size_t cap, uint8_t *out)
{
	struct pages_seen s = { out, len, 0, 4096, 0, calloc(len / 4096 + 1, 1) };
	uint8_t *buf = malloc(cap);
	uint64_t done = 0;
	int rc;

	SETUP(s.got && buf);
	rc = ck_vfile_pages(f, UINT64_MAX, 4096, buf, cap, NULL, take_pages, &s, &done);
	if (!rc && (s.bad || done != len || memchr(s.got, 0, (len + 4095) / 4096)))
		rc = -EIO;
	free(buf);
	free(s.got);
	return rc;
}

/* Reads the whole file in pieces of step bytes (backwards when reverse;
 * by read_pieces with pieces of at most -step bytes, a multiple of 4096,
 * when step is negative) and compares it with the original: 0, 1 for
 * other bytes, or -errno. */
static int check_file(struct ck_view *v, int k, size_t f, long step, int reverse, int *packed)
{
	size_t len = lengths[k][f], pieces, i;
	struct ck_vfile *vf;
	uint8_t *got;
	int rc;

	vf = open_file(v, k, f, &rc);
	if (!vf)
		return rc;
	if (ck_vfile_size(vf) != len) {
		ck_vfile_put(vf);
		return 1;
	}
	got = malloc(len ? len : 1);
	SETUP(got);
	if (step < 0) {
		rc = read_pieces(vf, len, (size_t)-step, got);
		goto compare;
	}
	pieces = (len + (size_t)step - 1) / (size_t)step;
	for (i = 0, rc = 0; i < pieces && !rc; i++) {
		size_t p = reverse ? pieces - 1 - i : i;
		uint64_t off = (uint64_t)p * (size_t)step;

		rc = read_range(vf, off, len - off < (size_t)step ? len - off : (size_t)step, got + off, packed);
	}
compare:
	if (!rc && memcmp(got, originals[k][f], len))
		rc = 1;
	free(got);
	ck_vfile_put(vf);
	return rc;
}

static void check_all(struct ck_view *v, const char *what, long step, int reverse, int want_packed)
{
	for (int k = 0; k < NCKPT; k++) {
		for (size_t f = 0; f < NFILES; f++) {
			int packed = 0;
			int rc = check_file(v, k, f, step, reverse, &packed);

			CHECK(rc == 0, "%s: step-%d/%s read in %ld-byte pieces%s: %s", what, (k + 1) * 10,
			      names[f], step, reverse ? " backwards" : "",
			      rc > 0 ? "other bytes" : strerror(-rc));
			/* keep_raw 1: the newest checkpoint stays raw, the others come from packs. */
			if (want_packed && !rc && step > 0)
				CHECK(packed == (k < NCKPT - 1), "%s: step-%d/%s %s from a pack", what,
				      (k + 1) * 10, names[f], packed ? "served" : "not served");
		}
	}
}

static void test_compact_under_open_view(const char *fixtures)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	struct ck_view *v;
	char p[1024];
	uint64_t changed[8];
	size_t nchanged;

	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	for (int k = 0; k < NCKPT; k++)
		commit(st, k, fixtures);
	ck_store_close(st);

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	CHECK(ck_view_generation(v) == NCKPT, "generation %llu for %d checkpoints",
	      (unsigned long long)ck_view_generation(v), NCKPT);
	check_all(v, "raw", 1 << 20, 0, 0);
	check_all(v, "raw, preload pieces", -(1 << 20), 0, 0);
	check_all(v, "raw, small preload pieces", -8192, 0, 0);
	SETUP(compact_in_child() == 0);
	CHECK(!exists(pathf(p, sizeof(p), "%s/data/run/step-10/model.pt", store)),
	      "keep_raw 1 left the raw files of step-10");
	CHECK(exists(pathf(p, sizeof(p), "%s/data/run/step-30/model.pt", store)),
	      "the newest checkpoint lost its raw files");
	/* The raw files are gone under the open view, which was not told. */
	check_all(v, "open view, not refreshed", 1 << 20, 0, 0);
	CHECK(ck_view_refresh(v, changed, 8, &nchanged) == 0, "refresh after compaction");
	check_all(v, "open view, refreshed", 65536, 0, 1);
	CHECK(ck_view_generation(v) == NCKPT, "a refresh with nothing new changed the generation");
	ck_view_close(v);

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	check_all(v, "fresh view", 1 << 20, 0, 1);
	check_all(v, "fresh view", 4093, 1, 1);
	check_all(v, "fresh view, preload pieces", -(1 << 20), 0, 1);
	check_all(v, "fresh view, small preload pieces", -8192, 0, 1);
	ck_view_close(v);
}

/* ck_view_files_made: the files made so far under a node, none made by
 * asking (the daemon lets go of a hidden checkpoint's backing files). */
static void test_files_made(void)
{
	struct ck_error err = { { 0 } };
	const struct ck_vnode *dir, *file;
	struct ck_vattr a;
	struct ck_view *v;
	uint64_t *inos;
	size_t n, found = 0;

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	SETUP(ck_view_resolve(v, "run/step-20", &dir) == 0);
	CHECK(ck_view_files_made(v, dir, &inos, &n) == 0, "files made under step-20");
	free(inos);
	SETUP(ck_view_resolve(v, "run/step-20/model.pt", &file) == 0 && ck_view_getattr(v, file, &a) == 0);
	CHECK(ck_view_files_made(v, dir, &inos, &n) == 0 && n == NFILES, "%zu files made under step-20, want %zu",
	      n, NFILES);
	for (size_t i = 0; i < n; i++) {
		const struct ck_vnode *m = ck_view_node(v, inos[i]);
		struct ck_vattr ma;

		CHECK(m && ck_view_getattr(v, m, &ma) == 0 && S_ISREG(ma.mode), "inode %llu is not a file",
		      (unsigned long long)inos[i]);
		found += inos[i] == a.ino;
	}
	CHECK(found == 1, "model.pt's inode listed %zu times", found);
	free(inos);
	CHECK(ck_view_files_made(v, file, &inos, &n) == 0 && n == 1 && inos[0] == a.ino,
	      "a file node lists itself alone");
	free(inos);
	ck_view_close(v);
}

/* The biggest file under STORE/packs, or "" */
static void biggest_pack(char *out, size_t size)
{
	char cmd[700];
	char *line;

	line = run_output(pathf(cmd, sizeof(cmd), "ls -S '%s'/packs/* 2>/dev/null | head -n 1", store));
	out[0] = 0;
	if (line) {
		line[strcspn(line, "\n")] = 0;
		snprintf(out, size, "%s", line);
	}
	free(line);
}

static void test_damaged_pack(void)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	char pack[1024];
	int eio = 0, wrong = 0;
	uint8_t *data;
	size_t len;

	biggest_pack(pack, sizeof(pack));
	SETUP(pack[0]);
	data = read_file(pack, &len);
	SETUP(data && len > 64);
	data[len / 2] ^= 0x20;
	write_bytes(pack, data, len);
	free(data);

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	for (int k = 0; k < NCKPT; k++) {
		for (size_t f = 0; f < NFILES; f++) {
			int rc = check_file(v, k, f, 1 << 20, 0, NULL);

			if (rc == -EIO)
				eio++;
			else if (rc)
				wrong++;
		}
	}
	CHECK(wrong == 0, "%d files gave other bytes or errors than EIO from a damaged pack", wrong);
	CHECK(eio > 0, "a bit flipped in %s went unnoticed", pack);
	ck_view_close(v);
}

/* A byte flipped in the newest checkpoint's raw safetensors file (size and
 * mtime kept): ck_vfile_pages hands out every page but those around the
 * flipped tensor, each equal to the original, and never the flipped one. */
static void test_damaged_raw(void)
{
	struct ck_error err = { { 0 } };
	struct pages_seen seen = { 0 };
	const int k = NCKPT - 1, f = 0;
	size_t len = lengths[k][f], pages = (len + 4095) / 4096, missing = 0, at;
	struct timespec times[2];
	struct ck_vfile *vf;
	struct ck_view *v;
	struct stat sb;
	uint64_t hdr, done;
	uint8_t *buf, *data;
	char raw[700];
	int rc;

	pathf(raw, sizeof(raw), "%s/data/run/step-%d/%s", store, (k + 1) * 10, names[f]);
	SETUP(stat(raw, &sb) == 0);
	data = read_file(raw, &len);
	SETUP(data && len == lengths[k][f]);
	memcpy(&hdr, data, 8);
	at = 8 + hdr + (len - 8 - hdr) / 2;
	data[at] ^= 0x5a;
	write_bytes(raw, data, len);
	free(data);
	times[0] = sb.st_atim;
	times[1] = sb.st_mtim;
	SETUP(utimensat(AT_FDCWD, raw, times, 0) == 0);

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	vf = open_file(v, k, f, &rc);
	SETUP(vf);
	seen.out = calloc(len, 1);
	seen.got = calloc(pages, 1);
	seen.size = len;
	seen.page = 4096;
	/* 4 MiB pieces: the flipped 1.5 MB tensor lies whole in one, so it is
	 * hashed from the bytes that would be handed out. */
	buf = malloc(4 << 20);
	SETUP(seen.out && seen.got && buf);
	rc = ck_vfile_pages(vf, UINT64_MAX, 4096, buf, 4 << 20, NULL, take_pages, &seen, &done);
	CHECK(rc == 0 && !seen.bad, "damaged raw file: ck_vfile_pages: %s%s", strerror(-rc),
	      seen.bad ? ", pieces out of order or off their pages" : "");
	CHECK(!seen.got[at / 4096], "the page holding the flipped byte was handed out");
	for (size_t p = 0; p < pages; p++) {
		size_t n = p == pages - 1 ? len - p * 4096 : 4096;

		if (!seen.got[p])
			missing++;
		else
			CHECK(memcmp(seen.out + p * 4096, originals[k][f] + p * 4096, n) == 0,
			      "damaged raw file: page %zu handed out with other bytes", p);
	}
	/* The fixture's largest tensor is 1.5 MB: its pages, and no more, stay out. */
	CHECK(missing > 0 && missing <= (2u << 20) / 4096, "damaged raw file: %zu of %zu pages left out",
	      missing, pages);
	free(buf);
	free(seen.out);
	free(seen.got);
	ck_vfile_put(vf);
	ck_view_close(v);
}

int main(void)
{
	const char *fixtures = test_fixtures();
	static char fx[512];
	struct ck_error err = { { 0 } };
	char cmd[600];

	if (!fixtures || access(pathf(fx, sizeof(fx), "%s/safetensors/burn_mnist.safetensors", fixtures), R_OK)) {
		printf("SKIP: no fixture %s\n", fixtures ? fx : "(CKPT_FIXTURES unset)");
		return 77;
	}
	ck_log_init("t_view_packed", 0, CK_LOG_WARN);
	pathf(tmp, sizeof(tmp), "%s/t_view_packed.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(ck_store_init(store, &err) == 0);
	test_compact_under_open_view(fixtures);
	test_files_made();
	test_damaged_pack();
	test_damaged_raw();
	for (int k = 0; k < NCKPT; k++)
		for (size_t f = 0; f < NFILES; f++)
			free(originals[k][f]);
	run_command(pathf(cmd, sizeof(cmd), "rm -rf '%s'", tmp), NULL);
	return test_result();
}
