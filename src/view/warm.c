/* Building the composites a resume will open first, before it asks: the
 * files of every series' newest checkpoint.  A build parses the pickles of
 * every version of a file, which a trainer that mounts and then resumes
 * would otherwise wait for at its first open.  A file served as saved is
 * hashed once before its first open hands it to the kernel (passthrough):
 * the warm-up does that too, off the loader's path (docs/bench.md), also
 * for the older DCP data files a merged .metadata sends the loader to.
 * The daemon then pushes the bytes of the others into the kernel's page
 * cache of the mount (src/fs/preload.c). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "view_internal.h"

/* At most this many files are warmed at a time (a store of many series). */
#define WARM_MAX_FILES 4096

/* "series/checkpoint[/relpath]" of a file node: 0 or -ENOMEM. */
static int node_path(const struct ck_vnode *n, struct ck_buf *out)
{
	int rc;

	out->len = 0;
	rc = ck_buf_printf(out, "%s/%s%s%s", n->ckpt->series->name, n->ckpt->info.name,
			   n->relpath && n->relpath[0] ? "/" : "", n->relpath ? n->relpath : "");
	return rc ? rc : ck_buf_putc(out, '\0');
}

int ck_view_warm_newest(struct ck_view *v, const atomic_int *stop, uint64_t verify_max, ck_warm_fn fn,
			void *ctx)
{
	struct node_list l = { NULL, 0, 0 }, from = { NULL, 0, 0 };
	struct ck_buf path = CK_BUF_INIT;
	uint8_t *as_saved;
	size_t verified = 0, own;
	int rc = 0;

	pthread_rwlock_rdlock(&v->ns_lock);
	for (size_t i = 0; i < v->nseries && !rc; i++) {
		struct view_series *sr = v->series[i];

		if (sr->nckpts && sr->ckpts[sr->nckpts - 1]->node)
			rc = view_collect_files(sr->ckpts[sr->nckpts - 1]->node, &l, &from, WARM_MAX_FILES);
	}
	pthread_rwlock_unlock(&v->ns_lock);
	/* A merged DCP .metadata points the loader at older saves' data
	 * files: they are opened by the same load, so they are checked here
	 * too (populating builds the .metadata, which the loop below would). */
	own = l.len;
	for (size_t i = 0; i < from.len && !rc && !atomic_load(stop); i++) {
		if (view_dcp_populate(v, from.n[i]) != 0)
			continue;   /* said at the .metadata's open */
		pthread_rwlock_rdlock(&v->ns_lock);
		rc = view_collect_files(from.n[i], &l, NULL, WARM_MAX_FILES);
		pthread_rwlock_unlock(&v->ns_lock);
	}
	node_list_free(&from);
	as_saved = calloc(l.len ? l.len : 1, 1);
	if (!as_saved)
		rc = -ENOMEM;
	/* Nodes live as long as the view: building after the lock is fine. */
	for (size_t i = 0; i < l.len && !rc && !atomic_load(stop); i++) {
		struct ck_vfile *f;
		int fd;

		if (view_node_vfile(v, l.n[i], &f) != 0)
			continue;   /* a file that cannot be built says why at its open */
		/* Damage found here is refused at the open as it would have
		 * been there; this only moves the hashing off the open. */
		if (ck_vfile_size(f) <= verify_max && ck_vfile_whole_file(f, &fd) == 0) {
			as_saved[i] = 1;
			verified++;
		}
		ck_vfile_put(f);
	}
	ck_debug("warm-up: %zu files of the newest checkpoints built, %zu served as saved checked", l.len,
		 verified);
	/* Every file built first: an open of any of them waits for no build.
	 * Older saves' data files are not preloaded: the load reads only the
	 * items the merge took from them. */
	for (size_t i = 0; fn && i < own && !rc && !atomic_load(stop); i++) {
		struct ck_vfile *f;

		if (!l.n[i]->vfile || view_node_vfile(v, l.n[i], &f) != 0)
			continue;
		rc = node_path(l.n[i], &path);
		if (!rc && fn(ctx, l.n[i], (const char *)path.data, f, as_saved[i]))
			i = l.len;
		ck_vfile_put(f);
	}
	ck_buf_free(&path);
	free(as_saved);
	node_list_free(&l);
	return rc;
}
