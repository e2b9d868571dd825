/* Completion markers: the file a trainer writes last when a checkpoint is
 * complete (the kinds are in include/ckptfs/writer_rules.h).  When one
 * lands (its last handle is closed, or a rename puts it in place) and
 * nothing else in its directory is open, the directory is committed under
 * its own name, which must carry a step.  -o commit_markers= chooses which
 * count.  DCP and the series markers are written strictly last by their
 * formats and commit at once; the others wait for -o marker_grace seconds
 * of quiet (grace.c).  The two series markers live in
 * STORE/staging/<series>/ beside the in-progress directories.  Releases
 * arrive in any order, so the last close of any file in a directory that
 * has its marker also commits it.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/log.h"
#include "grace.h"
#include "indexer.h"
#include "markers.h"

/* The directory the series marker at path (of kind) names, or NULL. */
static char *marker_target(const char *path, unsigned kind)
{
	char text[256];
	ssize_t n = -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	if (n <= 0)
		return NULL;
	return ck_rule_series_marker_target(kind, text, (size_t)n);
}

enum marker_kind { NO_MARKER, MARKER_NOW, MARKER_GRACE };

static int regular_file_in(struct ck_writer *w, const char *series, const char *dir, const char *name)
{
	char *path = ck_staging_top_path(w->staging, series, dir), *full = NULL;
	struct stat st;
	int found = 0;

	if (path && asprintf(&full, "%s/%s", path, name) >= 0) {
		found = lstat(full, &st) == 0 && S_ISREG(st.st_mode);
		free(full);
	}
	free(path);
	return found;
}

static int series_marker_names(struct ck_writer *w, const char *series, const char *marker, const char *dir)
{
	char *path = ck_staging_top_path(w->staging, series, marker);
	char *target = path ? marker_target(path, ck_rule_series_marker(marker)) : NULL;
	int found = target && strcmp(target, dir) == 0;

	free(target);
	free(path);
	return found;
}

/* Whether directory dir of series is complete by a marker: one of its
 * own, or a series marker that names it; and whether it commits at once. */
static enum marker_kind marker_of(struct ck_writer *w, const char *series, const char *dir)
{
	const struct ck_writer_opts *o = &w->opts;

	if ((o->markers & CK_MARK_DCP) && regular_file_in(w, series, dir, CK_MARKER_DCP))
		return MARKER_NOW;
	if ((o->markers & CK_MARK_MEGATRON) && series_marker_names(w, series, CK_MARKER_MEGATRON, dir))
		return MARKER_NOW;
	if ((o->markers & CK_MARK_DEEPSPEED) && series_marker_names(w, series, CK_MARKER_DEEPSPEED, dir))
		return MARKER_NOW;
	if ((o->markers & CK_MARK_HF) && regular_file_in(w, series, dir, CK_MARKER_HF))
		return MARKER_GRACE;
	for (size_t i = 0; i < o->nmarker_files; i++)
		if (regular_file_in(w, series, dir, o->marker_files[i]))
			return MARKER_GRACE;
	return NO_MARKER;
}

void ckw_marker_commit(struct ck_writer *w, const char *series, const char *dir, const char *why, int at_rest)
{
	int rc = ck_writer_commit_dir(w, series, dir, CK_WRITER_CLOSED | (at_rest ? CK_WRITER_AT_REST : 0));

	/* Files of it still open for writing on another node: the last close
	 * there commits it (every node honours the same markers); tried again
	 * here once at rest, in case that node's daemon died first. */
	if (rc == -EBUSY)
		ckw_grace_schedule(w->grace, series, dir);
	else if (rc && rc != -EAGAIN)
		ck_warn("%s/%s: commit after %s: %s", series, dir, why, strerror(-rc));
}

void ck_writer_marker_check(struct ck_writer *w, const char *path)
{
	char *root = ck_staging_top_path(w->staging, "", NULL);
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
	if (dir && !file && ck_rule_series_marker(dir)) {
		unsigned kind = ck_rule_series_marker(dir);

		target = (w->opts.markers & kind) ? marker_target(path, kind) : NULL;
		if (target)
			ckw_marker_commit(w, series, target, dir, 0);
		free(target);
	} else if (dir && file) {
		/* The marker, or the last other file of a marked directory
		 * (releases arrive in any order). */
		switch (marker_of(w, series, dir)) {
		case MARKER_NOW:
			ckw_marker_commit(w, series, dir, "its completion marker", 0);
			break;
		case MARKER_GRACE:
			if (w->grace && w->opts.marker_grace > 0)
				ckw_grace_schedule(w->grace, series, dir);
			else
				ckw_marker_commit(w, series, dir, "its completion marker", 0);
			break;
		case NO_MARKER:
			break;
		}
	}
	free(rel);
	free(root);
}

/* Every entry of one series directory, as if it had just been closed. */
static void rescan_series(struct ck_writer *w, const char *series_path)
{
	struct dirent *de;
	DIR *d = opendir(series_path);

	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		char *path = NULL;

		if (de->d_name[0] == '.')
			continue;	/* ".", "..", and temporary names */
		if (ck_rule_series_marker(de->d_name) ? asprintf(&path, "%s/%s", series_path, de->d_name) < 0
						       : asprintf(&path, "%s/%s/.", series_path, de->d_name) < 0)
			continue;
		ck_writer_marker_check(w, path);
		free(path);
	}
	closedir(d);
}

void ckw_marker_rescan(struct ck_writer *w)
{
	char *root = ck_staging_top_path(w->staging, "", NULL);
	struct dirent *de;
	DIR *d = root ? opendir(root) : NULL;

	while (d && (de = readdir(d)) != NULL) {
		char *path = NULL;

		if (de->d_name[0] != '.' && asprintf(&path, "%s%s", root, de->d_name) >= 0)
			rescan_series(w, path);
		free(path);
	}
	if (d)
		closedir(d);
	free(root);
}

void ck_writer_released(struct ck_writer *w, uint64_t ino, int wrote, unsigned left)
{
	char *path = NULL;

	if (ck_staging_path(w->staging, ino, NULL, &path) != 0)
		return;
	/* A file written and closed for good is parsed now, while the
	 * trainer writes the next one; its commit then reads headers only. */
	if (wrote && left == 0 && !ck_staging_is_series_file(w->staging, ino))
		ckw_indexer_enqueue(w->indexer, path);
	/* The last close of a completion marker may commit its directory. */
	ck_writer_marker_check(w, path);
	free(path);
}
