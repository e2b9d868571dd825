/* The state of a writer, shared by the files of src/writer (each file's
 * functions are declared in its own header). */
#ifndef CKPTFS_WRITER_INT_H
#define CKPTFS_WRITER_INT_H

#include "ckptfs/view.h"
#include "ckptfs/writer.h"

struct ckw_indexer;
struct ckw_grace;
struct ckw_idler;
struct ckw_compactor;

struct ck_writer {
	char *store;
	struct ck_view *view;
	struct ck_writer_opts opts;
	struct ck_writer_notify notify;
	int mount_lock;                 /* kept by helper children; -1: none */
	struct ck_staging *staging;
	struct ckw_indexer *indexer;    /* NULL: commits parse every file */
	struct ckw_grace *grace;        /* NULL: not started or stopped */
	struct ckw_idler *idler;
	struct ckw_compactor *compactor;
};

/* Tells the notify callback which names changed (writer.h). */
static inline void ckw_notify_names(struct ck_writer *w, const char *series, const char *old_name,
				    const char *new_name)
{
	if (w->notify.names_changed)
		w->notify.names_changed(w->notify.ctx, series, old_name, new_name);
}

/* Tells the notify callback a commit succeeded (writer.h). */
static inline void ckw_notify_committed(struct ck_writer *w, const char *series, const char *name)
{
	if (w->notify.committed)
		w->notify.committed(w->notify.ctx, series, name);
}

#endif
