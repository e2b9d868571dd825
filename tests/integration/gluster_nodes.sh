#!/bin/sh
# One store on a GlusterFS volume (replica 2), two client mounts standing
# for two nodes, each with its own node-local index (-o index_dir=,
# ckptctl --index-dir).  A trainer on node A saves through a writable
# mount there; node B's read-only mount (refresh=1) shows every new
# checkpoint and serves it bit-exactly, a fresh mount on node B and
# `ckptctl ls` on both nodes agree, a third node builds its index from the
# manifests, and no LMDB environment is ever made on the volume.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
. "$CKPT_SRCDIR/tests/integration/gluster.sh"
need_fuse
need_torch
need_gluster
tmp=$(ck_tmpdir)
ck_gluster ckptnodes
sa=$node_a/store sb=$node_b/store
ia=$tmp/index-a ib=$tmp/index-b ic=$tmp/index-c
ma=$tmp/mnt-a mb=$tmp/mnt-b plain=$tmp/plain
ctl_a() { "$CKPTCTL" --index-dir "$ia" "$@"; }
ctl_b() { "$CKPTCTL" --index-dir "$ib" "$@"; }
check() { ck_py packs_check.py "$@"; }

# ls_agree: the two nodes list the same checkpoints now.
ls_agree() {
	ctl_a ls "$sa" run >"$tmp/ls.a" || fail "ckptctl ls on node A"
	ctl_b ls "$sb" run >"$tmp/ls.b" || fail "ckptctl ls on node B"
	cmp -s "$tmp/ls.a" "$tmp/ls.b"
}

# ls_same: the two nodes come to list the same checkpoints.  A node applies
# another's journal entry only once the files it names look on this client
# as their writer left them, which GlusterFS's client caches may delay by a
# second or so: a deletion's last entries (the reclaim, the record's
# removal) can reach node A's index a moment after the mount hid it.
ls_same() {
	ck_until 30 ls_agree || { diff "$tmp/ls.a" "$tmp/ls.b" >&2; fail "ckptctl ls differs between the nodes"; }
}

# visible_on_b NAME: waits for node B's mount to show run/NAME.
visible_on_b() {
	i=0
	while [ ! -e "$mb/run/$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
	[ -e "$mb/run/$1" ] || fail "node B does not show run/$1 after 30 s"
	echo "node B shows run/$1 after about $((i / 10)).$((i % 10)) s"
}

ctl_a init "$sa"
[ -f "$sb/ckptfs-store" ] || fail "node B does not see the store node A made"
ck_mount "$sa" "$ma" -o compact=0,index_dir="$ia"
mkdir "$ma/run"
check train "$ma/run" "$plain" 1 1
ck_mount "$sb" "$mb" -o ro,refresh=1,index_dir="$ib"
check same "$mb/run" "$plain"

# New checkpoints saved on node A appear on node B while it is mounted.
check train "$ma/run" "$plain" 2 3
visible_on_b step-15
check same "$mb/run" "$plain"
ls_same

# A fresh mount on node B, and a node that never saw the store.
ck_umount "$mb"
ck_mount "$sb" "$mb" -o ro,refresh=1,index_dir="$ib"
check same "$mb/run" "$plain"
"$CKPTCTL" --index-dir "$ic" ls "$sb" run >"$tmp/ls.c" || fail "ckptctl ls on node C"
ctl_a ls "$sa" run >"$tmp/ls.a"
diff "$tmp/ls.a" "$tmp/ls.c" >&2 || fail "node C lists other checkpoints than node A"

# A deletion on node B reaches node A's mount and index.
ctl_b rm "$sb" run/step-5 >/dev/null || fail "ckptctl rm on node B"
ck_until 30 test ! -e "$ma/run/step-5" || fail "node A still shows run/step-5, deleted on node B"
ls_same
ck_umount "$ma"
ck_umount "$mb"

# The index lives on the nodes, never on the shared filesystem.
[ ! -e "$sa/index" ] || fail "an LMDB environment was made on the shared filesystem"
find "$sa" -name '*.mdb' | grep -q . && fail "LMDB files on the shared filesystem: $(find "$sa" -name '*.mdb')"
ls "$ia"/*/index/data.mdb "$ib"/*/index/data.mdb >/dev/null || fail "no node-local index"
echo "gluster_nodes: ok"
