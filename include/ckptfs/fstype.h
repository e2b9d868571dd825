/* Whether a filesystem is shared between machines: a network or
 * distributed filesystem (NFS, SMB/CIFS, CephFS, Lustre, GPFS, 9p, cluster
 * filesystems, and FUSE filesystems such as GlusterFS, which all report
 * FUSE_SUPER_MAGIC).  On such a filesystem a memory map is not coherent
 * between machines and device numbers differ from one client to the next:
 * the store keeps its LMDB index off it and does not record device numbers
 * (docs/design.md, "One store, many nodes").  Thread rules: none. */
#ifndef CKPTFS_FSTYPE_H
#define CKPTFS_FSTYPE_H

/* 1 when the filesystem holding path (or open fd) is shared, 0 when it is
 * local, -errno when statfs fails.  *name (may be NULL) gets a short name
 * of the kind ("nfs", "fuse", "lustre", ... or "local").  The environment
 * variable CKPT_TEST_SHARED_FS=1 makes every filesystem count as shared
 * (test only: node-local indexes on a local disk). */
int ck_fs_shared_path(const char *path, const char **name);
int ck_fs_shared_fd(int fd, const char **name);

#endif
