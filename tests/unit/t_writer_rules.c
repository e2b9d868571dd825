/* The commit rules (include/ckptfs/writer_rules.h) without a store: which
 * names are temporary, which renames and setxattr values commit, with the
 * built-in step patterns and with a user's pattern, and what the series
 * markers of Megatron and DeepSpeed name. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckptfs/writer_rules.h"
#include "testutil.h"

/* A user pattern as `ckptctl import --pattern` stores it: it replaces the
 * built-ins. */
#define EPOCHS "^ep([0-9]+)$"

static void test_temp_names(void)
{
	static const char *temp[] = { "tmp", "tmp-checkpoint-20", "tmpx", ".checkpoint-20", ".", "checkpoint-20.tmp" };
	static const char *kept[] = { "checkpoint-20", "x.tmpl", "atmp", "checkpoint-tmp", "global_step9", "tm" };

	for (size_t i = 0; i < sizeof(temp) / sizeof(temp[0]); i++)
		CHECK(ck_rule_is_temp_name(temp[i]), "%s is temporary", temp[i]);
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
		CHECK(!ck_rule_is_temp_name(kept[i]), "%s is not temporary", kept[i]);
}

static void test_commit_renames(void)
{
	/* Built-ins: the target must carry a step; the source must be
	 * temporary or carry none. */
	CHECK(ck_rule_is_commit_rename(NULL, "tmp-checkpoint-20", "checkpoint-20"), "tmp -> step");
	CHECK(ck_rule_is_commit_rename(NULL, ".checkpoint-20", "checkpoint-20"), "dot -> step");
	CHECK(ck_rule_is_commit_rename(NULL, "checkpoint-20.tmp", "checkpoint-20"), ".tmp -> step");
	CHECK(ck_rule_is_commit_rename(NULL, "staging", "global_step20"), "no step -> step");
	CHECK(!ck_rule_is_commit_rename(NULL, "checkpoint-19", "checkpoint-20"), "step -> step is a plain rename");
	CHECK(!ck_rule_is_commit_rename(NULL, "tmp-checkpoint-20", "latest"), "no step in the target");
	CHECK(!ck_rule_is_commit_rename(NULL, "a", "b"), "neither carries a step");
	/* A stored pattern replaces the built-ins. */
	CHECK(ck_rule_is_commit_rename(EPOCHS, "tmp", "ep3"), "pattern: tmp -> ep3");
	CHECK(ck_rule_is_commit_rename(EPOCHS, "checkpoint-3", "ep3"), "pattern: checkpoint-3 has no step");
	CHECK(!ck_rule_is_commit_rename(EPOCHS, "tmp", "checkpoint-3"), "pattern: checkpoint-3 carries none");
	CHECK(!ck_rule_is_commit_rename(EPOCHS, "ep2", "ep3"), "pattern: ep2 carries one");
}

static void expect_target(const char *pattern, const char *dir, const char *value, size_t size,
			  int want_rc, const char *want)
{
	char *final = (char *)"unset";
	int rc = ck_rule_commit_target(pattern, dir, value, size, &final);

	CHECK(rc == want_rc, "commit target of %s with '%.*s': %d, expected %d", dir, (int)size, value, rc,
	      want_rc);
	if (rc == 0 && want_rc == 0)
		CHECK(final && strcmp(final, want) == 0, "commit target of %s with '%.*s': %s, expected %s", dir,
		      (int)size, value, final, want);
	if (rc)
		CHECK(final == NULL, "a failed commit target set a name");
	else
		free(final);
}

static void test_commit_targets(void)
{
	char big[300];

	memset(big, 'a', sizeof(big));
	memcpy(big + sizeof(big) - 13, "checkpoint-99", 13);
	expect_target(NULL, "tmp-1", "checkpoint-5", 12, 0, "checkpoint-5");
	/* Not NUL-terminated: only size bytes count. */
	expect_target(NULL, "tmp-1", "checkpoint-55xyz", 13, 0, "checkpoint-55");
	expect_target(NULL, "checkpoint-7", "1", 1, 0, "checkpoint-7");   /* "1": its own name */
	expect_target(NULL, "checkpoint-7", "", 0, 0, "checkpoint-7");
	expect_target(NULL, "checkpoint-7", "a/checkpoint-8", 14, 0, "checkpoint-7");
	expect_target(NULL, "checkpoint-7", "checkpoint-8\0x", 14, 0, "checkpoint-7");
	expect_target(NULL, "checkpoint-7", big, sizeof(big), 0, "checkpoint-7");   /* over 255 bytes */
	expect_target(NULL, "tmp-1", "1", 1, -EINVAL, NULL);
	expect_target(NULL, "staging", "latest", 6, -EINVAL, NULL);
	expect_target(EPOCHS, "tmp", "ep4", 3, 0, "ep4");
	expect_target(EPOCHS, "ep5", "1", 1, 0, "ep5");
	expect_target(EPOCHS, "tmp", "checkpoint-4", 12, -EINVAL, NULL);
}

static void expect_marker(unsigned kind, const char *text, size_t len, const char *want)
{
	char *got = ck_rule_series_marker_target(kind, text, len);

	if (want)
		CHECK(got && strcmp(got, want) == 0, "marker %u '%.*s': %s, expected %s", kind, (int)len, text,
		      got ? got : "(none)", want);
	else
		CHECK(!got, "marker %u '%.*s' named %s", kind, (int)len, text, got);
	free(got);
}

static void test_series_markers(void)
{
	char long_text[400];

	CHECK(ck_rule_series_marker(CK_MARKER_MEGATRON) == CK_MARK_MEGATRON, "Megatron's marker");
	CHECK(ck_rule_series_marker(CK_MARKER_DEEPSPEED) == CK_MARK_DEEPSPEED, "DeepSpeed's marker");
	CHECK(ck_rule_series_marker("latest.txt") == 0 && ck_rule_series_marker(".metadata") == 0 &&
	      ck_rule_series_marker("trainer_state.json") == 0, "directory markers are not series markers");

	expect_marker(CK_MARK_MEGATRON, "7\n", 2, "iter_0000007");
	expect_marker(CK_MARK_MEGATRON, "1234567", 7, "iter_1234567");
	expect_marker(CK_MARK_MEGATRON, "12345678 \r\n", 11, "iter_12345678");
	expect_marker(CK_MARK_MEGATRON, "release\n", 8, NULL);	/* no step to commit */
	expect_marker(CK_MARK_MEGATRON, " 7", 2, NULL);
	expect_marker(CK_MARK_MEGATRON, "7x", 2, NULL);
	expect_marker(CK_MARK_MEGATRON, "-7", 2, NULL);
	expect_marker(CK_MARK_MEGATRON, "99999999999999999999999", 23, NULL);	/* out of range */
	expect_marker(CK_MARK_MEGATRON, "", 0, NULL);
	expect_marker(CK_MARK_MEGATRON, "\n\n", 2, NULL);
	expect_marker(CK_MARK_DEEPSPEED, "global_step9\n", 13, "global_step9");
	expect_marker(CK_MARK_DEEPSPEED, "global_step9", 12, "global_step9");
	expect_marker(CK_MARK_DEEPSPEED, "../x", 4, NULL);
	expect_marker(CK_MARK_DEEPSPEED, ".hidden", 7, NULL);
	expect_marker(CK_MARK_DEEPSPEED, "a/b", 3, NULL);
	/* Text stops at a NUL byte, and at 255 bytes. */
	expect_marker(CK_MARK_DEEPSPEED, "step5\0junk", 10, "step5");
	memset(long_text, 'x', sizeof(long_text));
	{
		char want[256];

		memset(want, 'x', 255);
		want[255] = '\0';
		expect_marker(CK_MARK_DEEPSPEED, long_text, sizeof(long_text), want);
	}
	expect_marker(0, "7", 1, NULL);
	expect_marker(CK_MARK_HF, "7", 1, NULL);
}

int main(void)
{
	test_temp_names();
	test_commit_renames();
	test_commit_targets();
	test_series_markers();
	return test_result();
}
