/* Going to the background without lying to the caller: the parent process
 * returns only once the child reports the mount live, and with its
 * verdict, so `ckptfs STORE MNT && ls MNT` always works.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "ckptfs/exitcodes.h"
#include "ckptfs/log.h"
#include "daemon.h"

/* In the parent: the child's report, or why it died without one. */
static int wait_for_child(pid_t pid, int fd)
{
	int status, wst;
	ssize_t n;

	do
		n = read(fd, &status, sizeof(status));
	while (n < 0 && errno == EINTR);
	if (n == (ssize_t)sizeof(status)) {
		if (status == 0)
			return CK_EXIT_OK;
		fprintf(stderr, "ckptfs: the mount did not become usable: %s (details in syslog)\n",
			strerror(-status));
		return CK_EXIT_FAILURE;
	}
	/* No report: the child failed during setup and said why on stderr. */
	while (waitpid(pid, &wst, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "ckptfs: waiting for the daemon: %s\n", strerror(errno));
			return CK_EXIT_FAILURE;
		}
	}
	if (WIFEXITED(wst) && WEXITSTATUS(wst) != 0)
		return WEXITSTATUS(wst);
	if (WIFSIGNALED(wst))
		fprintf(stderr, "ckptfs: the daemon was killed by signal %d before the mount was ready\n",
			WTERMSIG(wst));
	else
		fprintf(stderr, "ckptfs: the daemon exited before the mount was ready\n");
	return CK_EXIT_FAILURE;
}

int ckfs_daemonize(int *notify_fd, int *parent_status)
{
	int fds[2];
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) != 0)
		return -errno;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		int err = errno;

		close(fds[0]);
		close(fds[1]);
		return -err;
	}
	if (pid > 0) {
		close(fds[1]);
		*parent_status = wait_for_child(pid, fds[0]);
		close(fds[0]);
		return 1;
	}
	close(fds[0]);
	setsid();	/* cannot fail: a fresh child is never a group leader */
	if (chdir("/") != 0)
		ck_warn("chdir /: %s", strerror(errno));
	*notify_fd = fds[1];
	return 0;
}

void ckfs_notify_parent(int *notify_fd, int status)
{
	ssize_t n;

	if (*notify_fd < 0)
		return;
	do
		n = write(*notify_fd, &status, sizeof(status));
	while (n < 0 && errno == EINTR);
	close(*notify_fd);
	*notify_fd = -1;
}

void ckfs_detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	for (int i = 0; i <= 2; i++)
		if (i != fd)
			dup2(fd, i);
	if (fd > 2)
		close(fd);
}

int ckfs_write_pidfile(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (dprintf(fd, "%ld\n", (long)getpid()) < 0)
		rc = -errno;
	if (close(fd) != 0 && rc == 0)
		rc = -errno;
	return rc;
}

int ckfs_start_thread(pthread_t *thread, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(thread, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return -rc;
}
