#!/bin/sh
# examples/llmtailor_train.py through a writable mount (torch 1.13, CPU),
# killed with SIGKILL at a random step and resumed from the mount:
#  (a) LLMTailor policy (a full save, then alternating halves of the
#      blocks): the newest committed checkpoint, a composite of partial
#      saves, loads bit-exactly what the offline merge of those saves gives
#      (files, and model/optimizer/scheduler/RNG state restored from them);
#      training resumed from it equals training resumed from the merged copy;
#  (b) full saves: killed and resumed through the mount, the run ends with a
#      final checkpoint bit-identical to an uninterrupted run's.
# EXAMPLE_KILL_A / EXAMPLE_KILL_B (STEP or STEP:save) replay a failing draw.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
STEPS=24 EVERY=4
check() { ck_py example_check.py "$@"; }
train() {
	PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$CKPT_SRCDIR/examples/llmtailor_train.py" \
		--steps $STEPS --save-every $EVERY "$@"
}
# random_kill LOW HIGH: STEP in [LOW, HIGH], with ":save" (die halfway
# through that step's save) for half of the save steps.
random_kill() {
	r=$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')
	step=$(($1 + r % ($2 - $1 + 1)))
	if [ $((step % EVERY)) = 0 ] && [ $((r / 1024 % 2)) = 1 ]; then
		echo "$step:save"
	else
		echo "$step"
	fi
}
# killed_run KILL ARGS...: runs the example until it SIGKILLs itself.
killed_run() {
	_kr_kill=$1
	shift
	set -- --kill-at "${_kr_kill%:save}" "$@"
	[ "${_kr_kill#*:}" = save ] && set -- --kill-in-save "$@"
	_kr_rc=0
	train "$@" || _kr_rc=$?
	[ "$_kr_rc" = 137 ] || fail "the example exited $_kr_rc, expected death by SIGKILL (137)"
}
all_saves() { seq $EVERY $EVERY $STEPS | tr '\n' ' '; }

"$CKPTCTL" init "$tmp/store"
# compact=0: the checks below read the raw saves under STORE/data, which
# the daemon's compactor (every 60 s) packs and drops on a slow run.
ck_mount "$tmp/store" "$tmp/mnt" -o compact=0
mkdir "$tmp/mnt/run" "$tmp/mnt/full"

# (a) Full save at step 4, then only halves (--full-every 8): killed after
# the second save, the newest committed checkpoint is always a composite.
kill_a=${EXAMPLE_KILL_A:-$(random_kill $((2 * EVERY + 1)) $((STEPS - 1)))}
echo "(a) llmtailor policy, killed at step $kill_a"
killed_run "$kill_a" --out "$tmp/mnt/run" --full-every 8
ls "$tmp/mnt/run"
check composite "$tmp/mnt/run" "$tmp/store/data/run" "$tmp/merged"
train --out "$tmp/mnt/run" --full-every 8 --resume
check committed "$tmp/mnt/run" $(all_saves)
resumed=$(sed -n 's/^ *"global_step": \([0-9]*\),*$/\1/p' "$tmp/merged/trainer_state.json")
train --out "$tmp/fromcopy" --full-every 8 --resume-from "$tmp/merged"
pairs=
for s in $(seq $((resumed + EVERY)) $EVERY $STEPS); do
	pairs="$pairs $tmp/store/data/run/checkpoint-$s $tmp/fromcopy/checkpoint-$s"
done
check same $pairs

# (b) Full saves: killed and resumed through the mount = never stopped.
kill_b=${EXAMPLE_KILL_B:-$(random_kill $((EVERY + 1)) $((STEPS - 1)))}
echo "(b) full policy, killed at step $kill_b"
train --out "$tmp/straight" --policy full >/dev/null
killed_run "$kill_b" --out "$tmp/mnt/full" --policy full
train --out "$tmp/mnt/full" --policy full --resume
check committed "$tmp/mnt/full" $(all_saves)
check same "$tmp/mnt/full/checkpoint-$STEPS" "$tmp/straight/checkpoint-$STEPS"
"$CKPTCTL" ls "$tmp/store" full

ck_umount "$tmp/mnt"
