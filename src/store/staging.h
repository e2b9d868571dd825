/* Private to src/store and the packs in it (src/packstore): the pieces of
 * committing a staged checkpoint directory (staged.c) and of recovering
 * from a commit that was cut short (recover.c). See docs/format.md,
 * "Staging, data and quarantine". */
#ifndef CKPTFS_STORE_STAGING_H
#define CKPTFS_STORE_STAGING_H

#include <stddef.h>

#include "ckptfs/buf.h"
#include "ckptfs/error.h"
#include "ckptfs/store.h"

#define CK_QUARANTINE_REASON "REASON"

/* Test hooks: when the environment variable CKPT_TEST_CRASH_AT equals stage,
 * the process ends on the spot with _exit(137), as a kill -9 would; when
 * CKPT_TEST_PAUSE_AT does, it creates the file CKPT_TEST_PAUSE_FILE names
 * and waits until that file is removed.  Test only: they let the crash
 * tests stop a commit between any two steps, or act while it waits. */
void ck_crash_point(const char *stage);

/* What a checkpoint directory root holds, as paths relative to it in byte
 * order: its regular files, symbolic links and empty directories.  Special
 * files (fifos, sockets, devices) and regular files with a link outside
 * root cannot be committed: each adds a "relpath: why" line to reasons.
 * 0 or -errno with err. */
int ck_tree_list(const char *root, char ***rel, size_t *n, struct ck_buf *reasons, struct ck_error *err);
/* fsync of every listed file and of every directory under root, root too. */
int ck_tree_fsync(const char *root, char *const *rel, size_t n, struct ck_error *err);
/* mkdir of STORE/area and STORE/area/series as needed, each new entry
 * made durable (fsync of its parent).  A new series directory under data/
 * or quarantine/ takes the owner, group and mode of STORE/staging/series
 * when there is one.  0 or -errno with err. */
int ck_store_area_dir(const char *store, const char *area, const char *series, char **out, struct ck_error *err);
/* Calls fn(ctx, series, name, path) for every entry NAME (of any type) of
 * every directory STORE/area/SERIES, "." and ".." aside, in directory
 * order, until fn returns non-zero.  A missing STORE/area has no entries;
 * an unreadable STORE/area/SERIES is passed over.  Returns 0, what fn
 * returned, or -errno. */
typedef int (*ck_area_entry_fn)(void *ctx, const char *series, const char *name, const char *path);
int ck_store_area_each(const char *store, const char *area, ck_area_entry_fn fn, void *ctx);

/* Appends one problem to a REASON text: the printf-style line, with a
 * backslash written "\\" and a newline "\n" (names are data: a path may
 * hold either), then a newline.  0 or -ENOMEM. */
int ck_reason_add(struct ck_buf *reasons, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes dir/REASON durably (temporary file, fsync, rename, fsync of dir),
 * owned by dir's owner and group, readable as dir is (mode 0644 & dir's). */
int ck_store_write_reason(const char *dir, const char *text, struct ck_error *err);

/* Torch Distributed Checkpoint (DCP) completeness of the listed files: in
 * every directory, .distcp files need a .metadata beside them (what a
 * .metadata names is ck_ingest_dcp_names's to check).  Appends a
 * "relpath: why" line to reasons for each problem.  0 or
 * -ENOMEM. */
int ck_dcp_check(char *const *rel, size_t n, struct ck_buf *reasons);

#endif
