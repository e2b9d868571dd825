/* The parse at last close (src/writer/indexer.h) without a mount: a
 * parse is kept by the file's identity, so a renamed file keeps it and a
 * file replaced under the same name does not; a changed file says so; a
 * file that does not parse says why; forgetting a directory drops its
 * parses; a forked child finds them without locks. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "ckptfs/error.h"
#include "ckptfs/layers.h"
#include "ckptfs/store.h"
#include "t_writer_util.h"
#include "testutil.h"
#include "writer/indexer.h"

static struct tw_env env;

/* The state text of STORE/rel. */
static char *state(struct ckw_indexer *ix, const char *rel)
{
	struct ck_buf b = CK_BUF_INIT;
	char p[1024];

	SETUP(ckw_indexer_state(ix, tw_path(&env, p, sizeof(p), rel), &b) == 0 && ck_buf_putc(&b, '\0') == 0);
	return (char *)ck_buf_steal(&b, NULL);
}

static void expect_state(struct ckw_indexer *ix, const char *rel, const char *want)
{
	char *got = state(ix, rel);

	CHECK(strncmp(got, want, strlen(want)) == 0, "state of %s: '%s', expected '%s...'", rel, got, want);
	free(got);
}

static const struct ck_preparsed *kept(struct ckw_indexer *ix, const char *rel)
{
	char p[1024];

	return ckw_indexer_find_in_child(ix, tw_path(&env, p, sizeof(p), rel));
}

int main(void)
{
	struct ck_error err = { { 0 } };
	struct ck_layer_rules *rules;
	struct ckw_indexer *ix;
	struct stat sb;
	char a[1024], b[1024], dir[1024];
	int status;
	pid_t pid;

	tw_init(&env, "t_writer_indexer");
	SETUP(ck_layer_rules_default(&rules, &err) == 0);
	tw_mkdirs(&env, "staging/run/tmp-1");
	tw_safetensors(&env, "staging/run/tmp-1/good.safetensors", 0);
	tw_safetensors(&env, "staging/run/tmp-1/torn.safetensors", 5);
	tw_safetensors(&env, "staging/run/tmp-1/later.safetensors", 0);
	SETUP(ckw_indexer_start(&ix, rules, tw_path(&env, dir, sizeof(dir), "staging")) == 0);

	expect_state(ix, "staging/run/tmp-1/good.safetensors", "in progress: being written");
	CHECK(!kept(ix, "staging/run/tmp-1/good.safetensors"), "a parse kept before any");
	ckw_indexer_enqueue(ix, tw_path(&env, a, sizeof(a), "staging/run/tmp-1/good.safetensors"));
	ckw_indexer_enqueue(ix, tw_path(&env, a, sizeof(a), "staging/run/tmp-1/good.safetensors"));
	ckw_indexer_enqueue(ix, tw_path(&env, a, sizeof(a), "staging/run/tmp-1/torn.safetensors"));
	ckw_indexer_wait(ix, tw_path(&env, dir, sizeof(dir), "staging/run/tmp-1"));
	expect_state(ix, "staging/run/tmp-1/good.safetensors", "in progress: parsed: safetensors, 1 tensors");
	expect_state(ix, "staging/run/tmp-1/torn.safetensors", "in progress: does not parse: ");
	expect_state(ix, "staging/run/tmp-1/later.safetensors", "in progress: being written");

	/* A rename keeps the file's identity, so its parse. */
	SETUP(rename(tw_path(&env, a, sizeof(a), "staging/run/tmp-1/good.safetensors"),
		     tw_path(&env, b, sizeof(b), "staging/run/tmp-1/model.safetensors")) == 0);
	tw_mkdirs(&env, "staging/run/checkpoint-1");
	SETUP(rename(tw_path(&env, a, sizeof(a), "staging/run/tmp-1/model.safetensors"),
		     tw_path(&env, b, sizeof(b), "staging/run/checkpoint-1/model.safetensors")) == 0);
	expect_state(ix, "staging/run/checkpoint-1/model.safetensors", "in progress: parsed: safetensors");
	SETUP(stat(b, &sb) == 0);
	{
		const struct ck_preparsed *p = kept(ix, "staging/run/checkpoint-1/model.safetensors");

		CHECK(p && ck_preparsed_info(p)->ino == (uint64_t)sb.st_ino && ck_preparsed_info(p)->kind ==
		      CK_FILE_SAFETENSORS, "the parse of a renamed file");
	}

	/* A forked child sees the table as it was, without locks. */
	pid = ckw_indexer_fork(ix);
	SETUP(pid >= 0);
	if (pid == 0)
		_exit(kept(ix, "staging/run/checkpoint-1/model.safetensors") ? 0 : 1);
	SETUP(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child found no parse");

	/* Written to since: the parse is no longer the file's. */
	tw_text(&env, "staging/run/checkpoint-1/later.bin", "x");
	{
		FILE *f = fopen(b, "ab");

		SETUP(f && fputc('x', f) != EOF && fclose(f) == 0);
	}
	expect_state(ix, "staging/run/checkpoint-1/model.safetensors", "in progress: changed since its last parse");

	/* Replaced under the same name: another file, no parse. */
	tw_safetensors(&env, "staging/run/tmp-1/new.safetensors", 0);
	SETUP(rename(tw_path(&env, a, sizeof(a), "staging/run/tmp-1/new.safetensors"),
		     tw_path(&env, b, sizeof(b), "staging/run/tmp-1/torn.safetensors")) == 0);
	CHECK(!kept(ix, "staging/run/tmp-1/torn.safetensors"), "a replaced file kept the old file's parse");
	expect_state(ix, "staging/run/tmp-1/torn.safetensors", "in progress: being written");

	/* Forgetting a directory drops what was parsed under it, only. */
	ckw_indexer_enqueue(ix, tw_path(&env, a, sizeof(a), "staging/run/tmp-1/later.safetensors"));
	ckw_indexer_wait(ix, tw_path(&env, dir, sizeof(dir), "staging/run/tmp-1"));
	expect_state(ix, "staging/run/tmp-1/later.safetensors", "in progress: parsed: ");
	/* Parses are filed under where they were parsed: tmp-1. */
	ckw_indexer_forget(ix, tw_path(&env, dir, sizeof(dir), "staging/run/tmp"));
	expect_state(ix, "staging/run/tmp-1/later.safetensors", "in progress: parsed: ");
	ckw_indexer_forget(ix, tw_path(&env, dir, sizeof(dir), "staging/run/tmp-1"));
	expect_state(ix, "staging/run/tmp-1/later.safetensors", "in progress: being written");
	CHECK(!kept(ix, "staging/run/checkpoint-1/model.safetensors"), "a parse under tmp-1 survived its forget");

	/* No indexer: nothing is kept, everything is in progress. */
	expect_state(NULL, "staging/run/tmp-1/later.safetensors", "in progress");
	CHECK(!ckw_indexer_find_in_child(NULL, b), "a NULL indexer found a parse");
	ckw_indexer_enqueue(NULL, b);
	ckw_indexer_wait(NULL, dir);

	ckw_indexer_stop(ix);
	ck_layer_rules_free(rules);
	tw_cleanup(&env);
	return test_result();
}
