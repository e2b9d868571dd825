/* A series' history from the view (include/ckptfs/health.h): each
 * committed checkpoint's step (its user.ckptfs.step) and the newest mtime
 * of its files (the view's attributes of the checkpoint directory). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "ckptfs/health.h"
#include "ckptfs/view.h"

int ck_health_view_history(void *ctx, const char *series, struct ck_health_ckpt **out, size_t *n)
{
	struct ck_view *view = ctx;
	const struct ck_vnode *dir, **kids = NULL;
	struct ck_health_ckpt *c;
	size_t nk = 0, m = 0;
	uint64_t changes;
	int rc;

	*out = NULL;
	*n = 0;
	rc = ck_view_lookup(view, ck_view_root(view), series, &dir);
	if (rc == -ENOENT)
		return 0;   /* nothing committed yet */
	if (rc == 0)
		rc = ck_view_children(view, dir, &kids, &nk, &changes);
	if (rc)
		return rc;
	c = calloc(nk ? nk : 1, sizeof(*c));
	if (!c) {
		free(kids);
		return -ENOMEM;
	}
	for (size_t i = 0; i < nk; i++) {
		struct ck_buf step = CK_BUF_INIT;
		struct ck_vattr a;

		if (ck_view_getxattr(view, kids[i], "user.ckptfs.step", &step) == 0 &&
		    ck_buf_putc(&step, '\0') == 0 && ck_view_getattr(view, kids[i], &a) == 0) {
			c[m].step = strtoll((const char *)step.data, NULL, 10);
			c[m].time_ns = a.mtime_ns;
			m++;
		}
		ck_buf_free(&step);
	}
	free(kids);
	*out = c;
	*n = m;
	return 0;
}
