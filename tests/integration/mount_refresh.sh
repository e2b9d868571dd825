#!/bin/sh
# A running mount follows the store: a checkpoint imported after the mount
# (the eval box browsing while training goes on) appears within the refresh
# interval, with its composite merged from the checkpoints already there,
# and so does a new series, and the composites of the new newest
# checkpoints are built by the refresh (warm-up).  Without -o refresh it
# stays hidden.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

"$TORCH_PYTHON" - "$tmp" <<'PY'
import os, sys, torch
top = sys.argv[1]
torch.manual_seed(0)
full = {"layers.%d.weight" % i: torch.randn(8, 8) for i in range(4)}
for step, keys in ((10, sorted(full)), (20, ["layers.1.weight", "layers.3.weight"])):
    d = os.path.join(top, "run", "checkpoint-%d" % step)
    os.makedirs(d)
    torch.save({k: full[k] + step for k in keys}, os.path.join(d, "model.pt"))
os.makedirs(os.path.join(top, "other", "step_5"))
torch.save({"w": torch.ones(3)}, os.path.join(top, "other", "step_5", "w.pt"))
PY
"$CKPTCTL" init "$tmp/store"
"$CKPTCTL" import "$tmp/store" "$tmp/run/checkpoint-10"

ck_mount "$tmp/store" "$tmp/mnt" -o ro,refresh=1
ck_mount "$tmp/store" "$tmp/frozen" -o ro,refresh=0
# A third in the foreground with its debug log: the warm-up at mount
# builds the newest checkpoint's composites, and a refresh that finds new
# newest checkpoints builds theirs before anyone opens them.
mkdir -p "$tmp/warm"
ck_track "$tmp/warm"
"$CKPTFS" "$tmp/store" "$tmp/warm" -f -o ro,refresh=1,log_level=debug 2>"$tmp/warm.log" &
i=0
until is_mounted "$tmp/warm" && grep -q "warm-up: " "$tmp/warm.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "no warm-up at mount: $(cat "$tmp/warm.log")"
	sleep 0.1
done
grep -q "warm-up: 1 files" "$tmp/warm.log" || fail "warm-up at mount: $(grep warm-up "$tmp/warm.log")"
[ "$(ls "$tmp/mnt/run")" = "checkpoint-10" ] || fail "unexpected listing: $(ls "$tmp/mnt/run")"

"$CKPTCTL" import "$tmp/store" "$tmp/run/checkpoint-20"
"$CKPTCTL" import "$tmp/store" "$tmp/other"
i=0
until [ -e "$tmp/mnt/run/checkpoint-20/model.pt" ] && [ -e "$tmp/mnt/other/step_5/w.pt" ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "new checkpoints did not appear within 10 s: $(ls "$tmp/mnt/run" "$tmp/mnt")"
	sleep 0.1
done
echo "appeared after about $((i / 10)).$((i % 10)) s"
i=0
until grep -q "warm-up: 2 files" "$tmp/warm.log"; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "the refresh did not warm the new newest checkpoints: $(grep warm-up "$tmp/warm.log")"
	sleep 0.1
done
[ "$(ls "$tmp/mnt/run" | tr '\n' ' ')" = "checkpoint-10 checkpoint-20 " ] ||
	fail "listing after refresh: $(ls "$tmp/mnt/run")"
[ "$(ls "$tmp/mnt" | tr '\n' ' ')" = "other run " ] || fail "root listing after refresh: $(ls "$tmp/mnt")"
"$TORCH_PYTHON" - "$tmp/run" "$tmp/mnt/run/checkpoint-20/model.pt" <<'PY'
import sys, torch
run, path = sys.argv[1], sys.argv[2]
old = torch.load(run + "/checkpoint-10/model.pt")
new = torch.load(run + "/checkpoint-20/model.pt")
got = torch.load(path)
assert list(got) == list(old), list(got)
for k in got:
    want = new.get(k, old[k])
    assert torch.equal(got[k], want), k
print("checkpoint-20 imported while mounted is the merged composite")
PY
[ -e "$tmp/frozen/run/checkpoint-20" ] && fail "refresh=0 mount showed a new checkpoint"
ck_umount "$tmp/mnt"
ck_umount "$tmp/frozen"
