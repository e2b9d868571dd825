/* Permission checks (src/common/perm.c) against the kernel itself: for every
 * mode of a file and of a directory and for an owner, group members (by
 * fsgid and by a supplementary group), another user and root, the answer
 * of ck_perm_check equals faccessat(AT_EACCESS) of a child process running
 * with those credentials.  Without root (no other credentials to take) the
 * table-driven checks still run and the kernel comparison is skipped. */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckptfs/perm.h"
#include "testutil.h"

#define OWNER 61001u
#define GROUP 61001u

static void table(void)
{
	uint32_t sup[] = { 5, GROUP };
	struct ck_cred owner = { OWNER, 7, NULL, 0 };
	struct ck_cred member = { 61002, 7, sup, 2 };
	struct ck_cred other = { 61003, 61003, NULL, 0 };
	struct ck_cred root = { 0, 0, NULL, 0 };
	struct ck_owner o = { OWNER, GROUP, 0604 };
	struct ck_owner parent = { 1, 2, 02775 }, made;

	/* One class only: an owner with fewer bits than others has fewer. */
	CHECK(ck_perm_check(&o, 0, &owner, CK_MAY_READ) == 0, "owner read 0604");
	CHECK(ck_perm_check(&o, 0, &owner, CK_MAY_WRITE) == 0, "owner write 0604");
	CHECK(ck_perm_check(&o, 0, &member, CK_MAY_READ) == -EACCES, "group member read 0604");
	CHECK(ck_perm_check(&o, 0, &other, CK_MAY_READ) == 0, "other read 0604");
	o.mode = 0064;
	CHECK(ck_perm_check(&o, 0, &owner, CK_MAY_READ) == -EACCES, "owner read 0064");
	CHECK(ck_perm_check(&o, 0, &member, CK_MAY_READ | CK_MAY_WRITE) == 0, "member rw 0064");
	CHECK(ck_perm_check(&o, 0, &root, CK_MAY_READ | CK_MAY_WRITE) == 0, "root rw 0064");
	CHECK(ck_perm_check(&o, 0, &root, CK_MAY_EXEC) == -EACCES, "root exec without x bits");
	CHECK(ck_perm_check(&o, 1, &root, CK_MAY_EXEC) == 0, "root search 0064 dir");

	CHECK(ck_perm_through_dir(0644, 0711) == 0644, "through 0711");
	CHECK(ck_perm_through_dir(0644, 0700) == 0600, "through 0700");
	CHECK(ck_perm_through_dir(04755, 0750) == 04750, "through 0750");
	CHECK(ck_perm_both(0640, 0604) == 0600, "both");

	/* Sticky directories and chown, as rmdir(2) and chown(2) answer. */
	{
		struct ck_owner tmp = { 0, 0, 01777 }, mine = { 61003, 61003, 0755 }, theirs = { OWNER, GROUP, 0755 };
		struct ck_owner file = { OWNER, GROUP, 0644 };

		CHECK(ck_perm_may_delete(&tmp, &mine, &other) == 0, "own entry in a sticky dir");
		CHECK(ck_perm_may_delete(&tmp, &theirs, &other) == -EPERM, "another's entry in a sticky dir");
		CHECK(ck_perm_may_delete(&tmp, &theirs, &root) == 0, "root in a sticky dir");
		tmp.mode = 0755;
		CHECK(ck_perm_may_delete(&tmp, &mine, &other) == -EACCES, "entry of a 0755 dir of root's");
		CHECK(ck_perm_chown_ok(&file, &owner, OWNER, (uint32_t)-1) == 0, "chown to oneself");
		CHECK(ck_perm_chown_ok(&file, &owner, 61003, (uint32_t)-1) == -EPERM, "chown to another");
		CHECK(ck_perm_chown_ok(&file, &member, (uint32_t)-1, GROUP) == -EPERM, "chgrp by a non-owner");
		CHECK(ck_perm_chown_ok(&file, &owner, (uint32_t)-1, 7) == 0, "chgrp to the owner's group");
		CHECK(ck_perm_chown_ok(&file, &owner, (uint32_t)-1, 5) == -EPERM, "chgrp to a group not one's own");
		CHECK(ck_perm_chown_ok(&file, &root, 1, 1) == 0, "chown by root");
	}

	ck_perm_new_owner(&parent, &other, 0755, 1, &made);
	CHECK(made.uid == 61003 && made.gid == 2 && made.mode == 02755, "dir in setgid parent: %u %u %o", made.uid,
	      made.gid, made.mode);
	ck_perm_new_owner(&parent, &other, 02644, 0, &made);
	CHECK(made.gid == 2 && made.mode == 0644, "setgid file of a non-member: %o", made.mode);
	parent.mode = 0755;
	ck_perm_new_owner(&parent, &member, 0640, 0, &made);
	CHECK(made.uid == 61002 && made.gid == 7 && made.mode == 0640, "plain parent: %u %u %o", made.uid, made.gid,
	      made.mode);
}

/* The kernel's answers for cred on every file and directory of dir: one
 * byte per object and mask, written by a child that took cred. */
static int kernel_answers(const char *dir, const struct ck_cred *c, unsigned char *out, size_t n)
{
	int fds[2], status;
	pid_t pid;
	size_t got = 0;

	SETUP(pipe(fds) == 0);
	pid = fork();
	SETUP(pid >= 0);
	if (pid == 0) {
		gid_t g[8];

		close(fds[0]);
		for (size_t i = 0; i < c->ngroups; i++)
			g[i] = c->groups[i];
		if (setgroups(c->ngroups, g) || setresgid(c->gid, c->gid, c->gid) || setresuid(c->uid, c->uid, c->uid))
			_exit(99);
		for (unsigned m = 0; m < 01000; m++) {
			for (int d = 0; d < 2; d++) {
				char path[512];
				unsigned char res = 0;

				snprintf(path, sizeof(path), "%s/%c%03o", dir, d ? 'd' : 'f', m);
				for (int bit = 0; bit < 3; bit++)
					if (faccessat(AT_FDCWD, path, 1 << bit, AT_EACCESS) == 0)
						res |= (unsigned char)(1 << bit);
				if (write(fds[1], &res, 1) != 1)
					_exit(98);
			}
		}
		_exit(0);
	}
	close(fds[1]);
	while (got < n) {
		ssize_t r = read(fds[0], out + got, n - got);

		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fds[0]);
	waitpid(pid, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && got == n ? 0 : -1;
}

static void against_kernel(void)
{
	uint32_t sup[] = { 5, GROUP };
	const struct ck_cred creds[] = {
		{ OWNER, 61009, NULL, 0 },      /* owner, not in the group */
		{ OWNER, GROUP, NULL, 0 },      /* owner and in the group */
		{ 61002, GROUP, NULL, 0 },      /* group by fsgid */
		{ 61002, 61002, sup, 2 },       /* group by a supplementary group */
		{ 61003, 61003, NULL, 0 },      /* other */
		{ 0, 0, NULL, 0 },              /* root */
	};
	static unsigned char res[01000 * 2];
	char dir[256], path[512];
	size_t bad = 0;

	snprintf(dir, sizeof(dir), "%s/t_perm.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(dir));
	SETUP(chmod(dir, 0755) == 0);
	for (unsigned m = 0; m < 01000; m++) {
		int fd;

		pathf(path, sizeof(path), "%s/f%03o", dir, m);
		fd = open(path, O_CREAT | O_WRONLY, 0600);
		SETUP(fd >= 0 && fchown(fd, OWNER, GROUP) == 0 && fchmod(fd, m) == 0);
		close(fd);
		pathf(path, sizeof(path), "%s/d%03o", dir, m);
		SETUP(mkdir(path, 0700) == 0 && chown(path, OWNER, GROUP) == 0 && chmod(path, m) == 0);
	}
	for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
		if (kernel_answers(dir, &creds[i], res, sizeof(res)) < 0) {
			CHECK(0, "credentials %zu: child failed", i);
			continue;
		}
		for (unsigned m = 0; m < 01000; m++) {
			for (int d = 0; d < 2; d++) {
				struct ck_owner o = { OWNER, GROUP, m };

				for (int bit = 0; bit < 3; bit++) {
					int mine = ck_perm_check(&o, d, &creds[i], 1 << bit) == 0;
					int kernel = (res[m * 2 + (unsigned)d] >> bit) & 1;

					if (mine != kernel && !bad++)
						test_fail(__FILE__, __LINE__, "uid %u gid %u, %s %03o, mask %d: kernel %d, ours %d",
							  creds[i].uid, creds[i].gid, d ? "dir" : "file", m, 1 << bit, kernel,
							  mine);
				}
			}
		}
	}
	CHECK(!bad, "%zu answers differ from the kernel's", bad);
	snprintf(path, sizeof(path), "rm -rf '%s'", dir);
	SETUP(system(path) == 0);
}

int main(void)
{
	table();
	if (geteuid() == 0)
		against_kernel();
	else
		test_skip("not root: no comparison with the kernel's own checks");
	return test_result();
}
