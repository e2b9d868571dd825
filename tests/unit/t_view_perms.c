/* Owners and modes of the view (src/view/owners.c), without FUSE: a run
 * whose two checkpoints belong to different users, the newer a partial
 * save, is imported; the view must show each directory and file as it is
 * made, the composite as the rule in docs/design.md says, and
 * ck_view_access must let read a composite only whoever may read every
 * file it draws from.  Then the files change owner and mode on disk (seen
 * at the next open), the older checkpoint's files go away (the recorded
 * owners stand in), and a store from before owners were recorded (version
 * 1 manifests, reindexed) gets them from the files, or from their
 * directory when the files are gone.  Needs root (chown). */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckptfs/log.h"
#include "ckptfs/store.h"
#include "ckptfs/view.h"
#include "store/manifest.h"
#include "testutil.h"

#define ALICE 61001u
#define BOB 61002u
#define CAROL 61003u    /* in group ML */
#define DAVE 61004u     /* in no group */
#define ML 61100u

static char tmp[256], store[300], run[300];

/* A safetensors file of float32 tensors named names[0..n), each of two
 * elements whose values are seed + i. */
static void write_safetensors(const char *path, const char *const *names, size_t n, float seed)
{
	struct ck_buf h = CK_BUF_INIT, out = CK_BUF_INIT;
	uint64_t hlen;

	SETUP(ck_buf_puts(&h, "{") == 0);
	for (size_t i = 0; i < n; i++)
		SETUP(ck_buf_printf(&h, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[%zu,%zu]}",
				    i ? "," : "", names[i], i * 8, i * 8 + 8) == 0);
	SETUP(ck_buf_puts(&h, "}") == 0);
	while (h.len % 8)
		SETUP(ck_buf_putc(&h, ' ') == 0);
	hlen = h.len;
	SETUP(ck_buf_put(&out, &hlen, 8) == 0 && ck_buf_put(&out, h.data, h.len) == 0);
	for (size_t i = 0; i < n; i++) {
		float v[2] = { seed + (float)i, seed - (float)i };

		SETUP(ck_buf_put(&out, v, sizeof(v)) == 0);
	}
	write_bytes(path, out.data, out.len);
	ck_buf_free(&h);
	ck_buf_free(&out);
}

static void own(const char *path, uid_t uid, gid_t gid, mode_t mode)
{
	SETUP(chown(path, uid, gid) == 0 && chmod(path, mode) == 0);
}

static void make_run(void)
{
	static const char *const full[] = { "a", "b" }, *const part[] = { "a" };
	char p[512];

	pathf(run, sizeof(run), "%s/run", tmp);
	SETUP(mkdir(run, 0755) == 0);
	own(run, ALICE, ML, 0755);
	SETUP(mkdir(pathf(p, sizeof(p), "%s/checkpoint-10", run), 0755) == 0);
	own(p, BOB, ML, 0750);
	write_safetensors(pathf(p, sizeof(p), "%s/checkpoint-10/model.safetensors", run), full, 2, 1.0f);
	own(p, BOB, ML, 0640);
	write_bytes(pathf(p, sizeof(p), "%s/checkpoint-10/notes.txt", run), "ten\n", 4);
	own(p, BOB, BOB, 0600);
	SETUP(mkdir(pathf(p, sizeof(p), "%s/checkpoint-20", run), 0755) == 0);
	own(p, ALICE, ML, 0755);
	write_safetensors(pathf(p, sizeof(p), "%s/checkpoint-20/model.safetensors", run), part, 1, 2.0f);
	own(p, ALICE, ML, 0644);
}

static void import_run(void)
{
	struct ck_error err = { { 0 } };
	struct ck_store *st;

	SETUP(ck_store_init(store, &err) == 0);
	SETUP(ck_store_open(store, 0, &st, &err) == 0);
	SETUP(ck_store_import(st, run, NULL, NULL, NULL, &err) == 2);
	ck_store_close(st);
}

static const struct ck_vnode *node(struct ck_view *v, const char *path)
{
	const struct ck_vnode *n = NULL;

	CHECK(ck_view_resolve(v, path, &n) == 0, "%s: not in the view", path);
	return n;
}

static void expect_attr(struct ck_view *v, const char *path, uint32_t uid, uint32_t gid, uint32_t mode)
{
	const struct ck_vnode *n = node(v, path);
	struct ck_vattr a;

	if (!n)
		return;
	CHECK(ck_view_getattr(v, n, &a) == 0, "%s: getattr", path);
	CHECK(a.uid == uid && a.gid == gid && (a.mode & 07777) == mode, "%s: %u:%u %04o, expected %u:%u %04o", path,
	      a.uid, a.gid, (unsigned)a.mode & 07777, uid, gid, mode);
}

static void expect_access(struct ck_view *v, const char *path, uint32_t uid, int mask, int want)
{
	static const uint32_t ml[] = { ML };
	int member = uid == CAROL || uid == ALICE || uid == BOB;
	struct ck_cred c = { uid, uid, member ? ml : NULL, member ? 1 : 0 };
	const struct ck_vnode *n = node(v, path);
	int rc;

	if (!n)
		return;
	rc = ck_view_access(v, n, &c, mask);
	CHECK(rc == want, "%s: uid %u mask %d: %d, expected %d", path, uid, mask, rc, want);
}

/* Opening refreshes what the files' owners and modes are now. */
static void reopen(struct ck_view *v, const char *path)
{
	struct ck_vfile *f;

	if (ck_view_open_file(v, node(v, path), &f) == 0)
		ck_vfile_put(f);
}

static void shown_and_checked(void)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	struct stat sb;
	char p[512];

	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	SETUP(stat(store, &sb) == 0);
	CHECK((sb.st_mode & 07777) == 0700, "ckptctl init made the store %04o", (unsigned)sb.st_mode & 07777);
	expect_attr(v, "", 0, 0, 0755);   /* STORE/data, which init made */
	expect_attr(v, "run", ALICE, ML, 0755);
	expect_attr(v, "run/checkpoint-10", BOB, ML, 0750);
	expect_attr(v, "run/checkpoint-10/model.safetensors", BOB, ML, 0640);
	expect_attr(v, "run/checkpoint-20", ALICE, ML, 0755);
	/* Both versions' bits (0644 & 0640), the newest's owner. */
	expect_attr(v, "run/checkpoint-20/model.safetensors", ALICE, ML, 0640);
	/* Only in the older checkpoint, whose directory others cannot search. */
	expect_attr(v, "run/checkpoint-20/notes.txt", BOB, BOB, 0600);

	expect_access(v, "run/checkpoint-20/model.safetensors", ALICE, CK_MAY_READ, 0);
	expect_access(v, "run/checkpoint-20/model.safetensors", CAROL, CK_MAY_READ, 0);
	expect_access(v, "run/checkpoint-20/model.safetensors", DAVE, CK_MAY_READ, -EACCES);
	expect_access(v, "run/checkpoint-20/model.safetensors", 0, CK_MAY_READ, 0);
	expect_access(v, "run/checkpoint-20/notes.txt", BOB, CK_MAY_READ, 0);
	expect_access(v, "run/checkpoint-20/notes.txt", ALICE, CK_MAY_READ, -EACCES);
	expect_access(v, "run/checkpoint-10", DAVE, CK_MAY_EXEC, -EACCES);
	expect_access(v, "run/checkpoint-10", CAROL, CK_MAY_EXEC, 0);

	/* The older version only its owner may read: nobody but bob (and root)
	 * reads the composite, whatever the newest file grants.  The mode
	 * cannot say that alice may not (she owns the newest), the check does. */
	own(pathf(p, sizeof(p), "%s/checkpoint-10/model.safetensors", run), BOB, ML, 0600);
	reopen(v, "run/checkpoint-20/model.safetensors");
	expect_attr(v, "run/checkpoint-20/model.safetensors", ALICE, ML, 0600);
	expect_access(v, "run/checkpoint-20/model.safetensors", ALICE, CK_MAY_READ, -EACCES);
	expect_access(v, "run/checkpoint-20/model.safetensors", CAROL, CK_MAY_READ, -EACCES);
	expect_access(v, "run/checkpoint-20/model.safetensors", BOB, CK_MAY_READ, -EACCES);
	expect_access(v, "run/checkpoint-10/model.safetensors", CAROL, CK_MAY_READ, -EACCES);
	expect_access(v, "run/checkpoint-20/model.safetensors", 0, CK_MAY_READ, 0);
	ck_view_close(v);

	/* The older checkpoint's files gone (packed, or removed by their
	 * owner): what the index recorded at import stands in. */
	SETUP(unlink(pathf(p, sizeof(p), "%s/checkpoint-10/notes.txt", run)) == 0);
	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	expect_attr(v, "run/checkpoint-10/notes.txt", BOB, BOB, 0600);
	expect_access(v, "run/checkpoint-10/notes.txt", ALICE, CK_MAY_READ, -EACCES);
	ck_view_close(v);
}

/* A store imported before owners were recorded: its manifests rewritten as
 * version 1 and the index rebuilt from them. */
static void before_owners(void)
{
	struct ck_error err = { { 0 } };
	struct ck_view *v;
	char p[512];

	for (int step = 10; step <= 20; step += 10) {
		struct ck_buf text = CK_BUF_INIT;
		struct ck_manifest m;
		char name[32], *path;

		snprintf(name, sizeof(name), "checkpoint-%d", step);
		path = ck_manifest_path(store, "run", name);
		SETUP(path && ck_manifest_load(store, path, &m, &err) == 0);
		m.version = 0;   /* the oldest this can be written in: 1, absolute paths */
		for (size_t i = 0; i < m.nfiles; i++)
			m.files[i].info.has_owner = 0;
		SETUP(ck_manifest_write(&text, &m, &err) == 0);
		SETUP(!memcmp(text.data, "ckptfs-manifest 1\n", 18));
		write_bytes(path, text.data, text.len);
		ck_manifest_clear(&m);
		ck_buf_free(&text);
		free(path);
	}
	SETUP(ck_store_reindex(store, &(struct ck_reindex_opts){ .force = 1 }, NULL, NULL, &err) == 2);
	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	/* Files still there: their owners now. */
	expect_attr(v, "run/checkpoint-20/model.safetensors", ALICE, ML, 0600);
	expect_access(v, "run/checkpoint-20/model.safetensors", DAVE, CK_MAY_READ, -EACCES);
	ck_view_close(v);
	/* Gone: the directory that held it, with its read bits only. */
	SETUP(unlink(pathf(p, sizeof(p), "%s/checkpoint-10/model.safetensors", run)) == 0);
	SETUP(ck_view_open(store, NULL, &v, &err) == 0);
	expect_attr(v, "run/checkpoint-10/model.safetensors", BOB, ML, 0440);
	expect_access(v, "run/checkpoint-10/model.safetensors", CAROL, CK_MAY_READ, 0);
	expect_access(v, "run/checkpoint-10/model.safetensors", DAVE, CK_MAY_READ, -EACCES);
	ck_view_close(v);
}

int main(void)
{
	char cmd[600];

	if (geteuid() != 0) {
		printf("SKIP: needs root to give files to other users\n");
		return 77;
	}
	ck_log_init("t_view_perms", 0, CK_LOG_ERR);
	snprintf(tmp, sizeof(tmp), "%s/t_view_perms.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	SETUP(mkdtemp(tmp));
	pathf(store, sizeof(store), "%s/store", tmp);
	make_run();
	import_run();
	shown_and_checked();
	before_owners();
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	SETUP(system(cmd) == 0);
	return test_result();
}
