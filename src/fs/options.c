/* The ckptfs command line: sshfs/squashfuse-like flags, and every setting
 * also as an -o option, so that fstab lines and mount.fuse3 (which runs
 * `ckptfs SOURCE MOUNTPOINT -o OPTS`) can say everything.
 *
 * -o options fall in three groups: ours (verify=, pidfile=...), FUSE mount
 * options handed on to libfuse (ro, allow_other, fsname=...), and generic
 * mount(8) options that mean nothing here and are accepted and dropped
 * (rw, auto, _netdev, x-*...).  Anything else is an error before mounting.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/buf.h"
#include "ckptfs/log.h"
#include "ckptfs/view.h"
#include "ckptfs/writer_rules.h"
#include "lowlevel.h"
#include "options.h"

/* Passed to the kernel as they are: they only restrict. */
static const char *const fuse_flag_opts[] = {
	"allow_other", "allow_root", "default_permissions", "auto_unmount",
	"nosuid", "nodev", "noexec", "noatime", "nodiratime", "sync", "dirsync",
	NULL,
};

/* Passed to libfuse with their value. */
static const char *const fuse_value_opts[] = { "fsname=", "subtype=", NULL };

/* Generic mount(8)/fstab options that ckptfs accepts and ignores.  "suid"
 * and "dev" (added by mount.fuse3) are dropped on purpose: the mount keeps
 * libfuse's nosuid,nodev default, which costs nothing for 0444 files. */
static const char *const ignored_opts[] = {
	"defaults", "rw", "suid", "dev", "exec", "async", "atime", "diratime",
	"relatime", "norelatime", "strictatime", "nostrictatime", "lazytime",
	"nolazytime", "auto", "noauto", "user", "nouser", "users", "owner",
	"group", "nofail", "_netdev",
	NULL,
};
static const char *const ignored_prefixes[] = { "x-", "comment=", "user=", NULL };

/* Our options that take a value. */
static const char *const valued_opts[] = {
	"verify", "log_level", "attr_timeout", "entry_timeout", "max_threads",
	"max_idle_threads", "uring_threads", "readahead_kb", "pipe_max_kb", "pidfile", "fsname",
	"subtype", "refresh", "commit_idle", "commit_markers", "marker_grace",
	"cache_size", "compact", "direct_io", "index_dir", "materialize_dir", "preload", "weights_shard", "health", "health_interval",
	"risk_threshold", "emergency_gap", "emergency_flag", NULL,
};

static int in_list(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

static int has_prefix_in(const char *const *list, const char *s)
{
	for (; *list; list++)
		if (strncmp(s, *list, strlen(*list)) == 0)
			return 1;
	return 0;
}

static int bad_value(const char *opt, const char *expected)
{
	fprintf(stderr, "ckptfs: invalid option -o %s: expected %s\n", opt, expected);
	return -EINVAL;
}

static int parse_uint(const char *opt, const char *val, unsigned min, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(val, &end, 10);
	if (errno || end == val || *end || val[0] == '-' || v < min || v > max) {
		char expected[64];

		snprintf(expected, sizeof(expected), "an integer from %u to %u", min, max);
		return bad_value(opt, expected);
	}
	*out = (unsigned)v;
	return 0;
}

static int parse_seconds(const char *opt, const char *val, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(v) || v < 0)
		return bad_value(opt, "a number of seconds >= 0");
	*out = v;
	return 0;
}

/* Appends one option to the list for libfuse, escaping what fuse_opt
 * would split on. */
static int add_fuse_opt(struct ckfs_config *cfg, const char *opt)
{
	struct ck_buf *b = &cfg->fuse_opts;

	if (b->len && b->data[b->len - 1] == '\0')
		b->len--;	/* drop the terminator, re-added below */
	if (b->len && ck_buf_putc(b, ','))
		return -ENOMEM;
	for (; *opt; opt++) {
		if ((*opt == ',' || *opt == '\\') && ck_buf_putc(b, '\\'))
			return -ENOMEM;
		if (ck_buf_putc(b, (uint8_t)*opt))
			return -ENOMEM;
	}
	return ck_buf_putc(b, '\0');
}

static int parse_log_level(const char *opt, const char *val, enum ck_log_level *out)
{
	static const struct { const char *name; enum ck_log_level level; } levels[] = {
		{ "err", CK_LOG_ERR }, { "error", CK_LOG_ERR },
		{ "warn", CK_LOG_WARN }, { "warning", CK_LOG_WARN },
		{ "info", CK_LOG_INFO }, { "debug", CK_LOG_DEBUG },
	};

	for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
		if (strcmp(val, levels[i].name) == 0) {
			*out = levels[i].level;
			return 0;
		}
	}
	return bad_value(opt, "err, warn, info or debug");
}

/* A fraction: > 0 (or >= 0 with zero_ok) and at most 1. */
static int parse_fraction(const char *opt, const char *val, int zero_ok, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(val, &end);
	if (errno || end == val || *end || !isfinite(v) || v > 1 || v < 0 || (!zero_ok && v == 0))
		return bad_value(opt, zero_ok ? "a number from 0 to 1" : "a number above 0, at most 1");
	*out = v;
	return 0;
}

static int set_string(char **dst, const char *val)
{
	char *copy = strdup(val);

	if (!copy)
		return -ENOMEM;
	free(*dst);
	*dst = copy;
	return 0;
}

/* commit_markers=LIST: ':'-separated dcp, hf, megatron, deepspeed, all,
 * none, or the name of a file whose arrival completes a directory. */
static int parse_markers(struct ckfs_config *cfg, const char *opt, const char *val)
{
	static const struct { const char *name; unsigned mask; } kinds[] = {
		{ "dcp", CK_MARK_DCP }, { "hf", CK_MARK_HF }, { "megatron", CK_MARK_MEGATRON },
		{ "deepspeed", CK_MARK_DEEPSPEED }, { "all", CK_MARK_ALL },
	};
	const char *p = val;

	if (!*val)
		return bad_value(opt, "dcp, hf, megatron, deepspeed, all, none or file names, separated by ':'");
	cfg->writer.markers = 0;
	ck_strv_free(cfg->writer.marker_files, cfg->writer.nmarker_files);
	cfg->writer.marker_files = NULL;
	cfg->writer.nmarker_files = 0;
	while (*p) {
		size_t len = strcspn(p, ":");
		size_t i;
		char **files;

		for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
			if (strlen(kinds[i].name) == len && strncmp(p, kinds[i].name, len) == 0)
				break;
		if (i < sizeof(kinds) / sizeof(kinds[0])) {
			cfg->writer.markers |= kinds[i].mask;
		} else if (len == 4 && strncmp(p, "none", 4) == 0) {
			cfg->writer.markers = 0;
		} else {
			if (len == 0 || memchr(p, '/', len) || (len == 1 && p[0] == '.') ||
			    (len == 2 && p[0] == '.' && p[1] == '.') || len > 255)
				return bad_value(opt, "dcp, hf, megatron, deepspeed, all, none or file names, "
						      "separated by ':'");
			files = realloc(cfg->writer.marker_files, (cfg->writer.nmarker_files + 1) * sizeof(*files));
			if (!files)
				return -ENOMEM;
			cfg->writer.marker_files = files;
			files[cfg->writer.nmarker_files] = strndup(p, len);
			if (!files[cfg->writer.nmarker_files])
				return -ENOMEM;
			cfg->writer.nmarker_files++;
		}
		p += len;
		if (*p == ':')
			p++;
	}
	return 0;
}

/* Settings that are on with -o NAME and off with -o noNAME. */
static const struct {
	const char *name;
	size_t field;           /* offsetof an int in struct ckfs_config */
} switches[] = {
	{ "clone_fd", offsetof(struct ckfs_config, clone_fd) },
	{ "io_uring", offsetof(struct ckfs_config, io_uring) },
	{ "passthrough", offsetof(struct ckfs_config, passthrough) },
	{ "warmup", offsetof(struct ckfs_config, warmup) },
	{ "materialize", offsetof(struct ckfs_config, materialize) },
	{ "permissions", offsetof(struct ckfs_config, permissions) },
};

/* Sets the switch opt names ("NAME" or "noNAME"): 1, or 0 when it names none. */
static int set_switch(struct ckfs_config *cfg, const char *opt)
{
	int on = strncmp(opt, "no", 2) != 0;
	const char *name = on ? opt : opt + 2;

	for (size_t i = 0; i < sizeof(switches) / sizeof(switches[0]); i++) {
		if (strcmp(name, switches[i].name) == 0) {
			*(int *)((char *)cfg + switches[i].field) = on;
			return 1;
		}
	}
	return 0;
}

/* One option of an -o list, already unescaped. */
static int parse_one_opt(struct ckfs_config *cfg, const char *opt)
{
	const char *eq = strchr(opt, '=');
	const char *val = eq ? eq + 1 : NULL;
	size_t klen = eq ? (size_t)(eq - opt) : strlen(opt);

	if (!val && in_list(valued_opts, opt))
		return bad_value(opt, "a value (-o KEY=VALUE)");
#define KEY(k) (klen == sizeof(k) - 1 && strncmp(opt, k, klen) == 0)
	if (KEY("verify") && val) {
		if (strcmp(val, "none") == 0)
			cfg->view.verify = CK_VERIFY_NONE;
		else if (strcmp(val, "first") == 0)
			cfg->view.verify = CK_VERIFY_FIRST;
		else
			return bad_value(opt, "none or first");
		return 0;
	}
	if (KEY("log_level") && val)
		return parse_log_level(opt, val, &cfg->log_level);
	if (KEY("attr_timeout") && val)
		return parse_seconds(opt, val, &cfg->attr_timeout);
	if (KEY("entry_timeout") && val)
		return parse_seconds(opt, val, &cfg->entry_timeout);
	if (KEY("max_threads") && val)
		return parse_uint(opt, val, 1, 1024, &cfg->max_threads);
	if (KEY("max_idle_threads") && val)
		return parse_uint(opt, val, 1, 1024, &cfg->max_idle_threads);
	if (KEY("uring_threads") && val)
		return parse_uint(opt, val, 1, 64, &cfg->uring_threads);
	if (KEY("readahead_kb") && val)
		return parse_uint(opt, val, 0, 1024 * 1024, &cfg->readahead_kb);
	if (KEY("refresh") && val)
		return parse_uint(opt, val, 0, 86400, &cfg->refresh_secs);
	if (KEY("commit_idle") && val)
		return parse_uint(opt, val, 0, 86400 * 7, &cfg->writer.commit_idle);
	if (KEY("cache_size") && val) {
		unsigned mib;
		int rc = parse_uint(opt, val, 1, 1024 * 1024, &mib);

		if (!rc)
			cfg->view.cache_bytes = (uint64_t)mib << 20;
		return rc;
	}
	if (KEY("weights_shard") && val) {
		char *end;
		unsigned long long v;

		errno = 0;
		v = strtoull(val, &end, 10);
		if (errno || end == val || *end || val[0] == '-' || v < 1)
			return bad_value(opt, "a number of bytes >= 1");
		cfg->ctl.shard_bytes = v;
		return 0;
	}
	if (KEY("direct_io") && val) {
		if (strcmp(val, "none") == 0)
			cfg->direct_io = CKFS_DIO_NONE;
		else if (strcmp(val, "torch") == 0)
			cfg->direct_io = CKFS_DIO_TORCH;
		else if (strcmp(val, "all") == 0)
			cfg->direct_io = CKFS_DIO_ALL;
		else
			return bad_value(opt, "torch, none or all");
		return 0;
	}
	if (KEY("compact") && val)
		return parse_uint(opt, val, 0, 86400 * 7, &cfg->writer.compact_secs);
	if (KEY("preload") && val) {
		if (strcmp(val, "auto") == 0) {
			cfg->preload_mib = CKFS_PRELOAD_AUTO;
			return 0;
		}
		return parse_uint(opt, val, 0, 64u * 1024 * 1024, &cfg->preload_mib);
	}
	if (KEY("commit_markers") && val)
		return parse_markers(cfg, opt, val);
	if (KEY("marker_grace") && val) {
		int rc = parse_seconds(opt, val, &cfg->writer.marker_grace);

		return rc ? rc : cfg->writer.marker_grace > 3600 ? bad_value(opt, "at most 3600 seconds") : 0;
	}
	if (KEY("health") && val) {
		if (strcmp(val, "nvml") == 0)
			cfg->health = 1;
		else if (strcmp(val, "none") == 0)
			cfg->health = 0;
		else
			return bad_value(opt, "nvml or none");
		return 0;
	}
	if (KEY("health_interval") && val)
		return parse_uint(opt, val, 1, 3600, &cfg->health_interval);
	if (KEY("risk_threshold") && val)
		return parse_fraction(opt, val, 0, &cfg->risk_threshold);
	if (KEY("emergency_gap") && val)
		return parse_fraction(opt, val, 1, &cfg->emergency_gap);
	if (KEY("emergency_flag") && val) {
		if (!*val || strchr(val, '/') || !strcmp(val, ".") || !strcmp(val, "..") || strlen(val) > 255)
			return bad_value(opt, "a file name");
		return set_string(&cfg->emergency_flag, val);
	}
	if (KEY("pipe_max_kb") && val)
		return parse_uint(opt, val, 0, 1024 * 1024, &cfg->pipe_max_kb);
	if (KEY("pidfile") && val) {
		if (!*val)
			return bad_value(opt, "a path");
		return set_string(&cfg->pidfile, val);
	}
	if (KEY("index_dir") && val) {
		if (val[0] != '/')
			return bad_value(opt, "an absolute path");
		return set_string(&cfg->index_dir, val);
	}
	if (KEY("materialize_dir") && val) {
		if (val[0] != '/')
			return bad_value(opt, "an absolute path");
		return set_string(&cfg->materialize_dir, val);
	}
	if (!val && set_switch(cfg, opt))
		return 0;
	if (KEY("always_synthesize") && !val) {
		cfg->view.always_synthesize = 1;
		return 0;
	}
	if (KEY("debug") && !val) {
		cfg->debug = 1;
		return 0;
	}
	if (KEY("ro") && !val) {
		cfg->read_only = 1;
		return 0;
	}
	if (KEY("rw") && !val) {
		cfg->read_only = 0;	/* the default: writable around committed checkpoints */
		return 0;
	}
#undef KEY
	if (in_list(fuse_flag_opts, opt)) {
		cfg->has_default_permissions |= strcmp(opt, "default_permissions") == 0;
		return add_fuse_opt(cfg, opt);
	}
	if (has_prefix_in(fuse_value_opts, opt)) {
		if (!*val)
			return bad_value(opt, "a value");
		cfg->has_fsname |= strncmp(opt, "fsname=", 7) == 0;
		cfg->has_subtype |= strncmp(opt, "subtype=", 8) == 0;
		return add_fuse_opt(cfg, opt);
	}
	if (in_list(ignored_opts, opt) || has_prefix_in(ignored_prefixes, opt))
		return 0;
	fprintf(stderr, "ckptfs: unknown option -o %s (see ckptfs --help)\n", opt);
	return -EINVAL;
}

/* Splits an -o list at commas not escaped by a backslash (as fuse_opt does). */
static int parse_opt_list(struct ckfs_config *cfg, const char *list)
{
	size_t n = strlen(list);
	char *opt = malloc(n + 1);
	size_t len = 0;
	int rc = 0;

	if (!opt)
		return -ENOMEM;
	for (size_t i = 0; i <= n && rc == 0; i++) {
		if (list[i] == '\\' && i + 1 < n) {
			opt[len++] = list[++i];
		} else if (list[i] == ',' || list[i] == '\0') {
			opt[len] = '\0';
			if (len)
				rc = parse_one_opt(cfg, opt);
			len = 0;
		} else {
			opt[len++] = list[i];
		}
	}
	free(opt);
	return rc;
}

static void set_defaults(struct ckfs_config *cfg)
{
	cfg->view.verify = CK_VERIFY_FIRST;
	cfg->log_level = CK_LOG_INFO;
	cfg->attr_timeout = 3600;
	cfg->entry_timeout = 3600;
	cfg->max_threads = 10;	/* libfuse's own default */
	cfg->clone_fd = 1;
	cfg->io_uring = 0;	/* opt-in: docs/design.md, "FUSE over io_uring" */
	cfg->uring_threads = 2;
	cfg->readahead_kb = 4096;
	cfg->pipe_max_kb = 2048;
	cfg->refresh_secs = 5;
	cfg->view.cache_bytes = CK_VIEW_DEFAULT_CACHE;
	cfg->ctl.shard_bytes = CK_CTL_DEFAULT_SHARD_BYTES;
	cfg->writer.compact_secs = 60;
	cfg->direct_io = CKFS_DIO_NONE;
	cfg->passthrough = 1;
	cfg->warmup = 1;
	cfg->preload_mib = CKFS_PRELOAD_AUTO;
	cfg->materialize = 1;
	cfg->permissions = 1;
	cfg->writer.markers = CK_MARK_ALL;
	cfg->writer.marker_grace = 1;
	cfg->health_interval = 10;
	cfg->risk_threshold = 0.95;
	cfg->emergency_gap = 0.25;
}

static int set_positional(struct ckfs_config *cfg, const char *arg)
{
	if (!cfg->store)
		return set_string(&cfg->store, arg);
	if (!cfg->mountpoint)
		return set_string(&cfg->mountpoint, arg);
	fprintf(stderr, "ckptfs: unexpected argument '%s' (usage: ckptfs STORE MOUNTPOINT [options])\n", arg);
	return -EINVAL;
}

/* A cluster of single-letter flags ("-f", "-fd", "-oro", "-o" "ro"). */
static int parse_short_flags(struct ckfs_config *cfg, int argc, char **argv, int *i)
{
	const char *arg = argv[*i];

	for (size_t j = 1; arg[j]; j++) {
		switch (arg[j]) {
		case 'f':
			cfg->foreground = 1;
			break;
		case 'd':
			cfg->debug = 1;
			break;
		case 's':
			cfg->single_thread = 1;
			break;
		case 'h':
			cfg->show_help = 1;
			break;
		case 'V':
			cfg->show_version = 1;
			break;
		case 'o':
			if (arg[j + 1])
				return parse_opt_list(cfg, arg + j + 1);
			if (*i + 1 >= argc) {
				fprintf(stderr, "ckptfs: option -o needs an argument\n");
				return -EINVAL;
			}
			return parse_opt_list(cfg, argv[++*i]);
		default:
			fprintf(stderr, "ckptfs: unknown option -%c (see ckptfs --help)\n", arg[j]);
			return -EINVAL;
		}
	}
	return 0;
}

int ckfs_parse_args(int argc, char **argv, struct ckfs_config *cfg)
{
	int only_positional = 0;
	int rc = 0;

	set_defaults(cfg);
	for (int i = 1; i < argc && rc == 0; i++) {
		const char *arg = argv[i];

		if (only_positional || arg[0] != '-' || arg[1] == '\0')
			rc = set_positional(cfg, arg);
		else if (strcmp(arg, "--") == 0)
			only_positional = 1;
		else if (strcmp(arg, "--help") == 0)
			cfg->show_help = 1;
		else if (strcmp(arg, "--version") == 0)
			cfg->show_version = 1;
		else if (arg[1] == '-') {
			fprintf(stderr, "ckptfs: unknown option %s (see ckptfs --help)\n", arg);
			rc = -EINVAL;
		} else {
			rc = parse_short_flags(cfg, argc, argv, &i);
		}
	}
	if (rc == -ENOMEM)
		fprintf(stderr, "ckptfs: out of memory\n");
	if (rc || cfg->show_help || cfg->show_version)
		return rc;
	if (!cfg->store || !cfg->mountpoint) {
		fprintf(stderr, "ckptfs: missing %s (usage: ckptfs STORE MOUNTPOINT [options])\n",
			cfg->store ? "MOUNTPOINT" : "STORE");
		return -EINVAL;
	}
	if (cfg->debug) {
		cfg->foreground = 1;
		cfg->log_level = CK_LOG_DEBUG;
	}
	if (!cfg->max_idle_threads || cfg->max_idle_threads > cfg->max_threads)
		cfg->max_idle_threads = cfg->max_threads;
	return 0;
}

int ckfs_finish_fuse_opts(struct ckfs_config *cfg)
{
	char opt[64];
	int rc = 0;

	if (!cfg->has_subtype)
		rc = add_fuse_opt(cfg, "subtype=ckptfs");
	if (!rc && !cfg->has_fsname) {
		struct ck_buf fsname = CK_BUF_INIT;

		rc = ck_buf_printf(&fsname, "fsname=%s", cfg->store);
		if (!rc)
			rc = ck_buf_putc(&fsname, '\0');
		if (!rc)
			rc = add_fuse_opt(cfg, (const char *)fsname.data);
		ck_buf_free(&fsname);
	}
	if (!rc && cfg->read_only)
		rc = add_fuse_opt(cfg, "ro");
	/* Owners and modes are those of the files: the kernel checks them
	 * for every user of the mount (allow_other), as on a local disk. */
	if (!rc && cfg->permissions && !cfg->has_default_permissions)
		rc = add_fuse_opt(cfg, "default_permissions");
	snprintf(opt, sizeof(opt), "max_read=%u", CKFS_MAX_REQUEST);
	if (!rc)
		rc = add_fuse_opt(cfg, opt);
	return rc;
}

void ckfs_config_free(struct ckfs_config *cfg)
{
	ck_strv_free(cfg->writer.marker_files, cfg->writer.nmarker_files);
	free(cfg->store);
	free(cfg->mountpoint);
	free(cfg->pidfile);
	free(cfg->index_dir);
	free(cfg->materialize_dir);
	free(cfg->emergency_flag);
	ck_buf_free(&cfg->fuse_opts);
}

/* The generic mount options, from the lists the parser uses so that the
 * help cannot leave one out, wrapped before 80 columns. */
static void print_ignored_opts(void)
{
	int col = printf("Generic mount options (");
	int first = 1;

	for (int prefixes = 0; prefixes < 2; prefixes++) {
		for (const char *const *o = prefixes ? ignored_prefixes : ignored_opts; *o; o++) {
			const char *star = prefixes && (*o)[strlen(*o) - 1] != '=' ? "*" : "";

			if (!first && col + 2 + (int)(strlen(*o) + strlen(star)) > 79) {
				printf(",\n");
				col = 0;
			} else if (!first) {
				col += printf(", ");
			}
			col += printf("%s%s", *o, star);
			first = 0;
		}
	}
	printf(") are accepted and ignored,\nso fstab lines work through mount.fuse3:\n");
}

void ckfs_print_help(const char *progname)
{
	printf("usage: %s STORE MOUNTPOINT [options]\n"
	       "\n"
	       "Mounts the checkpoint store STORE (made with `ckptctl init` and `ckptctl import`)\n"
	       "on MOUNTPOINT: every checkpoint appears complete and resumable.  Committed\n"
	       "checkpoints never change; without -o ro, new ones written into the mount are\n"
	       "committed to the store.  Unmount with `fusermount3 -u MOUNTPOINT`.\n"
	       "\n"
	       "general options:\n"
	       "    -h, --help             print this help and exit\n"
	       "    -V, --version          print the version and exit\n"
	       "    -f                     stay in the foreground (logs go to stderr)\n"
	       "    -d, -o debug           debug: foreground, libfuse request trace, debug log\n"
	       "    -s                     single-threaded request loop\n"
	       "    -o opt[,opt...]        mount options (below); may be repeated\n"
	       "\n"
	       "mount options:\n"
	       "    -o ro                  mount read-only in the kernel too\n"
	       "    -o allow_other         let other users access the mount\n"
	       "    -o allow_root          let root access the mount\n"
	       "    -o default_permissions let the kernel check permissions (the default: see\n"
	       "                           -o permissions)\n"
	       "    -o fsname=NAME         source shown in /proc/mounts (default: STORE path)\n"
	       "    -o subtype=NAME        type shown as fuse.NAME (default: ckptfs)\n"
	       "    -o auto_unmount        unmount if the daemon dies\n"
	       "    -o nosuid,nodev,noexec,noatime,nodiratime,sync,dirsync  passed to the kernel\n"
	       "\n"
	       "ckptfs options:\n"
	       "    -o verify=none|first   check each physical extent against its hash on first\n"
	       "                           read (first, default) or trust the files (none)\n"
	       "    -o always_synthesize   regenerate every torch/safetensors file, even one\n"
	       "                           that could be served as it was saved\n"
	       "    -o refresh=SEC         show checkpoints imported while mounted, checking\n"
	       "                           every SEC seconds (default 5; 0 = never)\n"
	       "    -o commit_idle=SEC     commit an in-progress directory named with a step once\n"
	       "                           its files are closed and unchanged for SEC seconds\n"
	       "                           (default 0 = never)\n"
	       "    -o commit_markers=LIST which completion markers commit a directory: dcp, hf,\n"
	       "                           megatron, deepspeed, all (default), none, or file\n"
	       "                           names (e.g. all:COMPLETE), separated by ':'\n"
	       "    -o marker_grace=SEC    quiet time after trainer_state.json or a named marker\n"
	       "                           before its directory commits (default 1)\n"
	       "    -o cache_size=MiB      memory for decoded chunks of packed checkpoints\n"
	       "                           (default 256)\n"
	       "    -o compact=SEC         writable mount: pack committed checkpoints every SEC\n"
	       "                           seconds after a commit, removing the raw files of all\n"
	       "                           but the newest of each series (default 60; 0 = never)\n"
	       "    -o weights_shard=BYTES MNT/.ckptfs/weights/ serves model weights larger than\n"
	       "                           this as shards with an index (default 5000000000)\n"
	       "    -o direct_io=WHICH     committed files read without the page cache: none\n"
	       "                           (default), torch (torch.save files) or all\n"
	       "    -o passthrough|nopassthrough  let the kernel read files served as they\n"
	       "                           were saved straight from the store (Linux 6.9+, as\n"
	       "                           root; default passthrough)\n"
	       "    -o warmup|nowarmup     build the composites of each series' newest\n"
	       "                           checkpoint as soon as the mount is live (default warmup)\n"
	       "    -o preload=MiB|auto    with warmup: check and copy up to MiB of those files\n"
	       "                           that the daemon serves into the kernel's page cache,\n"
	       "                           so that a resume's first load reads cached pages\n"
	       "                           (default auto: a quarter of the available memory;\n"
	       "                           0 = none)\n"
	       "    -o materialize|nomaterialize  with preload and passthrough: write each such\n"
	       "                           file instead into an unnamed file on a local disk,\n"
	       "                           which the kernel then reads itself (default\n"
	       "                           materialize)\n"
	       "    -o materialize_dir=DIR where (default: the store's directory, unless it is\n"
	       "                           on a network or distributed filesystem)\n"
	       "    -o permissions|nopermissions  check every access against the owners and\n"
	       "                           modes of the files checkpoints are made of, as a\n"
	       "                           local filesystem does (default permissions);\n"
	       "                           nopermissions lets whoever reaches the mount read,\n"
	       "                           write and delete everything\n"
	       "    -o health=nvml|none    watch the GPUs through NVML (loaded at run time) and\n"
	       "                           ask trainers for emergency checkpoints: a flag file\n"
	       "                           in each series written through the mount, and\n"
	       "                           MNT/.ckptfs/health.json (default none)\n"
	       "    -o health_interval=SEC seconds between GPU samples (default 10)\n"
	       "    -o risk_threshold=X    a GPU risk score at or above X raises the flags\n"
	       "                           (0 < X <= 1, default 0.95)\n"
	       "    -o emergency_gap=F     no flag while a series' newest checkpoint is younger\n"
	       "                           than F times its save interval (default 0.25)\n"
	       "    -o emergency_flag=NAME the flag's file name (default trigger_checkpoint.flag)\n"
	       "    -o log_level=LEVEL     err, warn, info (default) or debug\n"
	       "    -o attr_timeout=SEC    attribute cache time (default 3600: files are immutable)\n"
	       "    -o entry_timeout=SEC   name cache time (default 3600)\n"
	       "    -o max_threads=N       worker threads (default 10)\n"
	       "    -o max_idle_threads=N  idle workers kept (default: max_threads)\n"
	       "    -o clone_fd|noclone_fd one /dev/fuse descriptor per worker (default clone_fd)\n"
	       "    -o io_uring|noio_uring take requests through one ring per CPU where the kernel\n"
	       "                           offers FUSE over io_uring (Linux 6.14+, the fuse\n"
	       "                           module's enable_uring=Y; default noio_uring)\n"
	       "    -o uring_threads=N     threads serving each CPU's ring (default 2)\n"
	       "    -o pidfile=PATH        write the daemon's pid to PATH (removed on exit)\n"
	       "    -o index_dir=DIR       where this node keeps the index of a store on a network\n"
	       "                           or distributed filesystem (default /var/cache/ckptfs)\n"
	       "    -o readahead_kb=N      as root, set this mount's read_ahead_kb (default 4096;\n"
	       "                           0 keeps the kernel's)\n"
	       "    -o pipe_max_kb=N       as root, raise fs.pipe-max-size to N KiB if lower, so\n"
	       "                           1 MiB replies can be spliced (default 2048; 0 = leave)\n"
	       "\n",
	       progname);
	print_ignored_opts();
	printf("    /store  /mnt/ckpt  fuse.ckptfs  ro,allow_other  0 0\n"
	       "See ckptfs(1) and mount.ckptfs(8).\n");
}

void ckfs_print_version(void)
{
	printf("ckptfs %s\n", PACKAGE_VERSION);
	printf("FUSE library version %s\n", fuse_pkgversion());
}
