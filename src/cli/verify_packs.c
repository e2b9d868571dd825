/* ckptctl verify, packed files: every chunk of every packed file decoded
 * once through its chain (ck_store_verify_packs), the failures kept for
 * verify_scan to turn into damage of the files that use them. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/packstore.h"
#include "verify.h"

struct collect {
	struct vfy_packs *p;
	int rc;
};

static void on_bad(void *ctx, uint64_t file_id, uint64_t off, uint64_t len, const char *why)
{
	struct collect *c = ctx;
	struct vfy_pack_bad *v;

	if (c->rc)
		return;
	v = realloc(c->p->bad, (c->p->nbad + 1) * sizeof(*v));
	if (!v) {
		c->rc = -ENOMEM;
		return;
	}
	c->p->bad = v;
	v[c->p->nbad] = (struct vfy_pack_bad){ file_id, off, len, strdup(why) };
	if (!v[c->p->nbad].why)
		c->rc = -ENOMEM;
	c->p->nbad++;
}

int verify_packs_load(struct ck_store *st, struct vfy_report *r, struct ck_error *err)
{
	struct collect c = { &r->packs, 0 };
	int rc;

	if (r->packs.loaded)
		return 0;
	r->packs.loaded = 1;
	rc = ck_store_verify_packs(st, on_bad, &c, &r->packs.chunks_checked, err);
	return rc < 0 ? rc : c.rc;
}

void verify_packs_free(struct vfy_packs *p)
{
	for (size_t i = 0; i < p->nbad; i++)
		free(p->bad[i].why);
	free(p->bad);
	memset(p, 0, sizeof(*p));
}
