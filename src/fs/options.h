/* The ckptfs command line (options.c): what it decides.  Called by
 * main() before any other thread runs. */
#ifndef CKPTFS_FS_OPTIONS_H
#define CKPTFS_FS_OPTIONS_H

#include "ckptfs/buf.h"
#include "ckptfs/ctldir.h"
#include "ckptfs/log.h"
#include "ckptfs/view.h"
#include "ckptfs/writer.h"

/* Everything the command line decides. */
struct ckfs_config {
	char *store;            /* as given, and absolute (for fsname and logs) */
	char *mountpoint;       /* absolute (realpath) unless it is /dev/fd/N */
	int foreground;         /* -f */
	int debug;              /* -d, -o debug: foreground + libfuse and our debug logs */
	int single_thread;      /* -s */
	int show_help;          /* -h, --help */
	int show_version;       /* -V, --version */
	int read_only;          /* -o ro: the kernel refuses writes too */
	struct ck_view_opts view;
	enum ck_log_level log_level;
	double attr_timeout;    /* seconds the kernel may cache attributes */
	double entry_timeout;   /* seconds the kernel may cache names */
	unsigned max_threads;
	unsigned max_idle_threads;
	int clone_fd;
	int io_uring;           /* -o io_uring: requests through per-CPU rings where offered (default off) */
	unsigned uring_threads; /* -o uring_threads=N: threads (ring entries) per CPU */
	char *pidfile;
	char *index_dir;        /* -o index_dir=: node-local indexes of stores on shared filesystems */
	unsigned readahead_kb;  /* bdi read_ahead_kb to set as root; 0 = leave */
	unsigned pipe_max_kb;   /* lower bound for fs.pipe-max-size as root; 0 = leave */
	unsigned refresh_secs;  /* follow new imports/commits every N s; 0 = never */
	struct ck_writer_opts writer;   /* commit_idle, commit_markers, marker_grace, compact */
	int direct_io;          /* CKFS_DIO_*: which committed files bypass the page cache */
	int passthrough;        /* -o passthrough (default): the kernel reads whole raw files itself */
	int warmup;             /* -o warmup (default): build the newest composites at mount */
	unsigned preload_mib;   /* -o preload: push up to this many MiB of them to the kernel; CKFS_PRELOAD_AUTO */
	int materialize;        /* -o materialize (default): preload composites into files of their own */
	char *materialize_dir;  /* -o materialize_dir=: where; NULL: the store's directory when local */
	int permissions;        /* -o permissions (default): the kernel and the daemon check access */
	struct ck_ctl_opts ctl; /* -o weights_shard: the control directory's settings */
	int health;             /* -o health=nvml: watch the GPUs (health.c) */
	unsigned health_interval;   /* s between GPU samples */
	double risk_threshold;  /* a risk score at or above it raises emergency flags */
	double emergency_gap;   /* no flag while the newest checkpoint is younger than
				   this fraction of the series' save interval */
	char *emergency_flag;   /* the flag's name in series directories; NULL: the default */
	/* Options handed to fuse_session_new() ("ro,allow_other,fsname=..."),
	 * NUL-terminated, commas inside values escaped. */
	struct ck_buf fuse_opts;
	int has_fsname;
	int has_subtype;
	int has_default_permissions;
};

/* -o direct_io=: which committed files are opened with FOPEN_DIRECT_IO
 * (none by default).  torch: torch.save files, which torch.load reads
 * with read() (direct I/O fills its buffers by pinning the pages) or
 * maps MAP_PRIVATE (mmap=True), which direct I/O allows; it helps a
 * first load and costs repeated ones (docs/bench.md).  safetensors and
 * numpy map their files MAP_SHARED, which FUSE refuses on direct I/O
 * files before libfuse 3.17: only `all` gives them direct I/O. */
/* -o preload=auto: a quarter of the memory available when the warm-up runs. */
#define CKFS_PRELOAD_AUTO UINT32_MAX

enum {
	CKFS_DIO_NONE,
	CKFS_DIO_TORCH,
	CKFS_DIO_ALL,
};

/* Parses argv into cfg (which the caller zeroes first).  Returns 0, or
 * -EINVAL after printing what is wrong to stderr.  Help and version only
 * set cfg->show_help / show_version. */
int ckfs_parse_args(int argc, char **argv, struct ckfs_config *cfg);
/* Completes cfg->fuse_opts once cfg->store is absolute: fsname, subtype,
 * ro, default_permissions (unless -o nopermissions) and max_read.  0 or
 * -ENOMEM. */
int ckfs_finish_fuse_opts(struct ckfs_config *cfg);
void ckfs_config_free(struct ckfs_config *cfg);
void ckfs_print_help(const char *progname);
void ckfs_print_version(void);

#endif
