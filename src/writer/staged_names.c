/* The in-progress directories a listing shows after the view's entries
 * (ck_writer_staged_names, include/ckptfs/writer.h). */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckptfs/buf.h"
#include "writer_int.h"

/* Appends a copy of name to *v (n entries): 0 or -ENOMEM. */
static int strv_add(char ***v, size_t *n, const char *name)
{
	char **grown = realloc(*v, (*n + 1) * sizeof(**v));

	if (!grown)
		return -ENOMEM;
	*v = grown;
	grown[*n] = strdup(name);
	if (!grown[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

static int strv_has(char **v, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i], name) == 0)
			return 1;
	return 0;
}

/* Whether dir (the view's; NULL: none yet) lists name. */
static int listed(struct ck_writer *w, const struct ck_vnode *dir, const char *name)
{
	const struct ck_vnode *n;

	return dir && ck_view_lookup(w->view, dir, name, &n) == 0;
}

int ck_writer_staged_names(struct ck_writer *w, const char *series, const struct ck_vnode *dir,
			   char ***names, size_t *n)
{
	char **claimed = NULL, **known = NULL, *path;
	size_t nclaimed = 0, nknown = 0;
	struct dirent *d;
	DIR *dd;
	int rc = 0;

	*names = NULL;
	*n = 0;
	path = ck_staging_top_path(w->staging, series ? series : "", NULL);
	if (!path)
		return -ENOMEM;
	dd = opendir(path);
	free(path);
	while (dd && rc == 0 && (d = readdir(dd)) != NULL) {
		struct stat st;
		int is_dir = d->d_type == DT_DIR;

		/* Some filesystems leave d_type unknown. */
		if (d->d_type == DT_UNKNOWN)
			is_dir = fstatat(dirfd(dd), d->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
				 S_ISDIR(st.st_mode);
		if (is_dir && d->d_name[0] != '.' && !listed(w, dir, d->d_name))
			rc = strv_add(names, n, d->d_name);
	}
	if (dd)
		closedir(dd);
	/* Read after the directory: one whose commit moved it out since is
	 * claimed until the view shows it (under its committed name). */
	if (rc == 0 && series)
		rc = ck_staging_claimed(w->staging, series, &claimed, &nclaimed);
	for (size_t i = 0; rc == 0 && i < nclaimed; i++)
		if (!strv_has(*names, *n, claimed[i]) && !listed(w, dir, claimed[i]))
			rc = strv_add(names, n, claimed[i]);
	/* One this mount knew in progress that is in neither list: another
	 * node's commit moved it.  Once that commit recorded it, the view
	 * catches up (the caller, seeing the view change, lists again). */
	if (rc == 0 && series)
		rc = ck_staging_tops(w->staging, series, &known, &nknown);
	for (size_t i = 0; rc == 0 && i < nknown; i++)
		if (!strv_has(*names, *n, known[i]) && !strv_has(claimed, nclaimed, known[i]) &&
		    !listed(w, dir, known[i]))
			ck_writer_moved_elsewhere(w, series, known[i]);
	ck_strv_free(claimed, nclaimed);
	ck_strv_free(known, nknown);
	if (rc) {
		ck_strv_free(*names, *n);
		*names = NULL;
		*n = 0;
	}
	return rc;
}
