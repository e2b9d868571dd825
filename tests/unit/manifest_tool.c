/* A store as an older ckptfs left it, for tests: `manifest_tool
 * drop-owners MANIFEST...` rewrites each manifest without the files'
 * owners (version 1, what imports wrote before owners were recorded);
 * `ckptctl reindex` then builds an index of format 1 file records from
 * them (tests/integration/perms_read.sh). */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "ckptfs/fileio.h"
#include "store/manifest.h"

int main(int argc, char **argv)
{
	if (argc < 3 || strcmp(argv[1], "drop-owners") != 0) {
		fprintf(stderr, "usage: manifest_tool drop-owners MANIFEST...\n");
		return 64;
	}
	for (int i = 2; i < argc; i++) {
		struct ck_error err = { { 0 } };
		struct ck_buf text = CK_BUF_INIT;
		struct ck_manifest m;
		char root[4096], *slash;
		int rc;

		/* STORE/manifests/SERIES/NAME.manifest: paths inside the store
		 * made absolute, as version 1 recorded them. */
		snprintf(root, sizeof(root), "%s", argv[i]);
		for (int up = 0; up < 3 && (slash = strrchr(root, '/')) != NULL; up++)
			*slash = 0;
		rc = ck_manifest_load(root, argv[i], &m, &err);
		if (rc == 0) {
			m.version = 0;   /* written as version 1 */
			for (size_t f = 0; f < m.nfiles; f++)
				m.files[f].info.has_owner = 0;
			rc = ck_manifest_write(&text, &m, &err);
			if (rc == 0)
				rc = ck_file_replace(argv[i], text.data, text.len, &err);
			ck_manifest_clear(&m);
		}
		ck_buf_free(&text);
		if (rc) {
			fprintf(stderr, "%s: %s\n", argv[i], err.msg);
			return 1;
		}
	}
	return 0;
}
