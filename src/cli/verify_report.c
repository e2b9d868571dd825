/* ckptctl verify: the report's helpers (names, paths) and its release. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verify.h"

const char *vfy_reason_name(enum vfy_reason r)
{
	switch (r) {
	case VFY_MISSING: return "missing";
	case VFY_CHANGED: return "changed";
	case VFY_UNREADABLE: return "unreadable";
	case VFY_SHORT_READ: return "short read";
	case VFY_HASH_MISMATCH: return "hash mismatch";
	}
	return "damaged";
}

char *vfy_path(const char *series, const char *ckpt, const char *relpath)
{
	size_t n = strlen(series) + strlen(ckpt) + strlen(relpath) + 3;
	char *p = malloc(n);

	if (p)
		snprintf(p, n, "%s/%s%s%s", series, ckpt, relpath[0] ? "/" : "", relpath);
	return p;
}

void vfy_report_free(struct vfy_report *r)
{
	verify_packs_free(&r->packs);
	for (size_t i = 0; i < r->ndmg; i++) {
		struct vfy_damage *d = &r->dmg[i];

		free(d->series);
		free(d->ckpt);
		free(d->relpath);
		free(d->src_path);
		free(d->detail);
		free(d->storage);
		for (size_t j = 0; j < d->ntensors; j++)
			free(d->tensors[j]);
		free(d->tensors);
	}
	free(r->dmg);
	for (size_t i = 0; i < r->nbad; i++) {
		free(r->bad[i].series);
		free(r->bad[i].ckpt);
		free(r->bad[i].relpath);
		free(r->bad[i].src_path);
		free(r->bad[i].error);
	}
	free(r->bad);
	for (size_t i = 0; i < r->ntargets; i++) {
		free(r->targets[i].series);
		free(r->targets[i].ckpt);
		free(r->targets[i].relpath);
	}
	free(r->targets);
	for (size_t i = 0; i < r->ndeps; i++) {
		struct vfy_dependent *dp = &r->deps[i];

		free(dp->series);
		free(dp->ckpt);
		free(dp->relpath);
		free(dp->why);
		for (size_t j = 0; j < dp->ntensors; j++)
			free(dp->tensors[j].name);
		free(dp->tensors);
		free(dp->sources);
	}
	free(r->deps);
	memset(r, 0, sizeof(*r));
}
