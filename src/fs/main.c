/* ckptfs STORE MOUNTPOINT [options]: mounts a checkpoint store.
 *
 * Order matters.  Everything that can fail (options, store, view,
 * mountpoint) is checked while stderr still reaches the caller.  Then the
 * process forks (unless -f); the child opens the view again — LMDB
 * environments and threads do not survive a fork, so the parent's copy
 * was only a check — mounts, and once a stat of the mountpoint comes back
 * through its own workers, tells the parent, which exits 0.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/exitcodes.h"
#include "ckptfs/fstype.h"
#include "ckptfs/log.h"
#include "ckptfs/memtune.h"
#include "ckptfs/store.h"
#include "ckptfs/writer.h"
#include "control.h"
#include "daemon.h"
#include "handshake.h"
#include "health.h"
#include "listing.h"
#include "lowlevel.h"
#include "mount.h"
#include "notify.h"
#include "options.h"
#include "passthrough.h"
#include "refresh.h"
#include "tables.h"
#include "tune.h"
#include "uring.h"
#include "warmup.h"

struct mount_run {
	struct ckfs fs;
	const struct ckfs_config *cfg;
	struct fuse_session *se;
	dev_t under_dev;         /* st_dev of the mountpoint before mounting */
	int notify_fd;           /* to the waiting parent; -1 in the foreground */
	pthread_t main_thread;
	int probe_failed;
	struct ckfs_refresher refresher;
	int mount_lock;          /* STORE/mount.lock of a writable mount, else -1 */
	struct ckfs_warmup warmup;
};

/* "/dev/fd/N": mount.fuse3 -o drop_privileges mounted already, we serve N. */
static int is_fuse_fd_path(const char *path)
{
	return strncmp(path, "/dev/fd/", 8) == 0 && path[8] &&
	       strspn(path + 8, "0123456789") == strlen(path + 8);
}

static int make_absolute(char **path, int must_be_dir, dev_t *dev)
{
	char *abs = realpath(*path, NULL);
	struct stat st;

	if (!abs || stat(abs, &st) != 0) {
		int err = errno;

		ck_err("%s: %s", *path, strerror(err));
		free(abs);
		return -err;
	}
	if (must_be_dir && !S_ISDIR(st.st_mode)) {
		ck_err("%s: %s", *path, strerror(ENOTDIR));
		free(abs);
		return -ENOTDIR;
	}
	free(*path);
	*path = abs;
	if (dev)
		*dev = st.st_dev;
	return 0;
}

/* The pidfile is written after chdir("/"), so it must be absolute. */
static int absolute_pidfile(struct ckfs_config *cfg)
{
	struct ck_buf path = CK_BUF_INIT;
	char *cwd;
	int rc;

	if (!cfg->pidfile || cfg->pidfile[0] == '/')
		return 0;
	cwd = getcwd(NULL, 0);
	if (!cwd) {
		rc = -errno;
		ck_err("pidfile %s: current directory: %s", cfg->pidfile, strerror(-rc));
		return rc;
	}
	rc = ck_buf_printf(&path, "%s/%s", cwd, cfg->pidfile);
	if (!rc)
		rc = ck_buf_putc(&path, '\0');
	free(cwd);
	if (rc) {
		ck_buf_free(&path);
		return rc;
	}
	free(cfg->pidfile);
	cfg->pidfile = (char *)ck_buf_steal(&path, NULL);
	return 0;
}

static int open_view(const struct ckfs_config *cfg, struct ck_view **view)
{
	struct ck_error err = { { 0 } };
	struct stat sb;
	int rc = ck_view_open(cfg->store, &cfg->view, view, &err);

	if (rc)
		ck_err("%s: cannot open the store: %s", cfg->store,
		       err.msg[0] ? err.msg : strerror(-rc));
	else if (stat(cfg->store, &sb) == 0 && (sb.st_mode & 007))
		ck_warn("%s: other users can read the store, which names every checkpoint's files; "
			"chmod 700 it (ckptctl(1), PERMISSIONS)", cfg->store);
	return rc;
}

/* -o materialize: the store's own disk unless told otherwise, and never
 * a network or distributed one by default (materialize.h).  0 or -ENOMEM. */
static int choose_materialize_dir(struct ckfs_config *cfg)
{
	if (!cfg->materialize) {
		free(cfg->materialize_dir);
		cfg->materialize_dir = NULL;
		return 0;
	}
	if (cfg->materialize_dir || ck_fs_shared_path(cfg->store, NULL) != 0)
		return 0;
	cfg->materialize_dir = strdup(cfg->store);
	return cfg->materialize_dir ? 0 : -ENOMEM;
}

/* The checks that must fail in the caller's face, before any fork. */
static int prepare(struct ckfs_config *cfg, dev_t *under_dev)
{
	int rc = make_absolute(&cfg->store, 1, NULL);

	if (!rc && !is_fuse_fd_path(cfg->mountpoint))
		rc = make_absolute(&cfg->mountpoint, 1, under_dev);
	if (!rc)
		rc = absolute_pidfile(cfg);
	if (!rc)
		rc = choose_materialize_dir(cfg);
	if (!rc && ckfs_finish_fuse_opts(cfg))
		rc = -ENOMEM;
	if (!rc && !cfg->foreground) {
		struct ck_view *view;

		rc = open_view(cfg, &view);
		if (!rc)
			ck_view_close(view);
	}
	return rc;
}

/* libfuse's own messages, once stderr is gone. */
__attribute__((format(printf, 2, 0)))
static void fuse_log_to_syslog(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char msg[512];
	size_t len;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	len = strlen(msg);
	while (len && msg[len - 1] == '\n')
		msg[--len] = '\0';
	if (!len)
		return;
	if (level <= FUSE_LOG_ERR)
		ck_err("%s", msg);
	else if (level == FUSE_LOG_WARNING)
		ck_warn("%s", msg);
	else if (level < FUSE_LOG_DEBUG)
		ck_info("%s", msg);
	else
		ck_debug("%s", msg);
}

/* Runs beside the request loop.  The kernel holds this stat until the
 * FUSE handshake is done and a worker has answered, so success means the
 * mount really serves.  Only after the handshake may readahead be raised:
 * the handshake itself can only lower it. */
static void *probe_mount(void *arg)
{
	struct mount_run *run = arg;
	const struct ckfs_config *cfg = run->cfg;
	struct stat st;
	int rc = 0;

	if (stat(cfg->mountpoint, &st) != 0)
		rc = -errno;
	else if (st.st_dev == run->under_dev)
		rc = -ENOTCONN;	/* unmounted already */
	if (rc == 0) {
		ckfs_raise_readahead(st.st_dev, cfg->readahead_kb);
		ck_info("mounted %s on %s", cfg->store, cfg->mountpoint);
		ckfs_notify_parent(&run->notify_fd, 0);
		return NULL;
	}
	ck_err("%s: mount not usable: %s", cfg->mountpoint, strerror(-rc));
	run->probe_failed = 1;
	ckfs_notify_parent(&run->notify_fd, rc);
	/* Ends the loop the way SIGTERM would (handler sets exit, wakes main). */
	pthread_kill(run->main_thread, SIGTERM);
	return NULL;
}

static int start_probe(struct mount_run *run, pthread_t *probe)
{
	int rc = ckfs_start_thread(probe, probe_mount, run);

	if (rc)
		ck_err("cannot start the mount probe: %s", strerror(-rc));
	return rc;
}

static int run_loop(struct mount_run *run)
{
	const struct ckfs_config *cfg = run->cfg;
	struct fuse_loop_config *lc;
	int rc;

	if (cfg->single_thread)
		return fuse_session_loop(run->se);
	lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, (unsigned)cfg->clone_fd);
	fuse_loop_cfg_set_max_threads(lc, cfg->max_threads);
	fuse_loop_cfg_set_idle_threads(lc, cfg->max_idle_threads);
	rc = fuse_session_loop_mt(run->se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

static int new_session(struct mount_run *run)
{
	const struct ckfs_config *cfg = run->cfg;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	int rc = 0;

	if (fuse_opt_add_arg(&args, "ckptfs") ||
	    fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, (const char *)cfg->fuse_opts.data) ||
	    (cfg->debug && fuse_opt_add_arg(&args, "-d")))
		rc = -ENOMEM;
	if (!rc) {
		/* Without -o ro, the table that also serves in-progress
		 * directories; either way with the control directory. */
		static struct fuse_lowlevel_ops ops;

		ckfs_control_ops(cfg->read_only ? &ckfs_ops : &ckfs_rw_ops, &ops);
		run->se = fuse_session_new(&args, &ops, sizeof(ops), &run->fs);
		if (!run->se)
			rc = -EINVAL;	/* libfuse said why */
	}
	fuse_opt_free_args(&args);
	return rc;
}

/* A daemon may have inherited SIGINT/SIGHUP ignored (a shell does that to
 * background jobs), and libfuse only handles signals that are not
 * ignored: a detached daemon should stop cleanly on all three. */
static void accept_stop_signals(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
}

/* Mounts and serves until unmounted or signalled; returns the exit status. */
static int serve(struct mount_run *run)
{
	const struct ckfs_config *cfg = run->cfg;
	struct ck_vattr root;
	pthread_t probe;
	int probing = 0, pid_written = 0;
	int status = CK_EXIT_FAILURE;
	int rc;

	run->fs.cfg = cfg;
	run->main_thread = pthread_self();
	if (!cfg->read_only) {
		struct ck_error err = { { 0 } };
		struct ck_store *st;

		/* One writable mount per store and node (beside the node's
		 * index): in-progress directories are claimed per daemon;
		 * other nodes' mounts wait for this one's writers through the
		 * store's writers locks. */
		if (ck_store_mount_claim(cfg->store, cfg->mountpoint, &run->mount_lock, &err)) {
			ck_err("%s", err.msg);
			return status;
		}
		/* A writable open finishes what a killed daemon's commit left
		 * (ck_store_recover); closed again before the view opens the
		 * store: LMDB allows one environment per process. */
		if (ck_store_open(cfg->store, 0, &st, &err)) {
			ck_err("%s: cannot open the store for writing: %s", cfg->store, err.msg);
			ck_store_mount_release(run->mount_lock);
			run->mount_lock = -1;
			return status;
		}
		ck_store_close(st);
	}
	if (open_view(cfg, &run->fs.view)) {
		ck_store_mount_release(run->mount_lock);
		run->mount_lock = -1;
		return status;
	}
	pthread_mutex_init(&run->fs.passthrough.lock, NULL);
	pthread_cond_init(&run->fs.passthrough.settled, NULL);
	pthread_mutex_init(&run->fs.listings_lock, NULL);
	rc = ck_view_getattr(run->fs.view, ck_view_root(run->fs.view), &root);
	if (rc) {
		ck_err("%s: cannot read the root of the store: %s", cfg->store, strerror(-rc));
		goto close_view;
	}
	run->fs.root_ino = root.ino;
	rc = ck_ctl_open(run->fs.view, cfg->store, &cfg->ctl, &run->fs.ctl);
	if (rc) {
		ck_err("%s: cannot open the control directory: %s", cfg->store, strerror(-rc));
		goto close_view;
	}
	if (!cfg->read_only) {
		struct ck_writer_notify notify;

		/* The commit and deletion helpers keep the mount lock. */
		ckfs_writer_notify(&run->fs, &notify);
		if (ck_writer_open(cfg->store, run->fs.view, &cfg->writer, &notify, run->mount_lock,
				   &run->fs.writer)) {
			ck_err("out of memory");
			goto close_view;
		}
		run->fs.staging = ck_writer_staging(run->fs.writer);
	}
	rc = ckfs_health_setup(&run->fs);
	if (rc) {
		ck_err("GPU health: cannot set up the watcher: %s", strerror(-rc));
		goto close_view;
	}
	if (new_session(run))
		goto close_view;
	run->fs.se = run->se;
	if (!cfg->foreground)
		accept_stop_signals();
	if (fuse_set_signal_handlers(run->se) != 0)
		goto destroy;
	if (fuse_session_mount(run->se, cfg->mountpoint) != 0)
		goto remove_handlers;
	if (cfg->io_uring && !cfg->single_thread) {
		rc = ckfs_uring_install(&run->fs, run->se);
		if (rc)
			ck_warn("FUSE over io_uring: %s: every request goes through /dev/fuse", strerror(-rc));
	}
	ckfs_raise_pipe_max(cfg->pipe_max_kb);
	if (cfg->pidfile) {
		rc = ckfs_write_pidfile(cfg->pidfile);
		if (rc) {
			ck_err("pidfile %s: %s", cfg->pidfile, strerror(-rc));
			goto unmount;
		}
		pid_written = 1;
	}
	if (!cfg->foreground) {
		ck_log_init("ckptfs", 1, cfg->log_level);
		fuse_set_log_func(fuse_log_to_syslog);
		ckfs_detach_stdio();
	}
	if (is_fuse_fd_path(cfg->mountpoint))
		ckfs_notify_parent(&run->notify_fd, 0);	/* nothing to stat */
	else if (start_probe(run, &probe) == 0)
		probing = 1;
	else
		goto unmount;

	/* Before the loop: it must see the kernel's INIT first.  Before the
	 * threads too: they send notifications, which wait for INIT, and
	 * read what passthrough negotiated. */
	if (cfg->passthrough || run->fs.uring)
		ckfs_init_handshake(&run->fs, run->se);
	rc = ckfs_uring_start(&run->fs);
	if (rc)
		ck_warn("FUSE over io_uring: %s: every request goes through /dev/fuse", strerror(-rc));
	if (cfg->refresh_secs &&
	    ckfs_refresher_start(&run->refresher, &run->fs, cfg->refresh_secs, cfg->warmup,
				 ckfs_warm_verify_max(&run->fs)))
		ck_warn("cannot start the refresh thread: checkpoints imported while mounted stay hidden");
	if (run->fs.writer)
		ck_writer_start(run->fs.writer);	/* marker grace, idle commits, compaction */
	if (cfg->warmup && ckfs_warmup_start(&run->warmup, &run->fs, ckfs_warm_verify_max(&run->fs)))
		ck_warn("cannot start the warm-up thread: composites are built at their first open");
	ckfs_health_start(&run->fs);
	rc = run_loop(run);
	ckfs_health_stop(&run->fs);
	ckfs_warmup_cancel(&run->warmup);	/* joined once unmounted (warmup.h) */
	if (run->fs.writer)
		ck_writer_stop(run->fs.writer);
	ckfs_refresher_stop(&run->refresher);
	if (rc < 0)
		ck_err("request loop: %s", strerror(-rc));
	else
		status = CK_EXIT_OK;	/* unmounted, or SIGTERM/SIGINT/SIGHUP */
unmount:
	/* Unmounting first also fails a probe still waiting in stat(), and
	 * a preload's lookup or push. */
	fuse_session_unmount(run->se);
	ckfs_uring_stop(&run->fs);	/* its threads end with the connection */
	ckfs_warmup_stop(&run->warmup);
	if (probing)
		pthread_join(probe, NULL);
	if (run->probe_failed)
		status = CK_EXIT_FAILURE;
	if (pid_written)
		unlink(cfg->pidfile);
remove_handlers:
	fuse_remove_signal_handlers(run->se);
destroy:
	fuse_session_destroy(run->se);
close_view:
	ckfs_health_free(&run->fs);
	ck_writer_close(run->fs.writer);
	ckfs_listings_free(&run->fs);
	pthread_mutex_destroy(&run->fs.listings_lock);
	ck_store_mount_release(run->mount_lock);
	ck_ctl_close(run->fs.ctl);   /* before the view it reads */
	ck_view_close(run->fs.view);
	ckfs_passthrough_destroy(&run->fs.passthrough);
	return status;
}

int main(int argc, char **argv)
{
	struct ckfs_config cfg;
	struct mount_run run;
	int status, rc;

	if (ck_writer_helper_wanted(argc, argv))
		return ck_writer_helper_main(argc, argv);   /* a commit or deletion child (writer.h) */
	ck_tune_malloc();
	memset(&cfg, 0, sizeof(cfg));
	memset(&run, 0, sizeof(run));
	run.cfg = &cfg;
	run.notify_fd = -1;
	run.mount_lock = -1;
	ck_log_init("ckptfs", 0, CK_LOG_INFO);
	rc = ckfs_parse_args(argc, argv, &cfg);
	if (rc) {
		status = rc == -ENOMEM ? CK_EXIT_FAILURE : CK_EXIT_USAGE;
		goto out;
	}
	status = CK_EXIT_OK;
	if (cfg.show_help || cfg.show_version) {
		if (cfg.show_help)
			ckfs_print_help(argv[0]);
		else
			ckfs_print_version();
		goto out;
	}
	ck_log_init("ckptfs", 0, cfg.log_level);
	status = CK_EXIT_FAILURE;
	if (cfg.index_dir && ck_store_set_index_base(cfg.index_dir) < 0)
		goto out;
	if (prepare(&cfg, &run.under_dev))
		goto out;
	if (!cfg.foreground) {
		rc = ckfs_daemonize(&run.notify_fd, &status);
		if (rc < 0) {
			ck_err("cannot fork: %s", strerror(-rc));
			goto out;
		}
		if (rc > 0)
			goto out;	/* the parent, with the child's verdict */
	}
	status = serve(&run);
	/* A failure before the report: the parent sees EOF and our status. */
	if (run.notify_fd >= 0)
		close(run.notify_fd);
out:
	ckfs_config_free(&cfg);
	return status;
}
