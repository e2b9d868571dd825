/* The store at scale (docs/bench.md, "scale"; docs/design.md, "One store,
 * many nodes").
 *
 *   scale make STORE NCKPT NTENSORS
 *       A synthetic store: series "run", NCKPT checkpoints (checkpoint-1 ..)
 *       of one safetensors file each, sparse (no data blocks), with
 *       NTENSORS tensors of 4 KiB; their manifests are written by the
 *       store's own writer, as a commit writes them, and nothing else (no
 *       index: `ckptctl reindex`, or a node's first open, builds it).
 *   scale refresh STORE NTENSORS ADD...
 *       Opens the store and a view of it, as a mount does (timed: open to
 *       listed, and the process's peak RSS), then times what a refresh
 *       costs: ck_view_refresh when nothing changed (the median of 200),
 *       and after each ADD more checkpoints of NTENSORS tensors were
 *       committed by another node (manifest and journal entry each, as a
 *       commit there writes them), with the bytes of the store's files
 *       that refresh had to read (entries, tags, manifests).
 * With CKPT_TEST_SHARED_FS=1 the store counts as on a shared filesystem:
 * the index is node-local and follows the journal, as on every node of a
 * cluster. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/clock.h"
#include "ckptfs/fileio.h"
#include "ckptfs/store.h"
#include "ckptfs/view.h"
#include "store/index.h"
#include "store/journal.h"
#include "store/manifest.h"

#define TENSOR_BYTES 4096

static int mkdirs(const char *path)
{
	char *p = strdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		mkdir(p, 0755);
		*s = '/';
	}
	mkdir(p, 0755);
	free(p);
	return 0;
}

/* One checkpoint: its sparse file and its manifest. */
static int make_checkpoint(const char *store, int step, int ntensors, struct ck_manifest_txn *tx,
			   struct ck_error *err)
{
	char dir[4096], file[4200], name[64];
	struct ck_ingest f = { 0 };
	struct ck_manifest m = { 0 };
	struct stat sb;
	int fd, rc;

	snprintf(name, sizeof(name), "checkpoint-%d", step);
	snprintf(dir, sizeof(dir), "%s/data/run/%s", store, name);
	snprintf(file, sizeof(file), "%s/model.safetensors", dir);
	mkdirs(dir);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)ntensors * TENSOR_BYTES + 8) < 0 || fstat(fd, &sb) < 0)
		return ck_fail(err, errno, "%s: %s", file, strerror(errno));
	close(fd);
	f.info.relpath = "model.safetensors";
	f.info.kind = CK_FILE_SAFETENSORS;
	f.info.src_path = file;
	ck_file_identity_set(&f.info, &sb, 0);
	f.info.ntensors = (uint32_t)ntensors;
	f.st = calloc((size_t)ntensors, sizeof(*f.st));
	f.t = calloc((size_t)ntensors, sizeof(*f.t));
	if (!f.st || !f.t)
		return ck_fail(err, ENOMEM, "out of memory");
	for (int i = 0; i < ntensors; i++) {
		char tname[64];

		snprintf(tname, sizeof(tname), "model.layers.%d.mlp.w%d.weight", i / 8, i % 8);
		f.st[i].key = strdup(tname);
		f.st[i].offset = 8 + (uint64_t)i * TENSOR_BYTES;
		f.st[i].length = TENSOR_BYTES;
		f.st[i].hash_lo = (uint64_t)step * 1000003u + (uint64_t)i;
		f.st[i].hash_hi = (uint64_t)i * 7919u;
		f.t[i].name = strdup(tname);
		f.t[i].layer = malloc(32);
		snprintf(f.t[i].layer, 32, "layers.%d", i / 8);
		f.t[i].dtype = CK_DT_F32;
		f.t[i].ndim = 1;
		f.t[i].shape[0] = TENSOR_BYTES / 4;
		f.t[i].storage_key = strdup(tname);
	}
	f.nst = f.nt = (size_t)ntensors;
	m.ckpt.series = "run";
	m.ckpt.name = name;
	m.ckpt.step = step;
	m.ckpt.src_path = dir;
	m.imported_ns = ck_now_ns();
	m.series_created_ns = 1;
	m.files = &f;
	m.nfiles = 1;
	rc = ck_manifest_store(store, &m, tx, err);
	if (rc == 0)
		ck_manifest_store_commit(tx);
	for (int i = 0; i < ntensors; i++) {
		free(f.st[i].key);
		free(f.t[i].name);
		free(f.t[i].layer);
		free(f.t[i].storage_key);
	}
	free(f.st);
	free(f.t);
	return rc;
}

static int cmd_make(const char *store, int n, int ntensors)
{
	struct ck_error err = { { 0 } };
	struct ck_manifest_txn tx;
	double t0 = ck_monotonic_s();
	char *real;

	if (ck_store_init(store, &err) < 0 && !strstr(err.msg, "already")) {
		fprintf(stderr, "scale: %s\n", err.msg);
		return 1;
	}
	real = realpath(store, NULL);
	for (int i = 1; i <= n; i++) {
		if (make_checkpoint(real, i, ntensors, &tx, &err) < 0) {
			fprintf(stderr, "scale: %s\n", err.msg);
			return 1;
		}
	}
	printf("made %d checkpoints x %d tensors in %.1f s\n", n, ntensors, ck_monotonic_s() - t0);
	free(real);
	return 0;
}

static long rss_kib(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double refresh_once(struct ck_view *v)
{
	uint64_t changed[64];
	size_t n;
	double t0 = ck_monotonic_s();

	if (ck_view_refresh(v, changed, 64, &n) < 0)
		fprintf(stderr, "scale: refresh failed\n");
	return ck_monotonic_s() - t0;
}

static uint64_t file_bytes(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int cmd_refresh(const char *store, int ntensors, int nadd, char **adds)
{
	struct ck_view_opts opts = { .verify = CK_VERIFY_FIRST };
	struct ck_error err = { { 0 } };
	const struct ck_vnode *run;
	struct ck_view *v;
	struct ck_store *st;
	double t0 = ck_monotonic_s(), samples[200];
	const char *fs = NULL;
	size_t nkids = 0;
	int step = 0, shared;
	char *real = realpath(store, NULL), writer_base[4200];

	/* This process is the reading node; its index beside the store. */
	snprintf(writer_base, sizeof(writer_base), "%s.reader-index", real ? real : store);
	ck_store_set_index_base(writer_base);
	if (!real || ck_view_open(store, &opts, &v, &err) < 0) {
		fprintf(stderr, "scale: %s\n", err.msg);
		return 1;
	}
	/* The first open on a node builds its index from the manifests (on a
	 * shared filesystem); the open timed below is a mount's. */
	ck_view_close(v);
	printf("first open: %.3f s\n", ck_monotonic_s() - t0);
	t0 = ck_monotonic_s();
	if (ck_view_open(store, &opts, &v, &err) < 0) {
		fprintf(stderr, "scale: %s\n", err.msg);
		return 1;
	}
	if (ck_view_resolve(v, "run", &run) == 0) {
		const struct ck_vnode **kids;
		uint64_t ch;

		if (ck_view_children(v, run, &kids, &nkids, &ch) == 0)
			free(kids);
	}
	printf("open to listed: %.3f s (%zu checkpoints), peak RSS %.1f MiB\n", ck_monotonic_s() - t0, nkids,
	       rss_kib() / 1024.0);
	for (int i = 0; i < 200; i++)
		samples[i] = refresh_once(v);
	qsort(samples, 200, sizeof(*samples), cmp_double);
	printf("refresh, nothing changed: median %.0f us, 90th percentile %.0f us\n", samples[100] * 1e6,
	       samples[180] * 1e6);

	/* Another node commits: its own index (on a shared store), the store's
	 * files and journal in common. */
	snprintf(writer_base, sizeof(writer_base), "%s.writer-index", real);
	ck_store_set_index_base(writer_base);
	if (ck_store_open(store, 0, &st, &err) < 0) {
		fprintf(stderr, "scale: %s\n", err.msg);
		return 1;
	}
	shared = ck_store_is_shared(st, &fs, NULL);
	{
		struct ck_ckpt_info *c = NULL;
		size_t n = 0;

		ck_store_list_checkpoints(st, "run", &c, &n);
		step = n ? (int)c[n - 1].step : 0;
		ck_ckpt_info_free(c, n);
	}
	for (int a = 0; a < nadd; a++) {
		int k = atoi(adds[a]);
		uint64_t bytes = 0, seq = 0;
		struct ck_manifest_txn tx;
		char name[64], *mpath;
		double t;

		for (int i = 0; i < k; i++) {
			step++;
			snprintf(name, sizeof(name), "checkpoint-%d", step);
			if (make_checkpoint(real, step, ntensors, &tx, &err) < 0 ||
			    ck_journal_note_ckpt(st, "run", name, NULL, &seq, &err) < 0) {
				fprintf(stderr, "scale: %s\n", err.msg);
				return 1;
			}
			mpath = ck_manifest_path(real, "run", name);
			bytes += file_bytes(mpath) + 3 * 64;
			free(mpath);
			snprintf(writer_base, sizeof(writer_base), "%s/%s/%016" PRIu64, real, CK_JOURNAL_DIR, seq);
			bytes += file_bytes(writer_base);
		}
		t = refresh_once(v);
		nkids = 0;
		if (ck_view_resolve(v, "run", &run) == 0) {
			const struct ck_vnode **kids;
			uint64_t ch;

			if (ck_view_children(v, run, &kids, &nkids, &ch) == 0)
				free(kids);
		}
		printf("refresh after %d new checkpoint%s: %.1f ms, %.2f MB read from the store (%s), %zu listed\n", k,
		       k == 1 ? "" : "s", t * 1e3, bytes / 1e6, shared ? "node-local index" : "STORE/index", nkids);
	}
	printf("filesystem: %s; peak RSS %.1f MiB\n", fs, rss_kib() / 1024.0);
	ck_store_close(st);
	ck_view_close(v);
	free(real);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "make"))
		return cmd_make(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc >= 4 && !strcmp(argv[1], "refresh"))
		return cmd_refresh(argv[2], atoi(argv[3]), argc - 4, argv + 4);
	fprintf(stderr, "usage: scale make STORE NCKPT NTENSORS | scale refresh STORE NTENSORS ADD...\n");
	return 64;
}
