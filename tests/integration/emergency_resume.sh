#!/bin/sh
# Emergency checkpoints end to end: examples/llmtailor_train.py (torch
# 1.13, CPU) writes into a writable mount whose daemon watches the fake
# NVML (-o health=nvml); the test appends an XID error to the trace while
# two trainers, (a) and (b), run side by side.
#  (a) examples/supervisor.py runs the trainer, which answers the flag with
#      a full emergency save and is killed two steps later (the GPU
#      failing); the supervisor asks `ckptctl resume-info`, restarts it from
#      the emergency checkpoint, and the run ends bit-identical to one that
#      never stopped; the emergency checkpoint restores exactly the state
#      the trainer had at its step.
#  (b) --emergency-partial 0.5: the emergency save holds the half of the
#      layers that changed most by `ckptctl stats`, and through the mount it
#      reads back complete, the other layers from the save before it.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store mnt=$tmp/mnt trace=$tmp/trace
LD_LIBRARY_PATH=$CKPT_BUILDDIR/tests/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CKPT_FAKE_NVML_TRACE=$trace
export LD_LIBRARY_PATH CKPT_FAKE_NVML_TRACE
[ -f "$CKPT_BUILDDIR/tests/nvml/libnvidia-ml.so.1" ] || fail "the fake NVML is not built (make check builds it)"
STEPS=40
py() { PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$@"; }
check() { ck_py emergency_check.py "$@"; }
train() { py "$CKPT_SRCDIR/examples/llmtailor_train.py" --steps $STEPS --policy full "$@"; }
# wait_committed DIR: until ckptfs has committed DIR (60 s at most).
wait_committed() {
	ck_until 60 py -c 'import os, sys; os.getxattr(sys.argv[1], "user.ckptfs.step")' "$1" 2>/dev/null ||
		fail "$1 never committed"
}
xid() { echo "gpu=0 xid=48" >>"$trace"; }

echo "gpu=0 name=FakeH100 temp=60 power=300 util=95 memutil=40 used=60000 total=81559" >"$trace"
"$CKPTCTL" init "$store"
ck_mount "$store" "$mnt" -o compact=0,health=nvml,health_interval=1,risk_threshold=0.25
mkdir "$mnt/run" "$mnt/part"   # written through the mount: both get flags

# The reference, alongside (a) and (b): never stopped, a save at every step
# (saving does not change the training).
train --out "$tmp/straight" --save-every 1 >"$tmp/straight.log" 2>&1 &
straight=$!

# (a) and (b) side by side: one XID error raises the flags of both series.
# The resumed run of (a) needs no step delay: its flag has been answered.
py "$CKPT_SRCDIR/examples/supervisor.py" --store "$store" --series run --ckptctl "$CKPTCTL" \
	--settle 20 --quiet 2 --resume-arg=--resume-from --resume-arg='{path}' \
	--resume-arg=--step-delay --resume-arg=0 -- \
	"$TORCH_PYTHON" "$CKPT_SRCDIR/examples/llmtailor_train.py" --steps $STEPS --policy full \
	--save-every 10 --out "$mnt/run" --emergency --kill-after-emergency 2 --step-delay 0.5 \
	>"$tmp/supervisor.log" 2>&1 &
sup=$!
# Python itself in the background, not the py function's subshell: the
# kill below must reach the trainer, or it outlives the test in its files.
# The XID error comes once (a) has committed its checkpoint-10 and (b) its
# checkpoint-10 (two saves, for stats to rank the layers by); both must
# still be training then.  Same step delay for both, 30 steps (15 s) of
# margin each way: on a loaded machine each of them, when the other was
# faster, once finished all 40 steps before the other's checkpoint-10.
PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$CKPT_SRCDIR/examples/llmtailor_train.py" --steps $STEPS --policy full \
	--save-every 5 --out "$mnt/part" \
	--emergency --emergency-partial 0.5 --store "$store" --ckptctl "$CKPTCTL" --step-delay 0.5 \
	>"$tmp/part.log" 2>&1 &
trainer=$!
wait_committed "$mnt/run/checkpoint-10"
wait_committed "$mnt/part/checkpoint-10"
xid

echo "== (b) a partial emergency save of the layers that changed most"
# Only its emergency save matters here: the trainer stops once it committed.
ck_until 60 grep -q "emergency save checkpoint-" "$tmp/part.log" ||
	{ cat "$tmp/part.log"; fail "no emergency save in the partial run"; }
eb=$(sed -n 's/.*emergency save checkpoint-\([0-9]*\) .*/\1/p' "$tmp/part.log" | head -n 1)
wait_committed "$mnt/part/checkpoint-$eb"
kill "$trainer" 2>/dev/null || true
wait "$trainer" || true
sed 's/^/  /' "$tmp/part.log"
grep -q "emergency save checkpoint-$eb .*: everything" "$tmp/part.log" && fail "the emergency save was full"

echo "== (a) supervised: emergency save, killed, resumed"
rc=0
wait $sup || rc=$?
sed 's/^/  /' "$tmp/supervisor.log"
[ $rc = 0 ] || fail "the supervisor exited $rc"
wait $straight || { cat "$tmp/straight.log"; fail "the reference run failed"; }
e=$(sed -n 's/.*emergency save checkpoint-\([0-9]*\) .*/\1/p' "$tmp/supervisor.log" | head -n 1)
[ -n "$e" ] || fail "no emergency save"
[ "$(grep -c 'emergency save' "$tmp/supervisor.log")" = 1 ] || fail "more than one emergency save"
grep -q "NOT committed" "$tmp/supervisor.log" && fail "the emergency save did not commit in time"
grep -q "killing myself (SIGKILL) after step $((e + 2))" "$tmp/supervisor.log" || fail "not killed after step $((e + 2))"
grep -q "supervisor: resuming from run/checkpoint-$e (step $e)" "$tmp/supervisor.log" ||
	fail "the supervisor did not resume from the emergency checkpoint"
grep -q "resumed at step $e from $mnt/run/checkpoint-$e" "$tmp/supervisor.log" || fail "the trainer did not resume at $e"
check emergency "$mnt/run/checkpoint-$e" 0.25 + state "$mnt/run/checkpoint-$e" "$tmp/straight/checkpoint-$e" + \
	same "$mnt/run/checkpoint-$STEPS" "$tmp/straight/checkpoint-$STEPS" + \
	partial "$mnt/part" "$eb" "$tmp/straight" || fail "the emergency checkpoints (see above)"
# The trainer's last save commits by its marker, after the marker's grace.
wait_committed "$mnt/run/checkpoint-$STEPS"
"$CKPTCTL" resume-info "$store" run
"$CKPTCTL" resume-info "$store" run --json >"$tmp/info.json"
py -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["checkpoint"] == "checkpoint-%s" % sys.argv[2], d; assert d["path"] == sys.argv[3], d' \
	"$tmp/info.json" "$STEPS" "$mnt/run/checkpoint-$STEPS" || fail "resume-info at the end: $(cat "$tmp/info.json")"
ck_umount "$mnt"
echo PASS
