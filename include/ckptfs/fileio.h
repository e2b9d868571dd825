/* Whole reads from file descriptors. */
#ifndef CKPTFS_FILEIO_H
#define CKPTFS_FILEIO_H

#include <stddef.h>
#include <stdint.h>

/* pread of exactly len bytes at off, retrying short reads and EINTR:
 * 0, -EIO when the file ends first, or -errno. */
int ck_pread_full(int fd, void *buf, size_t len, uint64_t off);

#endif
