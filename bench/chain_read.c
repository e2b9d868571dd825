/* How fast the packed store rebuilds a checkpoint, without FUSE or torch:
 *   bench/chain_read STORE SERIES OLD NEW [RUNS]
 * reads every file of checkpoint OLD (packed, e.g. the end of a delta
 * chain) through ck_packed_pread in 1 MiB pieces, one thread, no chunk
 * cache (every chunk decoded), and every file of NEW (raw, the baseline)
 * with pread; prints the median of RUNS (default 5) of each in MB/s and
 * their ratio, to separate the decoder's cost from the mount's
 * (docs/bench.md, "chain_read"). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckptfs/packstore.h"
#include "ckptfs/store.h"

#define PIECE (1u << 20)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int files_of(struct ck_store *st, const char *series, const char *name, struct ck_file_info **files,
		    size_t *n)
{
	struct ck_ckpt_info *c;
	int rc = ck_store_find_checkpoint(st, series, name, &c);

	if (rc < 0) {
		fprintf(stderr, "chain_read: %s/%s: %s\n", series, name, strerror(-rc));
		return rc;
	}
	rc = ck_store_list_files(st, c->id, files, n);
	ck_ckpt_info_free(c, 1);
	if (rc < 0)
		fprintf(stderr, "chain_read: %s/%s: listing its files: %s\n", series, name, strerror(-rc));
	return rc;
}

/* Bytes of every file of the checkpoint, packed (decoded) or raw. */
static int read_all(struct ck_store *st, const struct ck_file_info *f, size_t n, int packed, uint8_t *buf,
		    uint64_t *bytes)
{
	*bytes = 0;
	for (size_t i = 0; i < n; i++) {
		struct ck_error err = { { 0 } };
		struct ck_packed_file *pf = NULL;
		int fd = -1, rc = 0;

		if (packed)
			rc = ck_packed_open(st, f[i].id, NULL, &pf, &err);
		else if ((fd = open(f[i].src_path, O_RDONLY | O_CLOEXEC)) < 0)
			rc = -errno;
		if (rc < 0) {
			fprintf(stderr, "chain_read: %s: %s\n", f[i].src_path, err.msg[0] ? err.msg : strerror(-rc));
			return rc;
		}
		for (uint64_t off = 0; off < f[i].size;) {
			ssize_t got = pf ? ck_packed_pread(pf, buf, PIECE, off, &err) : pread(fd, buf, PIECE, (off_t)off);

			if (got <= 0) {
				fprintf(stderr, "chain_read: %s at %llu: %s\n", f[i].src_path, (unsigned long long)off,
					got < 0 ? (pf ? err.msg : strerror(errno)) : "short");
				rc = -EIO;
				break;
			}
			off += (uint64_t)got;
			*bytes += (uint64_t)got;
		}
		ck_packed_close(pf);
		if (fd >= 0)
			close(fd);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int timed(struct ck_store *st, const struct ck_file_info *f, size_t n, int packed, int runs, uint8_t *buf,
		 double *mbps)
{
	double *t = calloc((size_t)runs, sizeof(*t));
	uint64_t bytes = 0;

	if (!t)
		return -ENOMEM;
	for (int r = 0; r < runs; r++) {
		double t0 = now();
		int rc = read_all(st, f, n, packed, buf, &bytes);

		if (rc < 0) {
			free(t);
			return rc;
		}
		t[r] = now() - t0;
	}
	qsort(t, (size_t)runs, sizeof(*t), cmp_double);
	*mbps = (double)bytes / 1e6 / t[runs / 2];
	printf("%-6s %8.1f MB in %.4f s (median of %d): %7.1f MB/s\n", packed ? "packed" : "raw",
	       (double)bytes / 1e6, t[runs / 2], runs, *mbps);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	struct ck_file_info *oldf = NULL, *newf = NULL;
	struct ck_error err = { { 0 } };
	size_t nold = 0, nnew = 0;
	struct ck_store *st;
	double packed = 0, raw = 0;
	int runs = argc > 5 ? atoi(argv[5]) : 5, rc;
	uint8_t *buf = malloc(PIECE);

	if (argc < 5 || runs < 1 || !buf) {
		fprintf(stderr, "usage: chain_read STORE SERIES OLD NEW [RUNS]\n");
		return 2;
	}
	rc = ck_store_open(argv[1], 1, &st, &err);
	if (rc < 0) {
		fprintf(stderr, "chain_read: %s\n", err.msg);
		return 1;
	}
	rc = files_of(st, argv[2], argv[3], &oldf, &nold);
	if (rc == 0)
		rc = files_of(st, argv[2], argv[4], &newf, &nnew);
	if (rc == 0)
		rc = timed(st, oldf, nold, 1, runs, buf, &packed);
	if (rc == 0)
		rc = timed(st, newf, nnew, 0, runs, buf, &raw);
	if (rc == 0)
		printf("packed / raw: %.3fx\n", packed / raw);
	ck_file_info_free(oldf, nold);
	ck_file_info_free(newf, nnew);
	ck_store_close(st);
	free(buf);
	return rc == 0 ? 0 : 1;
}
