#!/bin/sh
# Crash safety of staged commits (torch 1.13, a read-only mount at the end).
# The test hook CKPT_TEST_CRASH_AT=<stage> makes `ckptctl commit` _exit(137)
# at each stage of a commit in turn; then a checkpoint of ~32 MiB is
# committed while `kill -9` hits the commit at random times (6 times).  After each
# crash the store is opened writable again (ckptctl recover) and must be
# consistent: the checkpoint is either not committed and still staged,
# byte for byte, or committed (in data/, indexed, with a manifest, no
# longer staged) and reads back bit-exactly through the mount.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store
mnt=$tmp/mnt
stage=$store/staging/run

# consistent STAGED FINAL ORIG: prints "staged" or "committed", fails on anything in between.
consistent() {
	if "$CKPTCTL" ls "$store" "run/$2" >/dev/null 2>&1; then
		[ -d "$store/data/run/$2" ] || fail "run/$2 indexed but not in data/"
		[ ! -e "$stage/$1" ] || fail "run/$2 committed and $1 still staged"
		[ -f "$store/manifests/run/$2.manifest" ] || fail "run/$2 committed without a manifest"
		diff -r "$3" "$store/data/run/$2" >&2 || fail "run/$2 committed with other bytes"
		echo committed
	else
		[ ! -e "$store/data/run/$2" ] || fail "run/$2 in data/ but not indexed after recovery"
		[ -d "$stage/$1" ] || fail "run/$2 neither committed nor staged"
		diff -r "$3" "$stage/$1" >&2 || fail "staged $1 changed"
		echo staged
	fi
	[ -z "$(find "$store/manifests" -name '*.tmp.*')" ] || fail "temporary manifests left: $(find "$store/manifests" -name '*.tmp.*')"
}

recover() {
	"$CKPTCTL" recover "$store" | sed 's/^/  recover: /' || fail "ckptctl recover failed"
}

ck_py commit_check.py make "$tmp/small" 7 1
ck_py commit_check.py make "$tmp/big" 9 32
"$CKPTCTL" init "$store"
mkdir -p "$stage"
cp -r "$tmp/small" "$stage/first"
"$CKPTCTL" commit "$store" run/first checkpoint-1 || fail "first commit"
served="$mnt/run/checkpoint-1 $tmp/small"

# --- a crash at every stage ---------------------------------------------------------
step=100
for at in validated synced renamed manifest indexed; do
	step=$((step + 1))
	cp -r "$tmp/small" "$stage/staged-$step"
	rc=0
	CKPT_TEST_CRASH_AT=$at "$CKPTCTL" commit "$store" "run/staged-$step" "checkpoint-$step" >/dev/null 2>&1 || rc=$?
	[ "$rc" = 137 ] || fail "the commit did not stop at $at (exit $rc)"
	recover
	state=$(consistent "staged-$step" "checkpoint-$step" "$tmp/small")
	echo "crash at $at: $state"
	case $at in
	validated | synced) want=staged ;;
	*) want=committed ;;
	esac
	[ "$state" = "$want" ] || fail "crash at $at left run/checkpoint-$step $state, expected $want"
	if [ "$state" = staged ]; then
		"$CKPTCTL" commit "$store" "run/staged-$step" "checkpoint-$step" >/dev/null || fail "commit after $at"
		[ "$(consistent "staged-$step" "checkpoint-$step" "$tmp/small")" = committed ] || fail "not committed"
	fi
	served="$served $mnt/run/checkpoint-$step $tmp/small"
done

# A quarantine cut short: set aside, its REASON written by recovery.
cp -r "$tmp/small" "$stage/torn"
head -c 100 "$tmp/small/model.pt" >"$stage/torn/model.pt"
rc=0
CKPT_TEST_CRASH_AT=quarantined "$CKPTCTL" commit "$store" run/torn checkpoint-150 >/dev/null 2>&1 || rc=$?
[ "$rc" = 137 ] || fail "the quarantine did not stop (exit $rc)"
recover
[ ! -e "$stage/torn" ] || fail "torn dir still staged"
grep -q "stopped before" "$store"/quarantine/run/torn.*/REASON || fail "no REASON after recovery"
"$CKPTCTL" ls "$store" run/checkpoint-150 >/dev/null 2>&1 && fail "the torn checkpoint is listed"

# --- kill -9 at random times ------------------------------------------------------
# Random points within how long one uninterrupted commit of the same data takes
# here (measured, not asserted on).
cp -r "$tmp/big" "$stage/big-0"
t0=$(date +%s%N)
"$CKPTCTL" commit "$store" run/big-0 checkpoint-200 >/dev/null || fail "commit of big-0"
window=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "an uninterrupted commit of big took ${window} ms"
served="$served $mnt/run/checkpoint-200 $tmp/big"
killed=0
i=0
while [ $i -lt 6 ]; do
	i=$((i + 1))
	step=$((200 + i))
	cp -r "$tmp/big" "$stage/big-$i"
	delay=$(awk -v seed="$$$i" -v ms="$window" 'BEGIN { srand(seed); printf "%.3f", rand() * ms / 1000 }')
	env "$CK_KILLABLE" "$CKPTCTL" commit "$store" "run/big-$i" "checkpoint-$step" >/dev/null 2>&1 &
	pid=$!
	sleep "$delay"
	kill -9 "$pid" 2>/dev/null || true
	rc=0
	wait "$pid" 2>/dev/null || rc=$?
	[ "$rc" = 137 ] && killed=$((killed + 1))
	recover
	state=$(consistent "big-$i" "checkpoint-$step" "$tmp/big")
	echo "kill -9 after ${delay}s (exit $rc): $state"
	if [ "$state" = staged ]; then
		"$CKPTCTL" commit "$store" "run/big-$i" "checkpoint-$step" >/dev/null || fail "commit after kill $i"
	fi
	served="$served $mnt/run/checkpoint-$step $tmp/big"
done

echo "$killed of 6 commits were killed before they ended"

# --- everything committed reads back bit-exactly ------------------------------------
[ "$("$CKPTCTL" ls "$store" run --json | grep -o '"name"' | wc -l)" = 13 ] || fail "$("$CKPTCTL" ls "$store" run)"
ck_mount "$store" "$mnt" -o ro
# shellcheck disable=SC2086
ck_py commit_check.py same $served || fail "a committed checkpoint reads back differently"
ck_umount "$mnt"
