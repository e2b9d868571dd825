/* The commit rules read with the series' stored step pattern
 * (include/ckptfs/writer.h, "Rules with the series' stored pattern"). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/log.h"
#include "ckptfs/store.h"
#include "writer_int.h"

/* The pattern of series (allocated), or NULL: the built-ins. */
static char *pattern_of(struct ck_writer *w, const char *series)
{
	char *pattern = NULL;
	int rc = ck_view_series_pattern(w->view, series, &pattern);

	if (rc && rc != -ENOENT)
		ck_debug("%s: cannot read its step pattern: %s", series, strerror(-rc));
	return pattern;
}

int ck_writer_step_of(struct ck_writer *w, const char *series, const char *name, int64_t *step)
{
	char *pattern = pattern_of(w, series);
	int rc = ck_series_step(name, pattern, step);

	free(pattern);
	return rc ? -EINVAL : 0;
}

int ck_writer_is_commit_rename(struct ck_writer *w, const char *series, const char *from, const char *to)
{
	char *pattern = pattern_of(w, series);
	int yes = ck_rule_is_commit_rename(pattern, from, to);

	free(pattern);
	return yes;
}

int ck_writer_commit_target(struct ck_writer *w, const char *series, const char *dir, const char *value,
			    size_t size, char **final)
{
	char *pattern = pattern_of(w, series);
	int rc = ck_rule_commit_target(pattern, dir, value, size, final);

	free(pattern);
	return rc;
}
