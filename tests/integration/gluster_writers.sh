#!/bin/sh
# Writers on two nodes: one store on a GlusterFS volume mounted by two
# clients (two nodes), a writable ckptfs over each (its own node-local
# index); a second writable mount with node A's index is refused.
#   - a 2-rank torch.distributed.checkpoint save with torch's own writer,
#     rank 0 through node A's mount, rank 1 through node B's: committed
#     exactly once, loaded bit for bit on both nodes;
#   - an HF-style save whose files come from both nodes, node A still
#     writing its shard when node B's trainer_state.json lands: committed
#     once node A closed it, complete, on both nodes;
#   - a node-B trainer killed (-9) mid-save, then node B's daemon killed
#     mid-save: the save is quarantined on both nodes, never listed; node
#     B's mount comes back, and a save from both nodes commits again;
#   - a listing and a read on node A whose lookups came before node B's
#     commit moved the directory, their opens after, and a lookup and a
#     listing between the move and its journal entry: they wait for the
#     commit and see the committed checkpoint.
# `ckptctl ls` agrees on both nodes throughout; the store verifies clean.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
. "$CKPT_SRCDIR/tests/integration/gluster.sh"
need_fuse
need_torch
need_gluster
"$TORCH_PYTHON" -c 'import torch.distributed' 2>/dev/null || skip "torch.distributed does not import"
tmp=$(ck_tmpdir)
ia=$tmp/index-a ib=$tmp/index-b ma=$tmp/mnt-a mb=$tmp/mnt-b
ctl_a() { "$CKPTCTL" --index-dir "$ia" "$@"; }
ctl_b() { "$CKPTCTL" --index-dir "$ib" "$@"; }
py() { ck_py dcp_nodes.py "$@"; }
# bg_py ARGS... &: the same in the background, $! its own pid (to kill it),
# killed at exit if still there (it would keep its mount busy).
bg_py() { PYTHONDONTWRITEBYTECODE=1 exec "$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/dcp_nodes.py" "$@"; }
bg=""
stop_bg() { for p in $bg; do kill -9 "$p" 2>/dev/null || true; done; }
ck_atexit stop_bg
ck_gluster ckptwriters
sa=$node_a/store sb=$node_b/store
mount_a() { ck_mount "$sa" "$ma" -o refresh=1,index_dir="$ia"; }
mount_b() { ck_mount "$sb" "$mb" -o refresh=1,index_dir="$ib",pidfile="$tmp/b.pid"; }

hex() { printf %s "$1" | od -An -tx1 | tr -d ' \n'; }
# The helpers below take SERIES/NAME.
in_ls() { ctl_a ls "$sa" "${1%/*}" | grep -qw "${1#*/}" && ctl_b ls "$sb" "${1%/*}" | grep -qw "${1#*/}"; }
shown() { [ -e "$ma/$1" ] && [ -e "$mb/$1" ]; }
quarantined() { ctl_a quarantine "$sa" | grep -q "$1" && ctl_b quarantine "$sb" | grep -q "$1"; }
gone() { [ ! -e "$sa/staging/$1" ]; }
wait_file() { ck_until 30 test -e "$1" || fail "$1 never appeared"; }
# still_waiting PID WHAT: WHAT (PID) on node A has not finished while node
# B's commit is held.
still_waiting() { kill -0 "$1" 2>/dev/null || fail "$2 did not wait for node B's commit: $(cat "$tmp/held.err")"; }

# committed_once SERIES/NAME: both nodes list it, it left staging, data/
# holds it once, one journal entry names it, nothing of it was
# quarantined, both nodes' `ckptctl ls` agree, and both mounts show it.
committed_once() {
	ck_until 30 in_ls "$1" || fail "ckptctl ls does not list $1 on both nodes"
	ck_until 5 gone "$1" || fail "$1 still staged"
	[ "$(ls "$sa/data/${1%/*}" | grep -cx "${1#*/}")" = 1 ] || fail "$1 not in data/ exactly once"
	n=$(grep -l "name=$(hex "${1#*/}") " "$sa"/journal/* | wc -l)
	[ "$n" = 1 ] || fail "$n journal entries name $1: committed more than once"
	ctl_a quarantine "$sa" | grep -q "$1" && fail "part of $1 was quarantined"
	ctl_a ls "$sa" >"$tmp/ls.a" && ctl_b ls "$sb" >"$tmp/ls.b" || fail "ckptctl ls"
	diff "$tmp/ls.a" "$tmp/ls.b" >&2 || fail "ckptctl ls differs between the nodes"
	# At once on the node that did not commit it too (not at its next refresh).
	shown "$1" || fail "$1 not shown on both nodes"
}

# torn SERIES/NAME: quarantined on both nodes, listed on neither, and no
# longer in progress in either mount (a client may show a name another
# client moved away for a moment).
unshown() { [ ! -e "$ma/$1" ] && [ ! -e "$mb/$1" ]; }
torn() {
	ck_until 30 quarantined "${1#*/}" || fail "$1 not quarantined on both nodes"
	in_ls "$1" && fail "a torn save is listed"
	ck_until 5 unshown "$1" || fail "a mount still shows the torn $1"
	in_ls "$1" && fail "a torn save is listed"
	return 0
}

ctl_a init "$sa"
mount_a
mount_b
# The same node (node A's index) gets one writable mount.
mkdir -p "$tmp/mnt-a2"
ck_track "$tmp/mnt-a2"
"$CKPTFS" "$sa" "$tmp/mnt-a2" -o index_dir="$ia" 2>"$tmp/a2.err" && fail "a second writable mount with node A's index"
grep -q "already mounted writable" "$tmp/a2.err" || fail "refusal: $(cat "$tmp/a2.err")"
mkdir "$ma/dcp" "$mb/run"

# --- a 2-rank DCP save, one rank per node ------------------------------------------
py dcp_save "$ma/dcp/step_10" "$mb/dcp/step_10" 10
committed_once dcp/step_10
py dcp_check 10 "$ma/dcp/step_10" "$mb/dcp/step_10"

# --- HF: node B's marker lands while node A still writes its shard ------------------
bg_py hf_part "$ma/run/checkpoint-20" 20 1 --halfway "$tmp/half20" --go "$tmp/go20" &
a=$!
bg="$bg $a"
wait_file "$tmp/half20"
py hf_part "$mb/run/checkpoint-20" 20 2 --marker
sleep 2   # node B's grace (1 s) is over: its commit waits for node A's writer
gone run/checkpoint-20 && fail "committed while node A was still writing its shard"
touch "$tmp/go20"
wait $a || fail "node A's part of checkpoint-20"
committed_once run/checkpoint-20
py hf_check 20 "$ma/run/checkpoint-20" "$mb/run/checkpoint-20"

# --- kill -9 of a node-B trainer mid-save --------------------------------------------
bg_py hf_part "$mb/run/checkpoint-30" 30 2 --halfway "$tmp/half30" &
b=$!
bg="$bg $b"
wait_file "$tmp/half30"
py hf_part "$ma/run/checkpoint-30" 30 1 --marker
sleep 1.5
gone run/checkpoint-30 && fail "committed while node B was still writing its shard"
kill -9 $b
wait $b 2>/dev/null || true
torn run/checkpoint-30

# --- kill -9 of node B's daemon mid-save ---------------------------------------------
bg_py hf_part "$mb/run/checkpoint-40" 40 2 --halfway "$tmp/half40" --go "$tmp/go40" 2>"$tmp/b40.err" &
b=$!
bg="$bg $b"
wait_file "$tmp/half40"
py hf_part "$ma/run/checkpoint-40" 40 1 --marker
kill -9 "$(cat "$tmp/b.pid")"
touch "$tmp/go40"
wait $b 2>/dev/null && fail "node B's trainer wrote through a dead mount"
torn run/checkpoint-40
# Node B's mount comes back, and writes again.
fusermount3 -u -z "$mb" || fail "fusermount3 -u -z $mb"
mount_b
ls "$mb/run" | grep -qx checkpoint-20 || fail "node B's new mount does not show checkpoint-20"
py hf_part "$ma/run/checkpoint-50" 50 1
py hf_part "$mb/run/checkpoint-50" 50 2 --marker
committed_once run/checkpoint-50
py hf_check 50 "$ma/run/checkpoint-50" "$mb/run/checkpoint-50"

# --- node A's open between its lookup and node B's commit -----------------------------
# Node A's daemon holds each open of an in-progress node between the
# kernel's lookup and the open (CKPT_TEST_PAUSE_AT=staged-open) while node
# B's commit moves the directory, and node B's commit child holds after the
# move, before recording it (renamed): the open, of the directory (a
# listing) or of a file in it, waits for that commit and opens the
# committed checkpoint (a listing once failed with ENOENT here).
ck_umount "$ma"
ck_umount "$mb"
CKPT_TEST_PAUSE_AT=staged-open CKPT_TEST_PAUSE_FILE=$tmp/paused-a
export CKPT_TEST_PAUSE_AT CKPT_TEST_PAUSE_FILE
mount_a
CKPT_TEST_PAUSE_AT=renamed CKPT_TEST_PAUSE_FILE=$tmp/paused-b
mount_b
unset CKPT_TEST_PAUSE_AT CKPT_TEST_PAUSE_FILE
# held_open STEP COMMAND...: COMMAND on node A, held at its open of
# run/checkpoint-STEP (which node B writes) until node B's commit moved it;
# its output in $tmp/held.out.
held_open() {
	_h_step=$1
	shift
	py hf_part "$mb/run/checkpoint-$_h_step" "$_h_step" 1
	"$@" >"$tmp/held.out" 2>"$tmp/held.err" &
	_h_pid=$!
	bg="$bg $_h_pid"
	wait_file "$tmp/paused-a"
	py hf_part "$mb/run/checkpoint-$_h_step" "$_h_step" 2 --marker
	wait_file "$tmp/paused-b"
	gone "run/checkpoint-$_h_step" || fail "node B's commit held before it moved checkpoint-$_h_step"
	rm "$tmp/paused-a"
	sleep 0.5
	still_waiting "$_h_pid" "$* on node A"
	rm "$tmp/paused-b"
	wait "$_h_pid" || fail "$* on node A, held while node B committed: $(cat "$tmp/held.err")"
	committed_once "run/checkpoint-$_h_step"
}
held_open 60 ls "$ma/run/checkpoint-60"
for f in config.json model-00001-of-00002.safetensors model-00002-of-00002.safetensors trainer_state.json; do
	grep -qx "$f" "$tmp/held.out" || fail "the held listing of checkpoint-60 lacks $f: $(cat "$tmp/held.out")"
done
held_open 70 cat "$ma/run/checkpoint-70/model-00001-of-00002.safetensors"
cmp "$tmp/held.out" "$mb/run/checkpoint-70/model-00001-of-00002.safetensors" ||
	fail "the held read of checkpoint-70's shard differs from the committed one"
py hf_check 70 "$ma/run/checkpoint-70" "$mb/run/checkpoint-70"
# A lookup and a listing on node A, which saw checkpoint-80 in progress,
# after node B's commit moved it and before it recorded it: they wait for
# the commit (the checkpoint never vanishes from node A).
py hf_part "$mb/run/checkpoint-80" 80 1
[ -d "$ma/run/checkpoint-80" ] || fail "node A does not show checkpoint-80 in progress"
py hf_part "$mb/run/checkpoint-80" 80 2 --marker
wait_file "$tmp/paused-b"
stat "$ma/run/checkpoint-80" >/dev/null 2>"$tmp/held.err" &
s=$!
ls "$ma/run" >"$tmp/held.out" 2>>"$tmp/held.err" &
l=$!
bg="$bg $s $l"
sleep 0.5
still_waiting "$s" "node A's lookup"
still_waiting "$l" "node A's listing"
rm "$tmp/paused-b"
wait "$s" || fail "node A's lookup, held while node B committed: $(cat "$tmp/held.err")"
wait "$l" || fail "node A's listing, held while node B committed: $(cat "$tmp/held.err")"
grep -qx checkpoint-80 "$tmp/held.out" || fail "node A's listing lacks checkpoint-80: $(cat "$tmp/held.out")"
committed_once run/checkpoint-80

ck_umount "$ma"
ck_umount "$mb"
ctl_a verify "$sa" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "ckptctl verify"; }
[ -z "$(ls "$sa/writers/run" 2>/dev/null)" ] || fail "writers locks left: $(ls "$sa/writers/run")"
echo "gluster_writers: ok"
