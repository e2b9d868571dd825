/* What the writer layer's tests share (t_writer_*.c): a real store in a
 * temporary directory with a view over it, staged files written as a
 * trainer would, a recorder of the writer's notifications, and waiting
 * for something to happen without assuming how fast. */
#ifndef CKPTFS_T_WRITER_UTIL_H
#define CKPTFS_T_WRITER_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ckptfs/view.h"
#include "ckptfs/writer.h"

struct tw_env {
	char tmp[256];          /* removed by tw_cleanup */
	char store[300];
	struct ck_view *view;   /* NULL until tw_open_view */
	/* The notifications received (any thread). */
	pthread_mutex_t lock;
	unsigned inodes_calls;
	unsigned names_calls;
	char names_series[256], names_old[256], names_new[256];
};

/* A new store in a new temporary directory (name: the test's). */
void tw_init(struct tw_env *e, const char *name);
/* Opens the view over the store (after any import: one LMDB environment
 * per process). */
void tw_open_view(struct tw_env *e);
/* Closes the view and removes the temporary directory. */
void tw_cleanup(struct tw_env *e);
/* Callbacks that record into e. */
struct ck_writer_notify tw_notify(struct tw_env *e);

/* STORE/rel as a path, in buf. */
const char *tw_path(const struct tw_env *e, char *buf, size_t size, const char *rel);
/* Whether STORE/rel exists. */
int tw_exists(const struct tw_env *e, const char *rel);
/* mkdir -p STORE/rel. */
void tw_mkdirs(const struct tw_env *e, const char *rel);
/* STORE/rel: a small valid safetensors file (one F32 tensor of 4), cut by
 * `cut` bytes when cut > 0 (then it does not parse). */
void tw_safetensors(const struct tw_env *e, const char *rel, size_t cut);
/* STORE/rel holding text. */
void tw_text(const struct tw_env *e, const char *rel, const char *text);
/* A complete DCP checkpoint in STORE/rel/: .metadata naming __0_0.distcp,
 * and that file. */
void tw_dcp(const struct tw_env *e, const char *rel);
/* Sets the mtime of STORE/rel and of everything under it to now + delta_s. */
void tw_age(const struct tw_env *e, const char *rel, int64_t delta_s);
/* Whether the view shows path ("series/ckpt") now (no refresh: the writer
 * lets it catch up after each commit). */
int tw_in_view(struct tw_env *e, const char *path);
/* Polls cond(arg) every 20 ms for up to 120 s: 1 when it held. */
int tw_wait_for(int (*cond)(void *arg), void *arg);

#endif
