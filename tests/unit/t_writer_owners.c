/* Owners of what a writable mount creates (src/writer/owners.c), without
 * a mount: a new file or directory belongs to its creator (the parent's
 * group under setgid, which a new directory inherits), a series directory
 * made for a committed series takes the owner it is given and an existing
 * one keeps its own, chown follows chown(2)'s rule (ck_staged_setattr),
 * and a commit by attribute needs what renaming the directory would.
 * Needs root. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/writer_staged_ops.h"
#include "ckptfs/writer_staging.h"
#include "testutil.h"

#define ALICE 61001u
#define BOB 61002u
#define ML 61100u

static char tmp[256], store[300];

static void expect(const char *path, uint32_t uid, uint32_t gid, uint32_t mode)
{
	struct stat st;

	SETUP(lstat(path, &st) == 0);
	CHECK(st.st_uid == uid && st.st_gid == gid && (st.st_mode & 07777) == mode, "%s: %u:%u %04o, expected %u:%u %04o",
	      path, (unsigned)st.st_uid, (unsigned)st.st_gid, (unsigned)st.st_mode & 07777, uid, gid, mode);
}

int main(void)
{
	uint32_t alice_groups[] = { ML };
	struct ck_cred alice = { ALICE, ALICE, alice_groups, 1 }, bob = { BOB, BOB, NULL, 0 };
	struct ck_owner sdir = { ALICE, ML, 02775 }, plain = { 0, 0, 0755 }, sticky = { 0, 0, 01777 };
	struct ck_staged_set take = { .what = CK_SET_UID, .uid = ALICE };
	struct ck_staged_set bobs = { .what = CK_SET_GID, .gid = BOB }, mls = { .what = CK_SET_GID, .gid = ML };
	struct ck_staging *s;
	struct ck_staged_at at;
	char path[600], *series, cmd[700];
	uint64_t top, file;
	int fd;

	if (geteuid() != 0) {
		printf("SKIP: needs root to give files to other users\n");
		return 77;
	}
	snprintf(tmp, sizeof(tmp), "%s/t_writer_owners.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	SETUP(mkdir(store, 0700) == 0);
	SETUP(ck_staging_new(store, &s) == 0);

	/* The series directory of a committed series: as it shows. */
	CHECK(ck_staging_series_dir(s, "run", &sdir) == 0, "series directory");
	series = ck_staging_top_path(s, "run", NULL);
	SETUP(series);
	expect(series, ALICE, ML, 02775);
	/* There already: kept. */
	CHECK(ck_staging_series_dir(s, "run", &plain) == 0, "series directory again");
	expect(series, ALICE, ML, 02775);

	/* A directory and a file made in it: the creator's, the group of the
	 * setgid parent, setgid again on the directory. */
	CHECK(ck_staging_mkdir(s, "run", "tmp-1", 0750) == 0, "mkdir");
	pathf(path, sizeof(path), "%s/tmp-1", series);
	SETUP(ck_staging_top_at(s, "run", "tmp-1", &at) == 0);
	CHECK(ck_staging_give(&at, -1, &sdir, &bob, 0750, 1) == 0, "give a directory");
	ck_staging_at_free(&at);
	expect(path, BOB, ML, 02750);
	pathf(path, sizeof(path), "%s/tmp-1/a.txt", series);
	fd = open(path, O_CREAT | O_EXCL | O_WRONLY, 0600);
	SETUP(fd >= 0);
	CHECK(ck_staging_give(NULL, fd, &sdir, &bob, 02640, 0) == 0, "give a file");
	close(fd);
	expect(path, BOB, ML, 0640);   /* setgid of a group bob is not in: dropped */

	/* chown: the owner only by root, the group by the owner to its groups. */
	SETUP(ck_staging_get(s, 0, "run", "tmp-1", NULL, &top) == 0);
	SETUP(ck_staging_get(s, top, NULL, "a.txt", NULL, &file) == 0);
	CHECK(ck_staged_setattr(s, file, -1, &alice, &take) == -EPERM, "alice takes bob's file");
	CHECK(ck_staged_setattr(s, file, -1, &bob, &bobs) == 0, "bob gives it his group");
	expect(path, BOB, BOB, 0640);
	CHECK(ck_staged_setattr(s, file, -1, &bob, &mls) == -EPERM, "bob gives it a group he is not in");

	/* A commit by attribute renames within the series. */
	CHECK(ck_staging_may_commit(s, "run", "tmp-1", &sdir, &alice) == 0, "alice writes the series (group)");
	CHECK(ck_staging_may_commit(s, "run", "tmp-1", &sdir, &bob) == -EACCES, "bob cannot write the series");
	CHECK(ck_staging_may_commit(s, "run", "tmp-1", &sticky, &bob) == 0, "bob owns the directory");
	CHECK(ck_staging_may_commit(s, "run", "tmp-1", &sticky, &alice) == -EPERM, "sticky: not alice's");
	CHECK(ck_staging_may_commit(s, "run", "nothing", &sticky, &alice) == -ENOENT, "no such directory");

	free(series);
	ck_staging_free(s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	SETUP(system(cmd) == 0);
	return test_result();
}
