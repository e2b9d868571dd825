/* ckptctl rm STORE SERIES/CKPT [--dry-run]: delete a committed checkpoint.
 * It is hidden at once; its files stay as long as a newer composite draws
 * from them, and the files of the series' deleted checkpoints that nothing
 * draws from any more are reclaimed (include/ckptfs/refs.h). */
#include "config.h"

#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/refs.h"
#include "cli.h"

struct rm_args {
	int dry_run;
	int failed;
	struct ck_buf removed;   /* "removed ..." lines, printed after "hidden" */
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct rm_args *a = ctx;

	(void)arg;
	if (c == 'n') {
		a->dry_run = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct rm_args *a = ctx;

	if (status == CK_RECLAIM_REMOVED) {
		if (ck_buf_printf(&a->removed, "%-10s  %s (%s)\n", "removed", path, msg) < 0)
			a->failed = 1;
	} else if (status < 0) {
		a->failed = 1;
		cli_error("%s: %s", path, msg);
	}
}

static void print_refs(const char *series, const struct ck_version_ref *r, size_t n, int dry)
{
	uint64_t kept = 0, freed = 0;
	size_t nkept = 0, nfreed = 0, ndropped = 0;

	for (size_t i = 0; i < n; i++) {
		const char *what;

		if (r[i].used) {
			what = "kept";
			kept += r[i].size;
			nkept++;
		} else if (r[i].owned) {
			what = dry ? "would free" : "freed";
			freed += r[i].size;
			nfreed++;
		} else {
			what = dry ? "would drop" : "dropped";
			ndropped++;
		}
		printf("%-10s  %s/%s%s%s (%" PRIu64 " bytes%s)\n", what, series, r[i].ckpt, r[i].relpath[0] ? "/" : "",
		       r[i].relpath, r[i].size,
		       r[i].used ? ": a newer checkpoint still draws from it" :
		       r[i].owned ? "" : ": imported, left on disk, dropped from the index");
	}
	printf("%zu file%s kept (%" PRIu64 " bytes), %zu %s (%" PRIu64 " bytes), %zu dropped from the index only\n",
	       nkept, nkept == 1 ? "" : "s", kept, nfreed, dry ? "would be freed" : "freed", freed, ndropped);
}

static int rm_failures;

static int remove_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
	(void)sb;
	(void)ftw;
	if (type == FTW_DNR || type == FTW_NS) {
		cli_error("%s: %s", path, strerror(errno ? errno : EACCES));
		rm_failures++;
	} else if (remove(path) < 0) {
		cli_error("%s: %s", path, strerror(errno));
		rm_failures++;
	}
	return 0;
}

/* rm -r of the checkpoint through a writable mount as the user running
 * ckptctl: the mount deletes it at the rmdir of its directory (or the
 * unlink of a single-file checkpoint), if that user may. */
static int rm_through_mount(const char *mnt, const char *series, const char *name)
{
	char *path = malloc(strlen(mnt) + strlen(series) + strlen(name) + 3);

	if (!path) {
		cli_error("out of memory");
		return CK_EXIT_FAILURE;
	}
	sprintf(path, "%s/%s/%s", mnt, series, name);
	rm_failures = 0;
	if (nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS) < 0) {
		cli_error("%s: %s", path, strerror(errno));
		rm_failures++;
	}
	free(path);
	if (rm_failures)
		return CK_EXIT_FAILURE;
	printf("%-10s  %s/%s (by the mount at %s)\n", "deleted", series, name, mnt);
	return CK_EXIT_OK;
}

static const struct option opts[] = {
	{ "dry-run", no_argument, NULL, 'n' },
	{ 0, 0, 0, 0 },
};

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	struct rm_args a = { .removed = CK_BUF_INIT };
	struct ck_delete_opts dopts = { 0 };
	struct ck_error err = { { 0 } };
	struct ck_version_ref *refs = NULL;
	size_t nrefs = 0;
	char *series, *name;
	int rc;

	rc = cli_getopt(cmd, argc, argv, "n", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_usage_error(cmd, "expected STORE SERIES/CKPT");
	series = argv[optind + 1];
	name = strchr(series, '/');
	if (!name || !name[1] || strchr(name + 1, '/'))
		return cli_usage_error(cmd, "'%s' is not SERIES/CKPT", series);
	*name++ = '\0';
	if (cli_is_mount(argv[optind])) {
		if (a.dry_run)
			return cli_usage_error(cmd, "--dry-run needs the STORE, not a mount point");
		return rm_through_mount(argv[optind], series, name);
	}
	dopts.dry_run = a.dry_run;
	rc = ck_delete_checkpoint(argv[optind], series, name, &dopts, on_report, &a, &refs, &nrefs, &err);
	if (rc < 0) {
		ck_buf_free(&a.removed);
		cli_error("rm: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	printf("%-10s  %s/%s\n", a.dry_run ? "would hide" : "hidden", series, name);
	print_refs(series, refs, nrefs, a.dry_run);
	if (a.removed.len)
		fwrite(a.removed.data, 1, a.removed.len, stdout);
	ck_buf_free(&a.removed);
	ck_version_refs_free(refs, nrefs);
	return a.failed ? CK_EXIT_FAILURE : CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_rm = {
	.name = "rm",
	.args = "STORE|MOUNTPOINT SERIES/CKPT [--dry-run]",
	.summary = "delete a committed checkpoint; reclaim what nothing draws from",
	.help = "Deletes checkpoint CKPT of SERIES: it is no longer listed or found by a mount\n"
		"(a running ckptfs follows within its refresh interval), and `ckptctl reindex`\n"
		"keeps it deleted.  Newer checkpoints' composites still draw from its files where\n"
		"a partial save did not replace them: those files stay.  Every file of the\n"
		"series' deleted checkpoints that no composite of a live checkpoint draws a byte\n"
		"(or a key) from any more is dropped from the index, and unlinked when the store\n"
		"owns it (committed through a mount, under STORE/data/); files imported in place\n"
		"stay on disk.  A deleted checkpoint left with no file is removed altogether.\n"
		"Prints what was hidden, kept and freed.  Given the MOUNTPOINT of a writable\n"
		"ckptfs instead of STORE, removes MOUNTPOINT/SERIES/CKPT through it as `rm -r`\n"
		"would, as the user running ckptctl (who needs what rm -r of the directory\n"
		"needs), and the mount deletes the checkpoint.\n"
		"\n"
		"  -n, --dry-run  only print what would be hidden, kept and freed\n",
	.run = run,
};
