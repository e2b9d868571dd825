/* Whole reads from file descriptors, and paths. */
#ifndef CKPTFS_FILEIO_H
#define CKPTFS_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* pread of exactly len bytes at off, retrying short reads and EINTR:
 * 0, -EIO when the file ends first, or -errno. */
int ck_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* "a/b" (or a copy of b when a is empty), allocated; NULL when out of memory. */
char *ck_path_join(const char *a, const char *b);

#endif
