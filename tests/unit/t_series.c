/* Step numbers in checkpoint names: the built-in patterns on names real
 * trainers write, user patterns, and names that must not look like steps. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ckptfs/store.h"

static int failures;

static void expect_step(const char *name, const char *pattern, int64_t want)
{
	int64_t step = -1;
	int rc = ck_series_step(name, pattern, &step);

	if (rc != 0 || step != want) {
		printf("FAIL %s (pattern %s): rc %d step %" PRId64 ", want step %" PRId64 "\n",
		       name, pattern ? pattern : "built-in", rc, step, want);
		failures++;
	}
}

static void expect_none(const char *name, const char *pattern)
{
	int64_t step = -1;
	int rc = ck_series_step(name, pattern, &step);

	if (rc != -ENOENT) {
		printf("FAIL %s (pattern %s): rc %d step %" PRId64 ", want -ENOENT\n",
		       name, pattern ? pattern : "built-in", rc, step);
		failures++;
	}
}

static void builtins(void)
{
	expect_step("checkpoint-500", NULL, 500);
	expect_step("checkpoint-0", NULL, 0);
	expect_step("global_step1200", NULL, 1200);
	expect_step("iter_0000100", NULL, 100);
	expect_step("step_000500", NULL, 500);
	expect_step("step500", NULL, 500);
	expect_step("step-42", NULL, 42);
	expect_step("model_000500.pt", NULL, 500);
	expect_step("ckpt_12.pth", NULL, 12);
	expect_step("weights_7.bin", NULL, 7);
	expect_step("model_000300.safetensors", NULL, 300);
	expect_step("dcp_000500", NULL, 500);
	expect_step("epoch_3", NULL, 3);
	expect_step("epoch=3", NULL, 3);
	expect_step("epoch=2-step=300.ckpt", NULL, 300);
	expect_step("checkpoint-9223372036854775807", NULL, INT64_MAX);

	expect_none("checkpoint-", NULL);
	expect_none("checkpoint-12a", NULL);
	expect_none("tmp-checkpoint-500", NULL);
	expect_none("checkpoint-99999999999999999999", NULL);   /* beyond int64 */
	expect_none("runs", NULL);
	expect_none("latest", NULL);
	expect_none("model.safetensors", NULL);
	expect_none("model-00001-of-00002.safetensors", NULL);
	expect_none("trainer_state.json", NULL);
	expect_none("rng_state_0.pth", NULL);       /* a process rank, not a step */
	expect_none("mp_rank_00_model_states.pt", NULL);
	expect_none("global_step10_universal", NULL);
	expect_none("", NULL);
}

static void user_patterns(void)
{
	struct ck_error err = { { 0 } };

	expect_step("save-0042", "^save-([0-9]+)$", 42);
	expect_step("run.s17.ckpt", "\\.s([0-9]+)\\.", 17);
	expect_none("checkpoint-500", "^save-([0-9]+)$");   /* the user's pattern replaces the built-ins */
	expect_none("save-x", "^save-([0-9]*)x$");          /* an empty group is no step */

	if (ck_series_step("save-1", "save-(", NULL) != -EINVAL) {
		printf("FAIL: NULL step pointer not refused\n");
		failures++;
	}
	if (ck_series_step("save-1", "save-([0-9]+", &(int64_t){ 0 }) != -EINVAL) {
		printf("FAIL: malformed pattern not refused\n");
		failures++;
	}
	if (ck_series_pattern_check("^save-[0-9]+$", &err) != -EINVAL || !strstr(err.msg, "no group")) {
		printf("FAIL: pattern without a group accepted (%s)\n", err.msg);
		failures++;
	}
	if (ck_series_pattern_check("^save-([0-9]+$", &err) != -EINVAL || !strstr(err.msg, "save-")) {
		printf("FAIL: malformed pattern accepted (%s)\n", err.msg);
		failures++;
	}
	if (ck_series_pattern_check("^save-([0-9]+)$", &err) != 0) {
		printf("FAIL: good pattern refused (%s)\n", err.msg);
		failures++;
	}
}

int main(void)
{
	builtins();
	user_patterns();
	if (failures)
		printf("%d failure(s)\n", failures);
	return failures ? 1 : 0;
}
