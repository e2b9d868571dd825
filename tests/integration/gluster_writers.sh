#!/bin/sh
# Writers on two nodes, the store side: one store on a GlusterFS volume
# mounted by two clients (two nodes).  A checkpoint is written by both
# nodes into its staging directory, each through its own client:
#   - a 2-rank torch.distributed.checkpoint save with torch's own writer,
#     rank 0 (files and .metadata) on node A, rank 1 on node B;
#   - an HF-style save, one shard and the index from node A, the other
#     shard and trainer_state.json from node B.
# Both nodes commit it at the same moment (ckptctl commit on each): it is
# committed exactly once, both exit 0, both nodes list it and load it bit
# for bit through their read-only mounts, and `ckptctl ls` agrees.
# (The writable mounts of several nodes, committing on the marker, build
# on this: docs/design.md, "Writers on many nodes".)
. "$CKPT_SRCDIR/tests/integration/lib.sh"
. "$CKPT_SRCDIR/tests/integration/gluster.sh"
need_fuse
need_torch
need_gluster
"$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null || skip "torch.distributed does not import"
tmp=$(ck_tmpdir)
ck_gluster ckptwriters
sa=$node_a/store sb=$node_b/store
ia=$tmp/index-a ib=$tmp/index-b ma=$tmp/mnt-a mb=$tmp/mnt-b
ctl_a() { "$CKPTCTL" --index-dir "$ia" "$@"; }
ctl_b() { "$CKPTCTL" --index-dir "$ib" "$@"; }
py() { ck_py dcp_nodes.py "$@"; }

# both_commit NAME: ckptctl commit of run/NAME on both nodes at once.
both_commit() {
	ctl_a commit "$sa" "run/$1" >"$tmp/commit.a" 2>&1 &
	a=$!
	ctl_b commit "$sb" "run/$1" >"$tmp/commit.b" 2>&1 &
	b=$!
	wait $a || fail "commit on node A: $(cat "$tmp/commit.a")"
	wait $b || fail "commit on node B: $(cat "$tmp/commit.b")"
	cat "$tmp/commit.a" "$tmp/commit.b"
	[ "$(grep -c "by another process or node" "$tmp/commit.a" "$tmp/commit.b" | awk -F: '{ s += $2 } END { print s }')" -le 1 ] ||
		fail "both commits say the other one committed"
	# (a client may show a name another client renamed away for a second)
	i=0
	while [ -e "$sa/staging/run/$1" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	[ ! -e "$sa/staging/run/$1" ] || fail "run/$1 still staged"
	[ -d "$sa/data/run/$1" ] || fail "run/$1 not under data/"
	[ "$(ls "$sa/data/run" | grep -cx "$1")" = 1 ] || fail "run/$1 committed more than once"
	[ "$(ls "$sa/journal" | wc -l)" -ge 1 ] || fail "no journal entry"
}

# listed NAME: both nodes' mounts show run/NAME, and ckptctl ls agrees.
listed() {
	for m in "$ma" "$mb"; do
		i=0
		while [ ! -e "$m/run/$1" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		[ -e "$m/run/$1" ] || fail "$m does not show run/$1"
	done
	ctl_a ls "$sa" run >"$tmp/ls.a" && ctl_b ls "$sb" run >"$tmp/ls.b" || fail "ckptctl ls"
	diff "$tmp/ls.a" "$tmp/ls.b" >&2 || fail "ckptctl ls differs between the nodes"
}

ctl_a init "$sa"
mkdir -p "$sa/staging/run"
ctl_b ls "$sb" >/dev/null
ck_mount "$sa" "$ma" -o ro,refresh=1,index_dir="$ia"
ck_mount "$sb" "$mb" -o ro,refresh=1,index_dir="$ib"

# --- a 2-rank DCP save, one rank per node ------------------------------------------
py dcp_save "$sa/staging/run/dcp_10" "$sb/staging/run/dcp_10" 10
ls "$sb/staging/run/dcp_10" | grep -q '^__1_' || fail "no file of rank 1"
both_commit dcp_10
listed dcp_10
py dcp_check "$ma/run/dcp_10" 10
py dcp_check "$mb/run/dcp_10" 10

# --- an HF-style save whose files come from both nodes -------------------------------
py hf_half "$sa/staging/run/checkpoint-20" 1 20
py hf_half "$sb/staging/run/checkpoint-20" 2 20
both_commit checkpoint-20
listed checkpoint-20
py hf_check "$ma/run/checkpoint-20" 20
py hf_check "$mb/run/checkpoint-20" 20

# --- a save missing node B's rank: quarantined, listed on neither node -------------
py dcp_save "$sa/staging/run/dcp_30" "$sb/staging/run/dcp_30" 30
rm -f "$sb/staging/run/dcp_30"/__1_*
rc=0
ctl_a commit "$sa" run/dcp_30 >"$tmp/commit.a" 2>&1 || rc=$?
[ $rc = 3 ] || fail "a save without rank 1's files was not quarantined (exit $rc): $(cat "$tmp/commit.a")"
sleep 2
[ ! -e "$ma/run/dcp_30" ] && [ ! -e "$mb/run/dcp_30" ] || fail "a torn save is listed"
ctl_b quarantine "$sb" | grep -q dcp_30 || fail "node B does not see the quarantined save"
ck_umount "$ma"
ck_umount "$mb"
echo "gluster_writers: ok"
