/* The ckptfs command line (src/fs/options.c): defaults, our -o options,
 * FUSE options handed on (escaped), generic mount(8) options dropped,
 * and every kind of mistake refused. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs/options.h"

static int failures;

#define CHECK(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
		failures++; \
	} \
} while (0)

/* Parses a NULL-terminated argument list (argv[0] added). */
static int parse(struct ckfs_config *cfg, ...)
{
	char *argv[32];
	int argc = 0;
	va_list ap;
	const char *a;

	memset(cfg, 0, sizeof(*cfg));
	argv[argc++] = (char *)"ckptfs";
	va_start(ap, cfg);
	while ((a = va_arg(ap, const char *)) && argc < 31)
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;
	return ckfs_parse_args(argc, argv, cfg);
}

static const char *fuse_opts(const struct ckfs_config *cfg)
{
	return cfg->fuse_opts.len ? (const char *)cfg->fuse_opts.data : "";
}

static void test_defaults(void)
{
	struct ckfs_config cfg;

	CHECK(parse(&cfg, "/store", "/mnt", NULL) == 0);
	CHECK(!strcmp(cfg.store, "/store") && !strcmp(cfg.mountpoint, "/mnt"));
	CHECK(!cfg.foreground && !cfg.debug && !cfg.single_thread && !cfg.read_only);
	CHECK(cfg.view.verify == CK_VERIFY_FIRST);
	CHECK(cfg.log_level == CK_LOG_INFO);
	CHECK(cfg.attr_timeout == 3600 && cfg.entry_timeout == 3600);
	CHECK(cfg.max_threads == 10 && cfg.max_idle_threads == 10);
	CHECK(cfg.clone_fd == 1);
	CHECK(cfg.io_uring == 0 && cfg.uring_threads == 2);
	CHECK(cfg.readahead_kb == 4096 && cfg.pipe_max_kb == 2048);
	CHECK(cfg.pidfile == NULL);
	CHECK(!cfg.view.always_synthesize);
	CHECK(cfg.refresh_secs == 5 && cfg.writer.commit_idle == 0);
	CHECK(cfg.view.cache_bytes == 256ull << 20 && cfg.writer.compact_secs == 60);
	CHECK(cfg.writer.markers == CK_MARK_ALL && cfg.writer.nmarker_files == 0 && cfg.writer.marker_grace == 1);
	CHECK(!strcmp(fuse_opts(&cfg), ""));
	CHECK(ckfs_finish_fuse_opts(&cfg) == 0);
	CHECK(!strcmp(fuse_opts(&cfg), "subtype=ckptfs,fsname=/store,default_permissions,max_read=1048576"));
	CHECK(cfg.permissions == 1);
	CHECK(cfg.materialize == 1 && cfg.materialize_dir == NULL);	/* main.c picks the store's */
	ckfs_config_free(&cfg);

	/* -o nopermissions: the kernel checks nothing either. */
	CHECK(parse(&cfg, "/store", "/mnt", "-o", "nopermissions,allow_other", NULL) == 0);
	CHECK(cfg.permissions == 0);
	CHECK(ckfs_finish_fuse_opts(&cfg) == 0);
	CHECK(!strcmp(fuse_opts(&cfg), "allow_other,subtype=ckptfs,fsname=/store,max_read=1048576"));
	ckfs_config_free(&cfg);
}

static void test_our_options(void)
{
	struct ckfs_config cfg;

	CHECK(parse(&cfg, "-o", "verify=none,log_level=warn,attr_timeout=1.5", "/s",
		    "-oentry_timeout=0,max_threads=4,max_idle_threads=9", "/m",
		    "-o", "pidfile=/run/x.pid,readahead_kb=0,pipe_max_kb=0,noclone_fd,always_synthesize",
		    "-o", "io_uring,uring_threads=5", NULL) == 0);
	CHECK(cfg.view.verify == CK_VERIFY_NONE);
	CHECK(cfg.view.always_synthesize);
	CHECK(cfg.log_level == CK_LOG_WARN);
	CHECK(cfg.attr_timeout == 1.5 && cfg.entry_timeout == 0);
	CHECK(cfg.max_threads == 4);
	CHECK(cfg.max_idle_threads == 4);	/* never more than max_threads */
	CHECK(cfg.pidfile && !strcmp(cfg.pidfile, "/run/x.pid"));
	CHECK(cfg.readahead_kb == 0 && cfg.pipe_max_kb == 0 && cfg.clone_fd == 0);
	CHECK(cfg.io_uring == 1 && cfg.uring_threads == 5);
	CHECK(!strcmp(fuse_opts(&cfg), ""));
	ckfs_config_free(&cfg);

	/* -d: foreground with the debug log; flags cluster. */
	CHECK(parse(&cfg, "-sd", "/s", "/m", NULL) == 0);
	CHECK(cfg.single_thread && cfg.debug && cfg.foreground && cfg.log_level == CK_LOG_DEBUG);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "debug", NULL) == 0);
	CHECK(cfg.debug && cfg.foreground);
	ckfs_config_free(&cfg);

	/* The last of ro/rw wins, as with mount(8). */
	CHECK(parse(&cfg, "/s", "/m", "-o", "ro,rw", NULL) == 0);
	CHECK(!cfg.read_only);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "-fo", "rw,ro", "/s", "/m", NULL) == 0);
	CHECK(cfg.read_only && cfg.foreground);
	CHECK(ckfs_finish_fuse_opts(&cfg) == 0);
	CHECK(strstr(fuse_opts(&cfg), ",ro,") != NULL);
	ckfs_config_free(&cfg);

	/* Completion markers: kinds and file names; the last option wins. */
	CHECK(parse(&cfg, "/s", "/m", "-o", "commit_markers=hf:dcp:DONE:.ok,marker_grace=0.25,commit_idle=30",
		    NULL) == 0);
	CHECK(cfg.writer.markers == (CK_MARK_HF | CK_MARK_DCP));
	CHECK(cfg.writer.nmarker_files == 2 && !strcmp(cfg.writer.marker_files[0], "DONE") &&
	      !strcmp(cfg.writer.marker_files[1], ".ok"));
	CHECK(cfg.writer.marker_grace == 0.25 && cfg.writer.commit_idle == 30);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "commit_markers=DONE,commit_markers=none", NULL) == 0);
	CHECK(cfg.writer.markers == 0 && cfg.writer.nmarker_files == 0);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "commit_markers=megatron:deepspeed", NULL) == 0);
	CHECK(cfg.writer.markers == (CK_MARK_MEGATRON | CK_MARK_DEEPSPEED));
	ckfs_config_free(&cfg);

	/* The packed store: cache in MiB, compaction period (0: never). */
	CHECK(parse(&cfg, "/s", "/m", "-o", "cache_size=3,compact=0", NULL) == 0);
	CHECK(cfg.view.cache_bytes == 3ull << 20 && cfg.writer.compact_secs == 0);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "compact=5", NULL) == 0);
	CHECK(cfg.writer.compact_secs == 5);
	ckfs_config_free(&cfg);

	/* Direct I/O: none by default. */
	CHECK(parse(&cfg, "/s", "/m", NULL) == 0);
	CHECK(cfg.direct_io == CKFS_DIO_NONE);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "direct_io=torch", NULL) == 0);
	CHECK(cfg.direct_io == CKFS_DIO_TORCH);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "direct_io=all", NULL) == 0);
	CHECK(cfg.direct_io == CKFS_DIO_ALL);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", "direct_io=some", NULL) != 0);
	ckfs_config_free(&cfg);

	/* Materialized preloads: on by default, where told. */
	CHECK(parse(&cfg, "/s", "/m", "-o", "nomaterialize,materialize_dir=/var/tmp/x", NULL) == 0);
	CHECK(cfg.materialize == 0 && !strcmp(cfg.materialize_dir, "/var/tmp/x"));
	ckfs_config_free(&cfg);

	/* After --, everything is positional. */
	CHECK(parse(&cfg, "--", "-store", "-mnt", NULL) == 0);
	CHECK(!strcmp(cfg.store, "-store") && !strcmp(cfg.mountpoint, "-mnt"));
	ckfs_config_free(&cfg);
}

static void test_fuse_options(void)
{
	struct ckfs_config cfg;

	/* Handed to libfuse in order; commas inside values stay escaped. */
	CHECK(parse(&cfg, "/s", "/m", "-o", "allow_other,fsname=a\\,b,default_permissions",
		    "-o", "nosuid,subtype=mine,noexec", NULL) == 0);
	CHECK(!strcmp(fuse_opts(&cfg), "allow_other,fsname=a\\,b,default_permissions,nosuid,subtype=mine,noexec"));
	CHECK(ckfs_finish_fuse_opts(&cfg) == 0);	/* no default fsname/subtype now, nor a second default_permissions */
	CHECK(!strcmp(fuse_opts(&cfg),
		      "allow_other,fsname=a\\,b,default_permissions,nosuid,subtype=mine,noexec,max_read=1048576"));
	ckfs_config_free(&cfg);

	/* A store path with a comma or backslash is escaped for fuse_opt. */
	CHECK(parse(&cfg, "/x,y\\z", "/m", NULL) == 0);
	CHECK(ckfs_finish_fuse_opts(&cfg) == 0);
	CHECK(!strcmp(fuse_opts(&cfg), "subtype=ckptfs,fsname=/x\\,y\\\\z,default_permissions,max_read=1048576"));
	ckfs_config_free(&cfg);
}

static void test_generic_options_dropped(void)
{
	struct ckfs_config cfg;

	/* What fstab, mount(8) and mount.fuse3 pass along. */
	CHECK(parse(&cfg, "/s", "/m", "-o",
		    "defaults,rw,suid,dev,exec,async,relatime,noauto,auto,user,nouser,users,nofail,"
		    "_netdev,x-systemd.automount,x-gvfs-show,comment=hello,user=alice,owner,group",
		    NULL) == 0);
	CHECK(!strcmp(fuse_opts(&cfg), ""));
	CHECK(!cfg.read_only);
	ckfs_config_free(&cfg);
}

static void test_help_version(void)
{
	struct ckfs_config cfg;

	CHECK(parse(&cfg, "-h", NULL) == 0 && cfg.show_help);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "--help", NULL) == 0 && cfg.show_help);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "-V", NULL) == 0 && cfg.show_version);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "--version", NULL) == 0 && cfg.show_version);
	ckfs_config_free(&cfg);
}

static void test_mistakes(void)
{
	static const char *const bad_opts[] = {
		"frobnicate", "verify", "verify=", "verify=sometimes", "log_level=loud",
		"attr_timeout=-1", "attr_timeout=abc", "entry_timeout=1x", "max_threads=0",
		"max_threads=-3", "max_threads=99999", "max_threads=", "readahead_kb=1.5",
		"pipe_max_kb=x", "pidfile", "pidfile=", "fsname=", "subtype=", "ro=1",
		"clone_fd=1", "nonempty", "allow_other=yes", "always_synthesize=1",
		"commit_markers", "commit_markers=", "commit_markers=hf::dcp", "commit_markers=a/b",
		"commit_markers=..", "marker_grace=-1", "marker_grace=soon", "marker_grace=7200",
		"commit_idle=x", "cache_size=0", "cache_size=1.5", "cache_size", "compact=-1",
		"compact=soon", "materialize_dir", "materialize_dir=", "materialize_dir=rel/dir",
		"materialize=1", "io_uring=1", "uring_threads=0", "uring_threads=65", "uring_threads",
	};
	struct ckfs_config cfg;

	for (size_t i = 0; i < sizeof(bad_opts) / sizeof(bad_opts[0]); i++) {
		int rc = parse(&cfg, "/s", "/m", "-o", bad_opts[i], NULL);

		if (rc != -EINVAL)
			fprintf(stderr, "-o %s was accepted\n", bad_opts[i]);
		CHECK(rc == -EINVAL);
		ckfs_config_free(&cfg);
	}
	CHECK(parse(&cfg, "/s", NULL) == -EINVAL);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, NULL) == -EINVAL);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "/extra", NULL) == -EINVAL);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-o", NULL) == -EINVAL);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "-q", NULL) == -EINVAL);
	ckfs_config_free(&cfg);
	CHECK(parse(&cfg, "/s", "/m", "--frob", NULL) == -EINVAL);
	ckfs_config_free(&cfg);
}

int main(void)
{
	test_defaults();
	test_our_options();
	test_fuse_options();
	test_generic_options_dropped();
	test_help_version();
	test_mistakes();
	if (failures)
		fprintf(stderr, "%d check(s) failed\n", failures);
	return failures ? 1 : 0;
}
