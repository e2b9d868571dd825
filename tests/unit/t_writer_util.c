/* What the writer layer's tests share (t_writer_util.h). */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "ckptfs/error.h"
#include "ckptfs/store.h"
#include "t_writer_util.h"
#include "testutil.h"

void tw_init(struct tw_env *e, const char *name)
{
	struct ck_error err = { { 0 } };
	const char *t = getenv("TMPDIR");

	memset(e, 0, sizeof(*e));
	pthread_mutex_init(&e->lock, NULL);
	pathf(e->tmp, sizeof(e->tmp), "%s/%s.XXXXXX", t && *t ? t : "/tmp", name);
	SETUP(mkdtemp(e->tmp));
	pathf(e->store, sizeof(e->store), "%s/store", e->tmp);
	SETUP(ck_store_init(e->store, &err) == 0);
}

void tw_open_view(struct tw_env *e)
{
	struct ck_error err = { { 0 } };

	SETUP(ck_view_open(e->store, NULL, &e->view, &err) == 0);
}

void tw_cleanup(struct tw_env *e)
{
	char cmd[400];

	if (e->view)
		ck_view_close(e->view);
	e->view = NULL;
	SETUP(run_command(pathf(cmd, sizeof(cmd), "rm -rf '%s'", e->tmp), NULL) == 0);
	pthread_mutex_destroy(&e->lock);
}

static void copy_name(char *dst, const char *src)
{
	snprintf(dst, 256, "%s", src ? src : "(null)");
}

static void on_inodes(void *ctx, const uint64_t *inos, size_t n)
{
	struct tw_env *e = ctx;

	(void)inos;
	(void)n;
	pthread_mutex_lock(&e->lock);
	e->inodes_calls++;
	pthread_mutex_unlock(&e->lock);
}

static void on_names(void *ctx, const char *series, const char *old_name, const char *new_name)
{
	struct tw_env *e = ctx;

	pthread_mutex_lock(&e->lock);
	e->names_calls++;
	copy_name(e->names_series, series);
	copy_name(e->names_old, old_name);
	copy_name(e->names_new, new_name);
	pthread_mutex_unlock(&e->lock);
}

struct ck_writer_notify tw_notify(struct tw_env *e)
{
	struct ck_writer_notify n = { e, on_inodes, on_names, NULL };

	return n;
}

const char *tw_path(const struct tw_env *e, char *buf, size_t size, const char *rel)
{
	return pathf(buf, size, "%s/%s", e->store, rel);
}

int tw_exists(const struct tw_env *e, const char *rel)
{
	char p[1024];
	struct stat sb;

	return lstat(tw_path(e, p, sizeof(p), rel), &sb) == 0;
}

void tw_mkdirs(const struct tw_env *e, const char *rel)
{
	char p[1024], cmd[1100];

	tw_path(e, p, sizeof(p), rel);
	SETUP(run_command(pathf(cmd, sizeof(cmd), "mkdir -p '%s'", p), NULL) == 0);
}

void tw_safetensors(const struct tw_env *e, const char *rel, size_t cut)
{
	static const char header[] = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
	unsigned char file[8 + sizeof(header) - 1 + 16];
	uint64_t hlen = sizeof(header) - 1;
	char p[1024];

	for (int i = 0; i < 8; i++)
		file[i] = (unsigned char)(hlen >> (8 * i));
	memcpy(file + 8, header, hlen);
	for (int i = 0; i < 16; i++)
		file[8 + hlen + (size_t)i] = (unsigned char)(i * 7);
	SETUP(cut < sizeof(file));
	write_bytes(tw_path(e, p, sizeof(p), rel), file, sizeof(file) - cut);
}

void tw_text(const struct tw_env *e, const char *rel, const char *text)
{
	char p[1024];

	write_bytes(tw_path(e, p, sizeof(p), rel), text, strlen(text));
}

/* A real DCP save of one tensor (torch 1.13, tests/unit/data/dcp/one-tensor):
 * the commit checks what its .metadata names. */
void tw_dcp(const struct tw_env *e, const char *rel)
{
	static const char *const names[] = { "__0_0.distcp", ".metadata" };
	const char *srcdir = getenv("CKPT_SRCDIR") ? getenv("CKPT_SRCDIR") : ".";
	char p[1024], r[600], src[1024];

	tw_mkdirs(e, rel);
	for (size_t i = 0; i < 2; i++) {
		size_t len;
		uint8_t *data = read_file(pathf(src, sizeof(src), "%s/tests/unit/data/dcp/one-tensor/%s", srcdir,
						names[i]), &len);

		SETUP(data);
		write_bytes(tw_path(e, p, sizeof(p), pathf(r, sizeof(r), "%s/%s", rel, names[i])), data, len);
		free(data);
	}
}

static struct timespec age_to[2];

static int age_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	SETUP(utimensat(AT_FDCWD, path, age_to, AT_SYMLINK_NOFOLLOW) == 0);
	return 0;
}

void tw_age(const struct tw_env *e, const char *rel, int64_t delta_s)
{
	char p[1024];

	age_to[0].tv_sec = age_to[1].tv_sec = time(NULL) + delta_s;
	age_to[0].tv_nsec = age_to[1].tv_nsec = 0;
	/* Depth first: a directory's mtime is set after its entries'. */
	SETUP(nftw(tw_path(e, p, sizeof(p), rel), age_one, 16, FTW_PHYS | FTW_DEPTH) == 0);
}

int tw_in_view(struct tw_env *e, const char *path)
{
	const struct ck_vnode *n;

	return ck_view_resolve(e->view, path, &n) == 0;
}

int tw_wait_for(int (*cond)(void *arg), void *arg)
{
	struct timespec tick = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 6000; i++) {
		if (cond(arg))
			return 1;
		nanosleep(&tick, NULL);
	}
	return cond(arg);
}
