/* Paths as the store records them (docs/format.md, "Paths"): a file inside
 * the store is recorded relative to the store's root, so a copy of the
 * whole store (cp -a, tar, rsync -a) finds its files where it is; a file
 * imported in place elsewhere keeps its absolute path. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/fileio.h"
#include "index.h"

const char *ck_store_rel_path(const char *root, const char *path)
{
	size_t n = strlen(root);

	if (n > 1 && strncmp(path, root, n) == 0 && path[n] == '/' && path[n + 1])
		return path + n + 1;
	return path;
}

char *ck_store_abs_path(const char *root, const char *recorded)
{
	if (recorded[0] == '/')
		return strdup(recorded);
	return ck_path_join(root, recorded);
}

int ck_store_abs_path_inplace(const char *root, char **recorded)
{
	char *abs;

	if (!*recorded || (*recorded)[0] == '/')
		return 0;
	abs = ck_path_join(root, *recorded);
	if (!abs)
		return -ENOMEM;
	free(*recorded);
	*recorded = abs;
	return 0;
}
