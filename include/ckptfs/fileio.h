/* Whole reads and writes on file descriptors, durable file replacement and
 * directory entries, and paths.  Every function returns 0 or -errno and
 * may be called from any thread; none keeps state between calls. */
#ifndef CKPTFS_FILEIO_H
#define CKPTFS_FILEIO_H

#include <stddef.h>
#include <stdint.h>

#include "ckptfs/error.h"

/* pread of exactly len bytes at off, retrying short reads and EINTR:
 * 0, -EIO when the file ends first, or -errno. */
int ck_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* The whole regular file at path, at most max bytes, in a new buffer (the
 * caller frees it) with a NUL byte after its *len bytes.  A symbolic link
 * is not followed.  0, or -ELOOP (a symbolic link), -EINVAL (not a
 * regular file), -EFBIG (more than max bytes; *len says how many), -EIO
 * (it ended before its size, changed while read, or the device failed),
 * -ENOMEM or -errno. */
int ck_read_file(const char *path, size_t max, uint8_t **out, size_t *len);

/* write of all n bytes at the file offset, retrying short writes and
 * EINTR: 0 or -errno (the bytes before the failure may be written). */
int ck_write_all(int fd, const void *p, size_t n);

/* fsync of the file at path (not followed if a symbolic link): 0 or -errno. */
int ck_fsync_file(const char *path);
/* fsync of a directory, so that a rename, a new entry or a removal in it is
 * durable.  A filesystem that cannot sync directories (EINVAL) counts as
 * success.  0 or -errno. */
int ck_fsync_dir(const char *dir);
/* ck_fsync_dir of the directory path is in (the part before its last '/',
 * "." when it has none).  0 or -errno. */
int ck_fsync_parent(const char *path);
/* mkdir(path, 0755) that makes the new entry durable (fsync of its parent);
 * an existing entry is left as it is.  0 or -errno. */
int ck_mkdir_durable(const char *path);

/* The infix of the temporary file ck_file_replace writes beside its target:
 * "<target>" CK_REPLACE_TMP "<pid>".  Recovery code removes what a crash
 * left by matching it. */
#define CK_REPLACE_TMP ".tmp."

/* Replaces the file at path with the len bytes at data (mode 0644), durably:
 * writes them to "<path>.tmp.<pid>", fsyncs it, renames it over path and
 * fsyncs path's directory.  0, or -errno with err naming the step and the
 * file that failed (the temporary file is removed).
 * What a crash (or power loss) leaves: path holds its old contents or the
 * new ones, never a mix; a "<path>.tmp.<pid>" may remain beside it, for the
 * owner of the directory to remove.  An error from the last step (the
 * directory fsync) comes after the rename: path may then hold the new
 * contents already.
 * Two writers of one path must not overlap (the temporary name is per
 * process): callers serialise them (the store's commit lock does). */
int ck_file_replace(const char *path, const void *data, size_t len, struct ck_error *err);

/* A descriptor (O_PATH, close-on-exec) of the directory rel names below the
 * directory root (a descriptor), reached without following any symbolic
 * link and whatever rel's length: a path longer than PATH_MAX is walked in
 * pieces.  rel is relative, '/'-separated, without "." or ".." components;
 * "" is root itself.  The descriptor (>= 0) or -errno: -ENOTDIR or -ELOOP
 * when a component is not a directory or is a symbolic link. */
int ck_open_dir_beneath(int root, const char *rel);

/* "a/b" (a copy of the other when a or b is empty), allocated; NULL when
 * out of memory. */
char *ck_path_join(const char *a, const char *b);

#endif
