/* The writer's life cycle: what it owns and the threads it runs
 * (include/ckptfs/writer.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/log.h"
#include "compactor.h"
#include "grace.h"
#include "idle.h"
#include "indexer.h"
#include "markers.h"
#include "writer_int.h"

int ck_writer_open(const char *store, struct ck_view *view, const struct ck_writer_opts *opts,
		   const struct ck_writer_notify *notify, int mount_lock, struct ck_writer **out)
{
	struct ck_writer *w = calloc(1, sizeof(*w));
	char *staging_dir;
	int rc;

	if (!w)
		return -ENOMEM;
	w->store = strdup(store);
	if (!w->store || ck_staging_new(store, &w->staging)) {
		free(w->store);
		free(w);
		return -ENOMEM;
	}
	w->view = view;
	w->opts = *opts;
	if (notify)
		w->notify = *notify;
	w->mount_lock = mount_lock;
	staging_dir = ck_staging_top_path(w->staging, "", NULL);
	rc = staging_dir ? ckw_indexer_start(&w->indexer, ck_view_layer_rules(view), staging_dir) : -ENOMEM;
	free(staging_dir);
	if (rc)
		ck_warn("cannot start the indexer thread: commits parse every file themselves");
	*out = w;
	return 0;
}

static void grace_first(void *arg)
{
	ckw_marker_rescan(arg);
}

static void grace_quiet(void *arg, const char *series, const char *dir)
{
	ckw_marker_commit(arg, series, dir, "its completion marker", 1);
}

void ck_writer_start(struct ck_writer *w)
{
	const struct ckw_grace_ops grace_ops = { w, grace_first, grace_quiet };

	if (w->opts.commit_idle && ckw_idler_start(&w->idler, w, w->opts.commit_idle))
		ck_warn("cannot start the idle-commit thread: directories commit by rename or marker only");
	if (ckw_grace_start(&w->grace, w->staging, w->opts.marker_grace, &grace_ops))
		ck_warn("cannot start the marker thread: trainer_state.json commits without grace");
	if (w->opts.compact_secs && ckw_compactor_start(&w->compactor, w, w->opts.compact_secs))
		ck_warn("cannot start the compaction thread: the store stays raw until `ckptctl compact`");
}

void ck_writer_stop(struct ck_writer *w)
{
	ckw_grace_stop(w->grace);
	w->grace = NULL;
	ckw_compactor_stop(w->compactor);
	w->compactor = NULL;
	ckw_idler_stop(w->idler);
	w->idler = NULL;
}

void ck_writer_close(struct ck_writer *w)
{
	if (!w)
		return;
	ck_writer_stop(w);
	ckw_indexer_stop(w->indexer);
	ck_staging_free(w->staging);
	free(w->store);
	free(w);
}

struct ck_staging *ck_writer_staging(struct ck_writer *w)
{
	return w->staging;
}

int ck_writer_file_state(struct ck_writer *w, const char *path, struct ck_buf *out)
{
	return ckw_indexer_state(w->indexer, path, out);
}
