/* Materializing (materialize.c, -o materialize): a file the daemon would
 * serve (a composite, a file of the control directory) written whole, as
 * a read would serve it, into an unnamed file of its own on a local disk,
 * which the kernel then reads by passthrough as it reads the files served
 * as saved: the page cache of that disk's filesystem (large folios, no
 * request, no copy through /dev/fuse), where FUSE's own page cache holds
 * 4 KiB pages (docs/bench.md, "first load after a mount").  The preload
 * (preload.h) materializes the newest checkpoints' composites this way
 * when it can, and pushes them into FUSE's page cache otherwise.
 *
 * The file lives until the mount ends, the node is deleted through it, or
 * a refresh hides its deleted checkpoint (the kernel holds it from its
 * registration on: ckfs_passthrough_release),
 * counts against the preload's budget, and costs its size on the disk of
 * the directory once the kernel writes its pages back.
 *
 * Thread rules: any one thread per file; the passthrough state it claims
 * makes opens of the file wait until it is done. */
#ifndef CKPTFS_FS_MATERIALIZE_H
#define CKPTFS_FS_MATERIALIZE_H

#include <stdatomic.h>
#include <stddef.h>

#include "ckptfs/view.h"
#include "mount.h"

/* Writes f (node ino) into an unnamed file in fs->materialize_dir, its
 * bytes read and checked by ck_vfile_pages (buf: cap bytes, cap and page
 * as there), and registers that file as ino's backing file.  1 when ino
 * is read by passthrough from now on; 0 when it is not (materializing is
 * off or failed, ino was opened already, a byte failed its check, or
 * *stop was set: the daemon serves it, as without); -errno when the
 * directory cannot hold such files (the caller stops trying). */
int ckfs_materialize(struct ckfs *fs, fuse_ino_t ino, struct ck_vfile *f, const atomic_int *stop, void *buf,
		     size_t cap, size_t page);

#endif
