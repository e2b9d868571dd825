/* Daemon plumbing (daemon.c): going to the background the way sshfs does,
 * with the parent waiting for the mount to work. */
#ifndef CKPTFS_FS_DAEMON_H
#define CKPTFS_FS_DAEMON_H

#include <pthread.h>

/* Forks.  The parent waits until the child reports the mount live (or
 * fails), then returns 1 with the exit status for it in *parent_status.
 * The child returns 0, in its own session in /, with *notify_fd to report
 * through.  -errno if the fork itself fails. */
int ckfs_daemonize(int *notify_fd, int *parent_status);
/* Reports the outcome (0 or -errno) to the waiting parent, once; closes fd. */
void ckfs_notify_parent(int *notify_fd, int status);
/* Points stdin/out/err at /dev/null once logging goes to syslog. */
void ckfs_detach_stdio(void);
/* Writes this process's pid to path: 0 or -errno. */
int ckfs_write_pidfile(const char *path);
/* Starts fn(arg) on a new thread that blocks every signal, so that the
 * process's signals (SIGTERM, SIGINT) land in the main thread, where
 * libfuse's handlers end the request loop and interrupt its wait.  The
 * caller's own mask is unchanged.  0 or -errno (pthread_create's). */
int ckfs_start_thread(pthread_t *thread, void *(*fn)(void *), void *arg);

#endif
