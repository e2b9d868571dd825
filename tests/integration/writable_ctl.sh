#!/bin/sh
# One writable mount per store, and ckptctl beside it:
#   - a second writable ckptfs on the same store is refused (naming the
#     pid and mountpoint of the first); a read-only one is fine;
#   - `ckptctl commit` while the mount serves the store goes through the
#     mount (user.ckptfs.commit with the final name): the mount lists the
#     checkpoint at once and serves it; a torn directory is quarantined
#     (exit 3) and stays out of the listing;
#   - the claim dies with the daemon (kill -9): a new mount may take it.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt" -o pidfile="$tmp/pid"
pid=$(cat "$tmp/pid")

mkdir -p "$tmp/mnt2"
ck_track "$tmp/mnt2"
rc=0
"$CKPTFS" "$tmp/store" "$tmp/mnt2" 2>"$tmp/second.err" || rc=$?
cat "$tmp/second.err"
[ $rc = 1 ] || fail "a second writable mount of one store exited $rc"
grep -q "already mounted writable by ckptfs (pid $pid) at $tmp/mnt" "$tmp/second.err" ||
	fail "the refusal does not name the first mount"
ck_mount "$tmp/store" "$tmp/mnt2" -o ro
ck_umount "$tmp/mnt2"

# A save into a temporary name, committed by ckptctl under its final name.
mkdir -p "$tmp/mnt/run/tmp-save" "$tmp/plain"
"$TORCH_PYTHON" - "$tmp/mnt/run/tmp-save" "$tmp/plain" <<'PY' || fail "saving"
import sys, torch
torch.manual_seed(3)
sd = {"w": torch.randn(128, 64), "b": torch.randn(64)}
for d in sys.argv[1:]:
    torch.save(sd, d + "/model.pt")
PY
"$CKPTCTL" commit "$tmp/store" run/tmp-save checkpoint-10 >"$tmp/commit.out" || fail "ckptctl commit exited $?"
cat "$tmp/commit.out"
grep -q "by the mount at $tmp/mnt" "$tmp/commit.out" || fail "ckptctl did not commit through the mount"
[ "$(ls "$tmp/mnt/run")" = checkpoint-10 ] || fail "the mount lists: $(ls "$tmp/mnt/run")"
cmp "$tmp/mnt/run/checkpoint-10/model.pt" "$tmp/plain/model.pt" || fail "checkpoint-10 differs from the save"

# A torn save: quarantined, exit 3, not listed.
mkdir "$tmp/mnt/run/checkpoint-20"
head -c 3000 "$tmp/plain/model.pt" >"$tmp/mnt/run/checkpoint-20/model.pt"
rc=0
"$CKPTCTL" commit "$tmp/store" run/checkpoint-20 || rc=$?
[ $rc = 3 ] || fail "ckptctl commit of a torn directory exited $rc, expected 3"
[ "$(ls "$tmp/mnt/run")" = checkpoint-10 ] || fail "after the quarantine the mount lists: $(ls "$tmp/mnt/run")"
"$CKPTCTL" quarantine "$tmp/store" | grep -q "checkpoint-20" || fail "checkpoint-20 not in the quarantine"

# Resuming from an older checkpoint commits a lower step than the newest:
# the series is reloaded, and later commits keep appearing.
"$TORCH_PYTHON" - "$tmp/mnt/run" <<'PY' || fail "saving out of step order"
import os, sys, torch
run = sys.argv[1]
for step, keys in ((200, ("a", "b")), (150, ("c",)), (300, ("a",))):
    d = "%s/tmp-%d" % (run, step)
    os.mkdir(d)
    torch.save({k: torch.full((4,), float(step)) for k in keys}, d + "/part.pt")
    os.rename(d, "%s/checkpoint-%d" % (run, step))
sd = torch.load(run + "/checkpoint-300/part.pt")
assert sorted(sd) == ["a", "b", "c"], sorted(sd)
assert sd["a"][0] == 300 and sd["b"][0] == 200 and sd["c"][0] == 150, sd
PY
[ "$(ls "$tmp/mnt/run" | tr '\n' ' ')" = "checkpoint-10 checkpoint-150 checkpoint-200 checkpoint-300 " ] ||
	fail "after an out-of-order commit the mount lists: $(ls "$tmp/mnt/run")"

# kill -9: the claim goes with the daemon.
kill -9 "$pid"
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
fusermount3 -uz "$tmp/mnt" 2>/dev/null || true
ck_mount "$tmp/store" "$tmp/mnt"
cmp "$tmp/mnt/run/checkpoint-10/model.pt" "$tmp/plain/model.pt" || fail "checkpoint-10 after the restart"
ck_umount "$tmp/mnt"
"$CKPTCTL" commit "$tmp/store" run/nothing-here 2>/dev/null && fail "commit of a missing directory succeeded"
echo ok
