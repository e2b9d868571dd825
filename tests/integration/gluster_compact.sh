#!/bin/sh
# Compaction and gc on node A while node B reads: one store on a GlusterFS
# volume mounted by two clients (two nodes).  Node B's read-only mount
# (refresh=1; direct_io=torch,nopassthrough: every read of a torch.save
# file reaches the daemon) loads two old checkpoints over and over,
# checking them bit for bit, while node A packs the store and removes the raw files
# (ckptctl compact --keep-raw 1), then deletes the two oldest checkpoints
# and rewrites the packs their records shared with the others (ckptctl gc).
# Node B never gets an error or other bytes, the raw files and the old
# pack's records are really gone, and both nodes' indexes verify clean.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
. "$CKPT_SRCDIR/tests/integration/gluster.sh"
need_fuse
need_torch
need_gluster
tmp=$(ck_tmpdir)
ck_gluster ckptcompact
sa=$node_a/store sb=$node_b/store
ia=$tmp/index-a ib=$tmp/index-b
ma=$tmp/mnt-a mb=$tmp/mnt-b plain=$tmp/plain
ctl_a() { "$CKPTCTL" --index-dir "$ia" "$@"; }
ctl_b() { "$CKPTCTL" --index-dir "$ib" "$@"; }
check() { ck_py packs_check.py "$@"; }

ctl_a init "$sa"
ck_mount "$sa" "$ma" -o compact=0,index_dir="$ia"
mkdir "$ma/run"
check train "$ma/run" "$plain" 1 5
ck_umount "$ma"

ck_mount "$sb" "$mb" -o ro,refresh=1,direct_io=torch,nopassthrough,index_dir="$ib"
check same "$mb/run" "$plain"
check loop "$mb/run" "$plain" "$tmp/stop" step-15 step-20 >"$tmp/loop.out" 2>&1 &
loop=$!

# Node A packs everything but the newest and removes the raw files; node B
# learns of it at its next refresh, before the raw files go.
ctl_a compact "$sa" --keep-raw 1 --reclaim-delay 2 || fail "compact on node A"
[ ! -e "$sa/data/run/step-15/model.pt" ] || fail "compaction kept the raw files of step-15"
[ -e "$sa/data/run/step-25/model.pt" ] || fail "compaction removed the newest checkpoint's raw files"
packs_before=$(ls "$sa/packs")

# Node A deletes step-5 and step-10 and rewrites every pack with a dead
# byte: the live records of step-15 and step-20 move to a new pack and the
# old one is emptied while node B is reading them.
ctl_a gc "$sa" --keep-last 3 --rewrite-below 100 --reclaim-delay 2 >"$tmp/gc.out" || fail "gc on node A"
cat "$tmp/gc.out"
grep -q "packs: [1-9][0-9]* rewritten" "$tmp/gc.out" || fail "gc rewrote no pack: $(cat "$tmp/gc.out")"
[ "$(ls "$sa/packs")" != "$packs_before" ] || fail "gc made no new pack"
sleep 2   # node B reads on from the new pack
kill -0 $loop 2>/dev/null || fail "node B's reader stopped early: $(cat "$tmp/loop.out")"
touch "$tmp/stop"
wait $loop || fail "node B's reader failed: $(cat "$tmp/loop.out")"
cat "$tmp/loop.out"

[ ! -e "$mb/run/step-5" ] || fail "node B still lists step-5, deleted on node A"
ck_umount "$mb"
rm -rf "$plain/step-5" "$plain/step-10"
ck_mount "$sb" "$mb" -o ro,index_dir="$ib"
check same "$mb/run" "$plain"
ck_umount "$mb"
ctl_a verify "$sa" >"$tmp/v.a" || fail "verify on node A: $(cat "$tmp/v.a")"
ctl_b verify "$sb" >"$tmp/v.b" || fail "verify on node B: $(cat "$tmp/v.b")"
echo "gluster_compact: ok"
