/* Test tool: the control directory of a store without a mount.
 *   ctl_tool [-s SHARD_BYTES] STORE ls PATH      names under .ckptfs/PATH, one per line
 *                                                ("NAME/" for directories)
 *   ctl_tool [-s SHARD_BYTES] STORE cat PATH     the file's bytes on stdout, read
 *                                                through the extents in odd-sized pieces
 *   ctl_tool [-s SHARD_BYTES] STORE stat PATH    "dir" or "file SIZE"
 *   ctl_tool [-s SHARD_BYTES] STORE xattr PATH NAME
 *   ctl_tool [-s SHARD_BYTES] STORE copy PATH DIR  every file under PATH into DIR
 *   ctl_tool STORE catalog SERIES/CKPT [weights]
 *                                                "weights N moments N states N optimizer
 *                                                yes|no" of the checkpoint's catalog, built
 *                                                whole or (weights) as weights/ builds it
 * Exit status 0, or 1 with the error on stderr. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/catalog.h"
#include "ckptfs/ctldir.h"
#include "ckptfs/log.h"

static int print_catalog(struct ck_view *v, const char *ref, const char *kind)
{
	const struct ck_vnode *n;
	struct ck_catalog *cat;
	int rc = ck_view_resolve(v, ref, &n);

	if (!rc)
		rc = ck_catalog_build(v, n, kind && !strcmp(kind, "weights") ? CK_CAT_WEIGHTS : 0, &cat);
	if (rc)
		return rc;
	printf("weights %zu moments %zu states %zu optimizer %s\n", cat->nweights, cat->nmoments, cat->nstates,
	       cat->optim_file ? "yes" : "no");
	ck_catalog_free(cat);
	return 0;
}

static int read_all(struct ck_vfile *f, FILE *out)
{
	static uint8_t buf[3 << 20];
	uint64_t size = ck_vfile_size(f), off = 0;
	/* Reads that do not line up with anything: headers, tensors, chunks. */
	static const uint64_t sizes[] = { 4097, 1 << 20, 65536 + 13, 3 << 20 };
	size_t k = 0;

	while (off < size) {
		struct ck_extent ext[64];
		uint64_t want = sizes[k++ % 4], got = 0;
		int n = ck_vfile_map(f, off, want, ext, 64);

		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			int rc = ck_extent_read(&ext[i], buf + got);

			if (rc)
				return rc;
			got += ext[i].len;
		}
		if (!got)
			return -EIO;
		if (fwrite(buf, 1, got, out) != got)
			return -EIO;
		off += got;
	}
	return 0;
}

static int copy_tree(struct ck_ctl *c, uint64_t ino, const char *dir)
{
	struct ck_ctl_dirent *d;
	size_t n;
	int rc = ck_ctl_readdir(c, ino, &d, &n);

	if (rc)
		return rc;
	mkdir(dir, 0755);
	for (size_t i = 0; i < n && !rc; i++) {
		char path[4096];

		snprintf(path, sizeof(path), "%s/%s", dir, d[i].name);
		if (d[i].is_dir) {
			rc = copy_tree(c, d[i].ino, path);
		} else {
			struct ck_vfile *f;
			FILE *out;

			rc = ck_ctl_open_file(c, d[i].ino, &f);
			if (rc)
				break;
			out = fopen(path, "wb");
			rc = out ? read_all(f, out) : -errno;
			if (out && fclose(out) && !rc)
				rc = -errno;
			ck_vfile_put(f);
		}
	}
	ck_ctl_dirents_free(d, n);
	return rc;
}

int main(int argc, char **argv)
{
	struct ck_ctl_opts opts = { 0 };
	struct ck_error err = { "" };
	struct ck_view *v;
	struct ck_ctl *c;
	struct ck_vattr a;
	uint64_t ino;
	int rc, at = 1;

	ck_log_init("ctl_tool", 0, CK_LOG_WARN);
	if (argc > 2 && !strcmp(argv[1], "-s")) {
		opts.shard_bytes = strtoull(argv[2], NULL, 10);
		at = 3;
	}
	if (argc - at < 3) {
		fprintf(stderr, "usage: ctl_tool [-s SHARD_BYTES] STORE ls|cat|stat|xattr|copy|catalog PATH [ARG]\n");
		return 2;
	}
	rc = ck_view_open(argv[at], NULL, &v, &err);
	if (rc) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	rc = ck_ctl_open(v, argv[at], &opts, &c);
	if (!rc && strcmp(argv[at + 1], "catalog"))
		rc = ck_ctl_resolve(c, argv[at + 2], &ino);
	if (!rc && !strcmp(argv[at + 1], "catalog")) {
		rc = print_catalog(v, argv[at + 2], argc - at > 3 ? argv[at + 3] : NULL);
	} else if (!rc && !strcmp(argv[at + 1], "ls")) {
		struct ck_ctl_dirent *d;
		size_t n;

		rc = ck_ctl_readdir(c, ino, &d, &n);
		for (size_t i = 0; !rc && i < n; i++)
			printf("%s%s\n", d[i].name, d[i].is_dir ? "/" : "");
		if (!rc)
			ck_ctl_dirents_free(d, n);
	} else if (!rc && !strcmp(argv[at + 1], "stat")) {
		rc = ck_ctl_getattr(c, ino, &a);
		if (!rc && S_ISDIR(a.mode))
			printf("dir\n");
		else if (!rc)
			printf("file %llu\n", (unsigned long long)a.size);
	} else if (!rc && !strcmp(argv[at + 1], "cat")) {
		struct ck_vfile *f;

		rc = ck_ctl_open_file(c, ino, &f);
		if (!rc) {
			rc = ck_ctl_getattr(c, ino, &a);
			if (!rc && a.size != ck_vfile_size(f)) {
				fprintf(stderr, "stat says %llu bytes, the file has %llu\n", (unsigned long long)a.size,
					(unsigned long long)ck_vfile_size(f));
				rc = -EIO;
			}
			if (!rc)
				rc = read_all(f, stdout);
			ck_vfile_put(f);
		}
	} else if (!rc && !strcmp(argv[at + 1], "xattr") && argc - at > 3) {
		struct ck_buf b = CK_BUF_INIT;

		rc = ck_ctl_getxattr(c, ino, argv[at + 3], &b);
		if (!rc)
			fwrite(b.data, 1, b.len, stdout);
		ck_buf_free(&b);
	} else if (!rc && !strcmp(argv[at + 1], "copy") && argc - at > 3) {
		rc = copy_tree(c, ino, argv[at + 3]);
	} else if (!rc) {
		fprintf(stderr, "unknown command %s\n", argv[at + 1]);
		rc = -EINVAL;
	}
	if (rc)
		fprintf(stderr, "ctl_tool: %s %s: %s\n", argv[at + 1], argv[at + 2], strerror(-rc));
	ck_ctl_close(c);
	ck_view_close(v);
	return rc ? 1 : 0;
}
