#!/bin/sh
# Deleting committed checkpoints, as HF's save_total_limit rotation does it
# (shutil.rmtree through the writable mount) and as an operator does it
# (ckptctl rm while mounted), with torch 1.13:
#   checkpoint-10 (full, with config.json), -20 (odd blocks), -30 (even
#   blocks), each with its whole scheduler.pt and trainer_state.json;
#   rm -r checkpoint-10: not listed, ENOENT, -20 and -30 still load as the
#   offline merge of the original saves; what they draw from -10 stays on
#   disk, what they do not (its scheduler.pt, trainer_state.json) goes;
#   ckptctl rm checkpoint-20 while mounted: the mount follows within its
#   refresh interval; -30 unchanged;
#   checkpoint-40 (odd blocks), then rm -r checkpoint-30: -20 has nothing
#   left that anything draws from and goes altogether; -10 and -30 keep
#   what -40 still takes (values, and -10's key order);
#   ckptctl verify passes; a reindex from the manifests (index deleted)
#   lists the same; a fresh -o ro mount serves -40 and refuses unlink and
#   rmdir (EROFS); names hidden by unlink come back after a remount.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store
mnt=$tmp/mnt
data=$store/data/run
check() { ck_py delete_check.py "$@"; }
merge() { ck_py offline_merge.py "$@" >/dev/null || fail "offline merge into $1"; }
listing() { ls "$mnt/run" | tr '\n' ' '; }

# save NAME STEP WHICH [config]: saved through the mount, committed by rename.
save() {
	check save "$mnt/run" "$1" "$tmp/plain" "$2" "$3" ${4:-}
	mv "$mnt/run/tmp-$1" "$mnt/run/$1" || fail "commit of $1 failed"
}

# on_disk CKPT FILE...: each file is still under STORE/data/run/CKPT.
on_disk() {
	_od=$1
	shift
	for _f in "$@"; do
		[ -f "$data/$_od/$_f" ] || fail "$_od/$_f was unlinked, but a composite still draws from it"
	done
}

# freed CKPT FILE...: each file is gone from STORE/data/run/CKPT.
freed() {
	_fr=$1
	shift
	for _f in "$@"; do
		[ ! -e "$data/$_fr/$_f" ] || fail "$_fr/$_f is still on disk, but nothing draws from it"
	done
}

"$CKPTCTL" init "$store" >/dev/null
# compact=0: this test is about which raw files deletion keeps; the daemon's
# compactor (every 60 s) may pack and drop them on a slow run
# (packs_delete.sh covers deletion with packs).
ck_mount "$store" "$mnt" -o refresh=1,compact=0
mkdir "$mnt/run"
save checkpoint-10 10 full config
save checkpoint-20 20 odd
save checkpoint-30 30 even
p=$tmp/plain
merge "$tmp/m20" "$p/checkpoint-10" "$p/checkpoint-20"
merge "$tmp/m30" "$p/checkpoint-10" "$p/checkpoint-20" "$p/checkpoint-30"
check same "$mnt/run/checkpoint-30" "$tmp/m30"

# HF rotation: rm -r checkpoint-10.
check rmtree "$mnt/run/checkpoint-10"
[ "$(listing)" = "checkpoint-20 checkpoint-30 " ] || fail "listing after rm -r: $(listing)"
check same "$mnt/run/checkpoint-20" "$tmp/m20"
check same "$mnt/run/checkpoint-30" "$tmp/m30"
on_disk checkpoint-10 pytorch_model.bin optimizer.pt config.json
freed checkpoint-10 scheduler.pt trainer_state.json
"$CKPTCTL" ls "$store" run >"$tmp/ls.out"
cat "$tmp/ls.out"
grep -q "checkpoint-10 .*deleted" "$tmp/ls.out" || fail "ckptctl ls does not show checkpoint-10 deleted"
"$CKPTCTL" stats "$store" run >"$tmp/stats.out" || fail "ckptctl stats with a deleted checkpoint"
grep -q "checkpoint-10" "$tmp/stats.out" && fail "ckptctl stats reports the deleted checkpoint-10"
grep -q "checkpoint-30" "$tmp/stats.out" || fail "ckptctl stats lost checkpoint-30"

# ckptctl rm while mounted: the mount follows within its refresh interval.
ls "$mnt/run/checkpoint-20" >/dev/null
"$CKPTCTL" rm "$store" run/checkpoint-20 >"$tmp/rm.out" || fail "ckptctl rm exited $?"
cat "$tmp/rm.out"
grep -q "^hidden  *run/checkpoint-20" "$tmp/rm.out" || fail "ckptctl rm did not say what it hid"
ck_until 10 test ! -e "$mnt/run/checkpoint-20" || fail "the mount still finds checkpoint-20 after 10 s"
[ "$(listing)" = "checkpoint-30 " ] || fail "listing after ckptctl rm: $(listing)"
check same "$mnt/run/checkpoint-30" "$tmp/m30"
on_disk checkpoint-10 pytorch_model.bin optimizer.pt config.json
on_disk checkpoint-20 pytorch_model.bin optimizer.pt
freed checkpoint-20 scheduler.pt trainer_state.json

# A newer partial save, then rm -r checkpoint-30: -20's blocks are all
# replaced by -40's, so -20 goes altogether; -10 keeps the key order.
save checkpoint-40 40 odd
merge "$tmp/m40" "$p/checkpoint-10" "$p/checkpoint-20" "$p/checkpoint-30" "$p/checkpoint-40"
check rmtree "$mnt/run/checkpoint-30"
[ "$(listing)" = "checkpoint-40 " ] || fail "listing: $(listing)"
check same "$mnt/run/checkpoint-40" "$tmp/m40"
[ ! -e "$data/checkpoint-20" ] || fail "checkpoint-20 is still on disk: $(ls "$data/checkpoint-20")"
[ ! -e "$store/manifests/run/checkpoint-20.manifest" ] || fail "checkpoint-20 still has a manifest"
on_disk checkpoint-10 pytorch_model.bin optimizer.pt config.json
on_disk checkpoint-30 pytorch_model.bin optimizer.pt
freed checkpoint-30 scheduler.pt trainer_state.json
"$CKPTCTL" verify "$store" || fail "ckptctl verify after the deletions"

# The manifests and tombstones rebuild the same index.
"$CKPTCTL" ls "$store" run >"$tmp/before"
ck_umount "$mnt"
rm -rf "$store/index"
"$CKPTCTL" reindex "$store" || fail "reindex"
"$CKPTCTL" ls "$store" run >"$tmp/after"
cmp "$tmp/before" "$tmp/after" || fail "reindex lists $(cat "$tmp/after") instead of $(cat "$tmp/before")"

# A fresh read-only mount: the same, and EROFS for rm.
ck_mount "$store" "$tmp/ro" -o ro
[ "$(ls "$tmp/ro/run" | tr '\n' ' ')" = "checkpoint-40 " ] || fail "ro listing: $(ls "$tmp/ro/run")"
check same "$tmp/ro/run/checkpoint-40" "$tmp/m40"
check erofs "$tmp/ro/run/checkpoint-40"
ck_umount "$tmp/ro"

# Hiding is in memory: a remount shows the names again, the checkpoint intact.
ck_mount "$store" "$mnt" -o compact=0
rm "$mnt/run/checkpoint-40/trainer_state.json" || fail "rm of a committed file"
[ ! -e "$mnt/run/checkpoint-40/trainer_state.json" ] || fail "an unlinked name is still found"
rmdir "$mnt/run/checkpoint-40" 2>/dev/null && fail "rmdir of a checkpoint that still shows files succeeded"
ck_umount "$mnt"
ck_mount "$store" "$mnt" -o compact=0
check same "$mnt/run/checkpoint-40" "$tmp/m40"
ck_umount "$mnt"
echo "PASS: deletions hide, keep what composites draw from, reclaim the rest"
