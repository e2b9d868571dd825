/* Files parsed and hashed ahead of their commit (include/ckptfs/store.h).
 *
 * The writable mount parses each file at its last close, while the trainer
 * is still writing the next one; the commit that follows hands the result
 * back to the ingest as the "previous import" of the file, whose hashes
 * are reused when the file is still the same (device, inode, size, mtime):
 * the commit then reads headers and data.pkl only, not the tensor bytes
 * again.  A result that does not parse is never reused: the commit parses
 * the file itself and decides. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "ingester.h"

struct ck_preparsed {
	struct ck_ingest in;
	struct ck_ingest_prev prev;
};

int ck_preparse_file(const struct ck_layer_rules *rules, const char *path, const char *relpath,
		     struct ck_preparsed **out)
{
	struct ck_preparsed *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	rc = ck_ingest_file(path, relpath, rules, NULL, &p->in);
	if (rc < 0) {
		free(p);
		return rc;
	}
	p->prev.file = &p->in.info;
	p->prev.st = p->in.st;
	p->prev.nst = p->in.nst;
	*out = p;
	return 0;
}

void ck_preparsed_free(struct ck_preparsed *p)
{
	if (!p)
		return;
	ck_ingest_clear(&p->in);
	free(p);
}

const struct ck_file_info *ck_preparsed_info(const struct ck_preparsed *p)
{
	return &p->in.info;
}

const struct ck_ingest_prev *ck_preparsed_prev(const struct ck_preparsed *p)
{
	return p ? &p->prev : NULL;
}
