/* The commit rules of a writable mount (src/writer/rules.c): which names
 * a commit takes, which are temporary, and the completion markers.
 *
 * A directory commits as a checkpoint under a name that carries a step by
 * its series' rules: the pattern stored by `ckptctl import --pattern`, or
 * the built-ins when the series has none (ck_series_step; pattern NULL
 * below means the built-ins).  It commits when
 *   - it is renamed, inside its series directory, to such a name while
 *     its own name has none or is temporary;
 *   - user.ckptfs.commit is set on it (ck_rule_commit_target);
 *   - its completion marker lands (below), or it rests (-o commit_idle):
 *     then under its own name, which must carry a step.
 *
 * Completion markers, the file a trainer writes last:
 *   <series>/<dir>/.metadata            PyTorch DCP; commits at once
 *   <series>/<dir>/trainer_state.json   Hugging Face Trainer; after grace
 *   <series>/<dir>/<name>               user-named (-o commit_markers=); after grace
 *   <series>/latest_checkpointed_iteration.txt
 *                                       Megatron: "N" names iter_%07d; at once
 *   <series>/latest                     DeepSpeed: the tag names the dir; at once
 * The two series markers are the only files a series directory takes.
 *
 * Thread rules: pure functions of their arguments (no I/O), callable from
 * any thread.
 */
#ifndef CKPTFS_WRITER_RULES_H
#define CKPTFS_WRITER_RULES_H

#include <stddef.h>
#include <stdint.h>

/* Kinds of completion marker, for -o commit_markers= (a mask). */
enum {
	CK_MARK_DCP = 1u << 0,        /* DIR/.metadata */
	CK_MARK_HF = 1u << 1,         /* DIR/trainer_state.json */
	CK_MARK_MEGATRON = 1u << 2,   /* SERIES/latest_checkpointed_iteration.txt */
	CK_MARK_DEEPSPEED = 1u << 3,  /* SERIES/latest */
	CK_MARK_ALL = 0xfu,
};

#define CK_MARKER_DCP ".metadata"
#define CK_MARKER_HF "trainer_state.json"
#define CK_MARKER_MEGATRON "latest_checkpointed_iteration.txt"
#define CK_MARKER_DEEPSPEED "latest"

/* Whether name is temporary: "tmp*", ".*" or "*.tmp" ("tmp-checkpoint-20",
 * ".checkpoint-20", "checkpoint-20.tmp").  Temporary directories never
 * commit under their own name; idle commits and rescans skip dot names. */
int ck_rule_is_temp_name(const char *name);

/* Whether renaming an in-progress directory of a series from `from` to
 * `to` commits it: to carries a step and from is temporary or carries
 * none. */
int ck_rule_is_commit_rename(const char *pattern, const char *from, const char *to);

/* The name a commit asked by setxattr user.ckptfs.commit on directory dir
 * takes: the value (size bytes, not NUL-terminated) when it is a name
 * (1..255 bytes, no '/' or NUL) that carries a step, else dir itself when
 * it carries one.  0 and *final (allocated); -EINVAL when neither does
 * (rename the directory instead); -ENOMEM. */
int ck_rule_commit_target(const char *pattern, const char *dir, const char *value, size_t size,
			  char **final);

/* The kind of series marker name is (CK_MARK_MEGATRON, CK_MARK_DEEPSPEED),
 * or 0 when it is none. */
unsigned ck_rule_series_marker(const char *name);

/* The directory a series marker of kind (CK_MARK_MEGATRON or
 * CK_MARK_DEEPSPEED) names, from its first len bytes of text (trailing
 * white space ignored): Megatron's iteration number N becomes
 * "iter_%07d", DeepSpeed's tag is the name itself.  Allocated, or NULL
 * when it names none (empty, a '/', a leading '.', a Megatron text that
 * is not a number such as "release") or memory ran out. */
char *ck_rule_series_marker_target(unsigned kind, const char *text, size_t len);

#endif
