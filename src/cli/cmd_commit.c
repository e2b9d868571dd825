/* ckptctl commit STORE SERIES/STAGED [FINAL]: commit a staged checkpoint
 * directory, or see it quarantined; ckptctl recover STORE: finish commits
 * a crash cut short. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "cli.h"

struct commit_args {
	int verbose;
	size_t files, bad;
};

static int on_opt(void *ctx, int c, const char *arg)
{
	struct commit_args *a = ctx;

	(void)arg;
	if (c == 'v') {
		a->verbose = 1;
		return 0;
	}
	return CK_EXIT_USAGE;
}

static void on_report(void *ctx, const char *path, int status, const char *msg)
{
	struct commit_args *a = ctx;

	if (status == CK_COMMIT_QUARANTINED || status == CK_COMMIT_RECOVERED || status == CK_IMPORT_SKIPPED) {
		if (a->verbose || status != CK_IMPORT_SKIPPED)
			printf("%-11s %s\n", status == CK_COMMIT_RECOVERED ? "recovered" :
					     status == CK_IMPORT_SKIPPED ? "skipped" : "quarantined", path);
		return;
	}
	if (status < 0) {
		a->bad++;
		cli_error("%s: %s", path, msg);
	} else if (strcmp(msg, "committed") == 0) {
		printf("committed   %s\n", path);
	} else {
		a->files++;
		if (a->verbose)
			printf("  %s (%s)\n", path, msg);
	}
}

/* A writable mount serves the store: it must do the commit, or it would
 * see a directory it may be writing into vanish under it.  The xattr's
 * value names the checkpoint (ckptfs(1)). */
static int commit_through_mount(const char *mnt, long pid, const char *series, const char *staged,
				const char *final)
{
	char *path = NULL;
	const char *name = final ? final : staged;
	int rc;

	if (asprintf(&path, "%s/%s/%s", mnt, series, staged) < 0) {
		cli_error("out of memory");
		return CK_EXIT_FAILURE;
	}
	rc = setxattr(path, "user.ckptfs.commit", name, strlen(name), 0);
	if (rc == 0) {
		if (pid)
			printf("committed   %s/%s (by the mount at %s, pid %ld)\n", series, name, mnt, pid);
		else
			printf("committed   %s/%s (by the mount at %s)\n", series, name, mnt);
		free(path);
		return CK_EXIT_OK;
	}
	rc = errno;
	if (rc == EIO) {
		cli_error("%s/%s: does not parse completely: moved to the quarantine by the mount at %s "
			  "(see ckptctl quarantine)", series, staged, mnt);
		free(path);
		return CK_EXIT_DAMAGED;
	}
	if (pid)
		cli_error("%s: the store is mounted writable by ckptfs (pid %ld) at %s, which must commit it, "
			  "and it refused: %s", path, pid, mnt, strerror(rc));
	else
		cli_error("%s: the mount refused the commit: %s", path, strerror(rc));
	free(path);
	return CK_EXIT_FAILURE;
}

static const struct option opts[] = {
	{ "verbose", no_argument, NULL, 'v' },
	{ 0, 0, 0, 0 },
};

static int run(const struct cli_cmd *cmd, int argc, char **argv)
{
	struct commit_args a = { 0 };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	char *series, *staged, *mnt = NULL;
	long pid = 0;
	int rc, owned;

	rc = cli_getopt(cmd, argc, argv, "v", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind < 2 || argc - optind > 3)
		return cli_usage_error(cmd, "expected STORE SERIES/STAGED_NAME [FINAL_NAME]");
	series = argv[optind + 1];
	staged = strchr(series, '/');
	if (!staged || !staged[1] || strchr(staged + 1, '/'))
		return cli_usage_error(cmd, "'%s' is not SERIES/STAGED_NAME", series);
	*staged++ = '\0';
	/* A mount point: the user commits through it, with what the mount
	 * lets that user do (ckptfs(1), PERMISSIONS). */
	if (cli_is_mount(argv[optind]))
		return commit_through_mount(argv[optind], 0, series, staged, argc - optind == 3 ? argv[optind + 2] : NULL);
	owned = ck_store_mount_owner(argv[optind], &pid, &mnt);
	if (owned == 1) {
		rc = commit_through_mount(mnt, pid, series, staged, argc - optind == 3 ? argv[optind + 2] : NULL);
		free(mnt);
		return rc;
	}
	st = cli_open_store(argv[optind], 0);
	if (!st)
		return CK_EXIT_FAILURE;
	rc = ck_store_commit_staged(st, series, staged, argc - optind == 3 ? argv[optind + 2] : NULL, on_report, &a,
				    &err);
	ck_store_close(st);
	if (rc == -EBADMSG) {
		cli_error("%s", err.msg);
		return CK_EXIT_DAMAGED;
	}
	if (rc == -EALREADY) {
		/* Another process or node committed this very directory meanwhile. */
		printf("committed   %s/%s, by another process or node\n", series,
		       argc - optind == 3 ? argv[optind + 2] : staged);
		return CK_EXIT_OK;
	}
	if (rc < 0) {
		cli_error("commit: %s", ck_error_text(&err, rc));
		return CK_EXIT_FAILURE;
	}
	return CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_commit = {
	.name = "commit",
	.args = "STORE|MOUNTPOINT SERIES/STAGED_NAME [FINAL_NAME] [-v]",
	.summary = "commit a checkpoint written into STORE/staging, or quarantine it",
	.help = "Commits STORE/staging/SERIES/STAGED_NAME/ as checkpoint FINAL_NAME (default\n"
		"STAGED_NAME, which must then carry a step: checkpoint-N...) of SERIES.  Every\n"
		"file is parsed and hashed first; if one does not parse completely (truncated zip,\n"
		"short safetensors, hostile pickle, DCP directory without its .metadata or data)\n"
		"the directory is moved to STORE/quarantine/SERIES/STAGED_NAME.TIME/ with a REASON\n"
		"file instead, and the series' newest checkpoint stays what it was.  Otherwise the\n"
		"directory is made durable, renamed to STORE/data/SERIES/FINAL_NAME/ and indexed.\n"
		"A committed checkpoint is never replaced.  The commit waits up to 5 s for files\n"
		"of the directory open for writing through writable mounts (on any node) to be\n"
		"closed, then fails.  While a writable ckptfs serves STORE on this node the\n"
		"mount does the commit (it may be writing into the directory).  Given the\n"
		"MOUNTPOINT of a writable ckptfs instead of STORE, commits MOUNTPOINT/SERIES/\n"
		"STAGED_NAME through it as the user running ckptctl, who needs write permission\n"
		"on the directory and what renaming it in SERIES needs.\n"
		"When another process or node commits the same directory at the same time, it is\n"
		"committed once, and both say so.\n"
		"\n"
		"  -v, --verbose  list every file and what it is\n"
		"\n"
		"Exit status: 0 committed, 3 quarantined, 1 error (nothing changed).\n",
	.run = run,
};

static int run_recover(const struct cli_cmd *cmd, int argc, char **argv)
{
	struct commit_args a = { 0 };
	struct ck_error err = { { 0 } };
	struct ck_store *st;
	int rc, n;

	rc = cli_getopt(cmd, argc, argv, "v", opts, on_opt, &a);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_usage_error(cmd, "expected one STORE");
	/* Opening writable already recovers; this says what there was to do. */
	st = cli_open_store(argv[optind], 0);
	if (!st)
		return CK_EXIT_FAILURE;
	n = ck_store_recover(st, on_report, &a, &err);
	ck_store_close(st);
	if (n < 0) {
		cli_error("recover: %s", ck_error_text(&err, n));
		return CK_EXIT_FAILURE;
	}
	return CK_EXIT_OK;
}

const struct cli_cmd cli_cmd_recover = {
	.name = "recover",
	.args = "STORE [-v]",
	.summary = "finish staged commits that a crash cut short",
	.help = "Records every directory under STORE/data/ that the index does not hold (a commit\n"
		"that stopped after its rename: it was validated before), removes temporary\n"
		"manifests, and gives a quarantined directory without a REASON one.  Every writable\n"
		"open of the store (ckptctl import, commit, a writable mount) does this first.\n"
		"\n"
		"  -v, --verbose  list every file recorded\n"
		"\n"
		"Exit status: 0 done, 1 error.\n",
	.run = run_recover,
};
