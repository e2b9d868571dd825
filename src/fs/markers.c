/* Completion markers: the file a trainer writes last when a checkpoint is
 * complete.  When one lands (its last handle is closed, or a rename puts
 * it in place) and nothing else in its directory is open, the directory
 * is committed under its own name, which must carry a step:
 *
 *   <series>/<dir>/.metadata            PyTorch DCP (after .metadata.tmp)
 *   <series>/<dir>/trainer_state.json   Hugging Face Trainer (after grace)
 *   <series>/<dir>/<name>               -o commit_markers=<name> (after grace)
 *   <series>/latest_checkpointed_iteration.txt
 *                                       Megatron: "N" names iter_%07d
 *   <series>/latest                     DeepSpeed: the tag names the dir
 *
 * -o commit_markers= chooses which count.  DCP and the series markers are
 * written strictly last by their formats and commit at once; the others
 * wait for -o marker_grace seconds of quiet (grace.c).
 * The two series markers are the only files a series directory takes;
 * they live in STORE/staging/<series>/ beside the in-progress directories.
 * Releases arrive in any order, so the last close of any file in a
 * directory that has its marker also commits it.
 */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs.h"
#include "ckptfs/store.h"
#include "staged.h"

#define MEGATRON_MARKER "latest_checkpointed_iteration.txt"
#define DEEPSPEED_MARKER "latest"

int ckfs_is_series_marker(const char *name)
{
	return strcmp(name, MEGATRON_MARKER) == 0 || strcmp(name, DEEPSPEED_MARKER) == 0;
}

int ckfs_step_of(struct ckfs *fs, const char *series, const char *name, int64_t *step)
{
	char *pattern = NULL;
	int rc = ck_view_series_pattern(fs->view, series, &pattern);

	if (rc && rc != -ENOENT)
		ck_debug("%s: cannot read its step pattern: %s", series, strerror(-rc));
	rc = ck_series_step(name, pattern, step);
	free(pattern);
	return rc ? -EINVAL : 0;
}

int ckfs_commit_dir(struct ckfs *fs, const char *series, const char *name, int need_closed)
{
	char *path = ckfs_staging_top_path(fs->staging, series, name);
	struct stat st;
	int64_t step;
	int rc;

	if (!path)
		return -ENOMEM;
	if (ckfs_step_of(fs, series, name, &step) != 0 || lstat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
		free(path);
		return -EAGAIN;
	}
	rc = ckfs_staging_claim(fs->staging, series, name, need_closed);
	if (rc) {
		free(path);
		return rc == -EBUSY ? -EAGAIN : rc;
	}
	/* Another commit of it may have ended between the check and the claim. */
	if (lstat(path, &st) != 0) {
		ckfs_staging_unclaim(fs->staging, series, name);
		free(path);
		return -EAGAIN;
	}
	rc = ckfs_commit(fs, series, name, name);
	/* The view catches up while the directory is still claimed: a lookup
	 * of its name meanwhile, which finds it neither staged nor in the
	 * view, waits for the unclaim (ckfs_rw_lookup) instead of ENOENT. */
	ckfs_view_catch_up(fs);
	ckfs_staging_unclaim(fs->staging, series, name);
	/* Committed or quarantined, the directory left the staging area. */
	if (lstat(path, &st) != 0 && errno == ENOENT)
		ckfs_staging_removed(fs->staging, 0, series, name);
	free(path);
	/* After the unclaim: a lookup waiting for it holds the directory's
	 * lock, which these invalidations take. */
	ckfs_inval_commit_names(fs, ckfs_series_dir_ino(fs, series), name, name);
	return rc;
}

/* The directory a series marker names: Megatron's iteration number
 * becomes iter_%07d, DeepSpeed's tag is the name itself. */
static char *marker_target(const char *path, const char *marker)
{
	char text[256], *out = NULL;
	ssize_t n = -1;
	size_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	if (n <= 0)
		return NULL;
	len = (size_t)n;
	while (len && isspace((unsigned char)text[len - 1]))
		len--;
	text[len] = '\0';
	if (!len || strchr(text, '/') || text[0] == '.')
		return NULL;
	if (strcmp(marker, MEGATRON_MARKER) == 0) {
		char *end;
		unsigned long long it;

		errno = 0;
		it = strtoull(text, &end, 10);
		if (errno || *end || !isdigit((unsigned char)text[0]))
			return NULL;	/* "release" and the like: no step to commit */
		if (asprintf(&out, "iter_%07llu", it) < 0)
			return NULL;
		return out;
	}
	return strdup(text);
}

enum marker_kind { NO_MARKER, MARKER_NOW, MARKER_GRACE };

static int regular_file_in(struct ckfs *fs, const char *series, const char *dir, const char *name)
{
	char *path = ckfs_staging_top_path(fs->staging, series, dir), *full = NULL;
	struct stat st;
	int found = 0;

	if (path && asprintf(&full, "%s/%s", path, name) >= 0) {
		found = lstat(full, &st) == 0 && S_ISREG(st.st_mode);
		free(full);
	}
	free(path);
	return found;
}

static int series_marker_names(struct ckfs *fs, const char *series, const char *marker, const char *dir)
{
	char *path = ckfs_staging_top_path(fs->staging, series, marker);
	char *target = path ? marker_target(path, marker) : NULL;
	int found = target && strcmp(target, dir) == 0;

	free(target);
	free(path);
	return found;
}

static unsigned series_marker_mask(const char *name)
{
	return strcmp(name, MEGATRON_MARKER) == 0 ? CKFS_MARK_MEGATRON : CKFS_MARK_DEEPSPEED;
}

/* Whether directory dir of series is complete by a marker: one of its
 * own, or a series marker that names it; and whether it commits at once. */
static enum marker_kind marker_of(struct ckfs *fs, const char *series, const char *dir)
{
	const struct ckfs_config *cfg = fs->cfg;

	if ((cfg->markers & CKFS_MARK_DCP) && regular_file_in(fs, series, dir, ".metadata"))
		return MARKER_NOW;
	if ((cfg->markers & CKFS_MARK_MEGATRON) && series_marker_names(fs, series, MEGATRON_MARKER, dir))
		return MARKER_NOW;
	if ((cfg->markers & CKFS_MARK_DEEPSPEED) && series_marker_names(fs, series, DEEPSPEED_MARKER, dir))
		return MARKER_NOW;
	if ((cfg->markers & CKFS_MARK_HF) && regular_file_in(fs, series, dir, "trainer_state.json"))
		return MARKER_GRACE;
	for (size_t i = 0; i < cfg->nmarker_files; i++)
		if (regular_file_in(fs, series, dir, cfg->marker_files[i]))
			return MARKER_GRACE;
	return NO_MARKER;
}

static void commit_for(struct ckfs *fs, const char *series, const char *dir, const char *why)
{
	int rc = ckfs_commit_dir(fs, series, dir, 1);

	if (rc && rc != -EAGAIN)
		ck_warn("%s/%s: commit after %s: %s", series, dir, why, strerror(-rc));
}

void ckfs_marker_check(struct ckfs *fs, const char *path)
{
	char *root = ckfs_staging_top_path(fs->staging, "", NULL);
	char *rel, *series, *dir, *file = NULL, *target;
	size_t rlen;

	if (!root)
		return;
	rlen = strlen(root);	/* "STORE/staging/" */
	if (strncmp(path, root, rlen) != 0 || !(rel = strdup(path + rlen))) {
		free(root);
		return;
	}
	series = rel;
	dir = strchr(series, '/');
	if (dir) {
		*dir++ = '\0';
		file = strchr(dir, '/');
		if (file)
			*file++ = '\0';
	}
	if (dir && !file && ckfs_is_series_marker(dir)) {
		target = (fs->cfg->markers & series_marker_mask(dir)) ? marker_target(path, dir) : NULL;
		if (target)
			commit_for(fs, series, target, dir);
		free(target);
	} else if (dir && file) {
		/* The marker, or the last other file of a marked directory
		 * (releases arrive in any order). */
		switch (marker_of(fs, series, dir)) {
		case MARKER_NOW:
			commit_for(fs, series, dir, "its completion marker");
			break;
		case MARKER_GRACE:
			if (fs->grace && fs->cfg->marker_grace > 0)
				ckfs_grace_schedule(fs->grace, series, dir);
			else
				commit_for(fs, series, dir, "its completion marker");
			break;
		case NO_MARKER:
			break;
		}
	}
	free(rel);
	free(root);
}

/* Every entry of one series directory, as if it had just been closed. */
static void rescan_series(struct ckfs *fs, const char *series_path)
{
	struct dirent *de;
	DIR *d = opendir(series_path);

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		char *path = NULL;

		if (de->d_name[0] == '.')
			continue;	/* ".", "..", and temporary names */
		if (ckfs_is_series_marker(de->d_name) ? asprintf(&path, "%s/%s", series_path, de->d_name) < 0
						       : asprintf(&path, "%s/%s/.", series_path, de->d_name) < 0)
			continue;
		ckfs_marker_check(fs, path);
		free(path);
	}
	closedir(d);
}

void ckfs_marker_rescan(struct ckfs *fs)
{
	char *root = ckfs_staging_top_path(fs->staging, "", NULL);
	struct dirent *de;
	DIR *d = root ? opendir(root) : NULL;

	while (d && (de = readdir(d)) != NULL) {
		char *path = NULL;

		if (de->d_name[0] != '.' && asprintf(&path, "%s%s", root, de->d_name) >= 0)
			rescan_series(fs, path);
		free(path);
	}
	if (d)
		closedir(d);
	free(root);
}
