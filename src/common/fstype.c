/* Telling a shared (network or distributed) filesystem from a local one by
 * statfs's f_type (include/ckptfs/fstype.h). */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "ckptfs/fstype.h"

static const struct {
	uint32_t magic;
	const char *name;
} shared[] = {
	{ 0x6969, "nfs" },
	{ 0x517B, "smb" },
	{ 0xFF534D42, "cifs" },
	{ 0xFE534D42, "smb2" },
	{ 0x00C36400, "ceph" },
	{ 0x0BD00BD0, "lustre" },
	{ 0x47504653, "gpfs" },
	{ 0x01021997, "9p" },
	{ 0x65735546, "fuse" },        /* GlusterFS, ceph-fuse, sshfs, s3fs... */
	{ 0x5346414F, "afs" },
	{ 0x6B414653, "afs" },
	{ 0x73757245, "coda" },
	{ 0x7461636F, "ocfs2" },
	{ 0x01161970, "gfs2" },
	{ 0xAAD7AAEA, "panfs" },
	{ 0x19830326, "beegfs" },
	{ 0x20030528, "orangefs" },
	{ 0x564C, "ncp" },
};

static int classify(const struct statfs *sf, const char **name)
{
	const char *force = getenv("CKPT_TEST_SHARED_FS");

	if (force && !strcmp(force, "1")) {
		if (name)
			*name = "shared (CKPT_TEST_SHARED_FS)";
		return 1;
	}
	for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++) {
		if ((uint32_t)sf->f_type == shared[i].magic) {
			if (name)
				*name = shared[i].name;
			return 1;
		}
	}
	if (name)
		*name = "local";
	return 0;
}

int ck_fs_shared_path(const char *path, const char **name)
{
	struct statfs sf;

	if (statfs(path, &sf) < 0)
		return -errno;
	return classify(&sf, name);
}

int ck_fs_shared_fd(int fd, const char **name)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return -errno;
	return classify(&sf, name);
}
