#!/bin/sh
# The daemon of a writable mount kill -9ed, then its dead mount lazily
# unmounted (fusermount3 -u -z) and a new daemon started on the same store:
#  (a) mid-write, a big torch.save in progress: the torn directory is
#      still in progress after the restart, and refused (EIO) when committed;
#  (b) mid-commit, at every stage of a commit (the CKPT_TEST_CRASH_AT hook
#      ends the commit child there, then the daemon is killed), and with
#      the child held before its commit lock (CKPT_TEST_PAUSE_AT) while the
#      daemon alone is killed: the next mount waits for the orphan;
#  (c) mid-commit, kill -9 of the daemon and its commit child (or of the
#      daemon alone, the child then finishing alone) at random moments
#      while a 32 MiB directory commits.
# After each restart: committed checkpoints load bit-exactly, `ckptctl
# verify` passes, and the interrupted directory is committed completely
# (listed, in data/, with its manifest, the bytes written) or still in
# progress byte for byte (the new daemon recovers the store at start, as
# every writable open does).  At the end a new save commits and everything
# committed loads exactly.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store
mnt=$tmp/mnt
stage=$store/staging/run
seed=${CKPT_TEST_SEED:-$$}
echo "seed $seed (CKPT_TEST_SEED=$seed repeats these kill points)"
pid=

# random KEY N: a number in [0, N) from the seed and KEY.
random() {
	awk -v seed="$seed$1" -v n="$2" 'BEGIN { srand(seed); printf "%d", rand() * n }'
}

# A pidfile per daemon: one that exits removes its own.
starts=0
start() {
	starts=$((starts + 1))
	ck_mount "$store" "$mnt" -o compact=0,pidfile="$tmp/ckptfs.$starts.pid"   # compact=0: raw bytes are diffed below
	pid=$(cat "$tmp/ckptfs.$starts.pid") || fail "no pidfile"
}

# crash [group]: kill -9 of the daemon (with "group": and of its commit
# child, in its process group), then the dead mount is detached.
crash() {
	children=$(pgrep -P "$pid" || true)
	if [ "${1:-}" = group ]; then
		kill -9 "-$pid" 2>/dev/null || true
	else
		kill -9 "$pid" 2>/dev/null || true
	fi
	ck_until 10 ck_gone "$pid" || fail "the daemon $pid survived kill -9"
	fusermount3 -u -z "$mnt" || fail "fusermount3 -u -z $mnt"
	is_mounted "$mnt" && fail "$mnt still mounted"
	return 0
}

# stop: a clean unmount, and the daemon gone (it holds STORE/mount.lock,
# which the next writable mount needs, until it has ended).
stop() {
	ck_umount "$mnt"
	ck_until 30 ck_gone "$pid" || fail "the daemon $pid did not end after its unmount"
}

committed() { "$CKPTCTL" ls "$store" "run/$1" >/dev/null 2>&1; }

# state STAGED FINAL ORIG: what a cut-short commit of STAGED as FINAL left
# once a daemon has started again, checked for consistency: "committed" or
# "staged".  A directory renamed into data/ and not recorded is a commit
# that recovery (which every writable open of the store runs first, the
# mount's included: ckptctl(1)) should have finished.
state() {
	if committed "$2"; then
		[ -d "$store/data/run/$2" ] || fail "run/$2 indexed but not in data/"
		[ ! -e "$stage/$1" ] || fail "run/$2 committed and $1 still staged"
		[ -f "$store/manifests/run/$2.manifest" ] || fail "run/$2 committed without a manifest"
		diff -r "$3" "$store/data/run/$2" >&2 || fail "run/$2 committed with other bytes"
		ls "$mnt/run" | grep -qx "$2" || fail "run/$2 committed but not in the mount"
		echo committed
	elif [ -d "$stage/$1" ]; then
		[ ! -e "$store/data/run/$2" ] || fail "run/$2 both in data/ and staged"
		diff -r "$3" "$stage/$1" >&2 || fail "staged $1 changed"
		diff -r "$3" "$mnt/run/$1" >&2 || fail "in-progress $1 reads back differently"
		echo staged
	elif [ -d "$store/data/run/$2" ]; then
		fail "run/$2 is in data/ but not recorded after the restart: the writable mount did not recover the store"
	else
		fail "run/$2 is neither committed, nor staged, nor in data/"
	fi
	[ -z "$(find "$store/manifests" -name '*.tmp.*' 2>/dev/null)" ] || fail "temporary manifests left"
}

verify() {
	"$CKPTCTL" verify "$store" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "ckptctl verify $*"; }
	tail -n 1 "$tmp/verify.out"
}

served="$mnt/run/checkpoint-1 $tmp/small"

ck_py commit_check.py make "$tmp/small" 7 1
ck_py commit_check.py make "$tmp/big" 9 32
"$CKPTCTL" init "$store"
start
mkdir "$mnt/run"
cp -r "$tmp/small" "$mnt/run/tmp-checkpoint-1"
mv "$mnt/run/tmp-checkpoint-1" "$mnt/run/checkpoint-1" || fail "first commit"

# --- (a) kill -9 mid-write ----------------------------------------------------------
# The writer pauses at a random point of model.pt, the daemon dies, the
# writer goes on (and fails).
frac=0.$(printf %02d $(( $(random 0 90) + 5 )))
ck_py crash_daemon.py save "$mnt/run/checkpoint-20" 20 64 "$frac" "$tmp/go" >"$tmp/writer.out" 2>&1 &
writer=$!
ck_until 30 grep -qs paused "$tmp/writer.out" || fail "the writer did not start: $(cat "$tmp/writer.out")"
crash
touch "$tmp/go"
rc=0
wait "$writer" || rc=$?
[ $rc != 0 ] || fail "the writer ended well though its daemon died: $(cat "$tmp/writer.out")"
echo "daemon killed with $(stat -c %s "$stage/checkpoint-20/model.pt") bytes of model.pt staged; the writer exited $rc"
start
committed checkpoint-20 && fail "a save cut short by the daemon's death was committed"
[ ! -e "$mnt/run/checkpoint-20/trainer_state.json" ] || fail "a marker appeared"
ck_py crash_daemon.py torn "$mnt/run/checkpoint-20" || fail "the torn checkpoint-20"
committed checkpoint-20 && fail "torn checkpoint-20 committed"
verify "after a kill mid-write"

# --- (b) the commit child stopped at each stage, then the daemon killed -------------
step=100
for at in validated synced renamed manifest indexed; do
	step=$((step + 1))
	stop
	CKPT_TEST_CRASH_AT=$at
	export CKPT_TEST_CRASH_AT
	start
	unset CKPT_TEST_CRASH_AT
	cp -r "$tmp/small" "$mnt/run/tmp-checkpoint-$step"
	mv "$mnt/run/tmp-checkpoint-$step" "$mnt/run/checkpoint-$step" 2>"$tmp/mv.err" &&
		fail "the commit went through a crash at $at"
	crash
	start
	s=$(state "tmp-checkpoint-$step" "checkpoint-$step" "$tmp/small") || exit 1
	echo "commit stopped at $at ($(cat "$tmp/mv.err")): $s"
	case $at in
	validated | synced) want=staged ;;
	*) want=committed ;;
	esac
	[ "$s" = $want ] || fail "a crash at $at left run/checkpoint-$step $s, expected $want"
	verify "after a crash at $at"
	if [ "$s" = staged ]; then
		mv "$mnt/run/tmp-checkpoint-$step" "$mnt/run/checkpoint-$step" || fail "commit after $at"
	fi
	served="$served $mnt/run/checkpoint-$step $tmp/small"
done

# --- (b2) the daemon killed while its commit child waits before the commit lock -----
# The orphaned child finishes alone.  It keeps the store's mount claim, so
# the next writable mount waits for it instead of recovering the store
# while the commit still moves the directory (as the sanitizer build's
# exec'd helper once did not: the commit was found in data/, unrecorded).
step=110
stop
CKPT_TEST_PAUSE_AT=validated
CKPT_TEST_PAUSE_FILE=$tmp/paused
export CKPT_TEST_PAUSE_AT CKPT_TEST_PAUSE_FILE
start
unset CKPT_TEST_PAUSE_AT CKPT_TEST_PAUSE_FILE
cp -r "$tmp/small" "$mnt/run/tmp-checkpoint-$step"
mv "$mnt/run/tmp-checkpoint-$step" "$mnt/run/checkpoint-$step" 2>/dev/null &
mover=$!
ck_until 30 test -e "$tmp/paused" || fail "the commit child did not reach its pause"
crash
flock -n "$store/mount.lock" true &&
	fail "the killed daemon's commit child does not keep the store's mount claim"
rm -f "$tmp/paused"
wait "$mover" || true
start
s=$(state "tmp-checkpoint-$step" "checkpoint-$step" "$tmp/small") || exit 1
echo "daemon killed while its commit child waited: $s"
[ "$s" = committed ] || fail "the orphaned commit of run/checkpoint-$step left it $s"
verify "after the orphaned commit"
served="$served $mnt/run/checkpoint-$step $tmp/small"

# --- (c) kill -9 at random moments of a big commit -----------------------------------
cp -r "$tmp/big" "$mnt/run/tmp-checkpoint-200"
t0=$(date +%s%N)
mv "$mnt/run/tmp-checkpoint-200" "$mnt/run/checkpoint-200" || fail "commit of big"
window=$(( ($(date +%s%N) - t0) / 1000000 + 1 ))
echo "an uninterrupted commit of big took ${window} ms"
served="$served $mnt/run/checkpoint-200 $tmp/big"
n=0
while [ $n -lt 6 ]; do
	n=$((n + 1))
	step=$((200 + n))
	cp -r "$tmp/big" "$mnt/run/tmp-checkpoint-$step"
	how=group
	[ $((n % 3)) = 0 ] && how=daemon
	delay=$(awk -v ms="$(random $n $((window * 12 / 10 + 1)))" 'BEGIN { printf "%.3f", ms / 1000 }')
	mv "$mnt/run/tmp-checkpoint-$step" "$mnt/run/checkpoint-$step" 2>/dev/null &
	mover=$!
	sleep "$delay"
	crash $how
	wait "$mover" || true
	# An orphaned commit child finishes alone (it holds the store's locks).
	for c in $children; do
		ck_until 60 ck_gone "$c" || true
	done
	start
	s=$(state "tmp-checkpoint-$step" "checkpoint-$step" "$tmp/big") || exit 1
	echo "kill -9 ($how) ${delay}s into a commit: $s"
	verify "after kill $n"
	if [ "$s" = staged ]; then
		mv "$mnt/run/tmp-checkpoint-$step" "$mnt/run/checkpoint-$step" || fail "commit after kill $n"
	fi
	served="$served $mnt/run/checkpoint-$step $tmp/big"
done

# --- afterwards: a new save commits; everything committed loads exactly ---------------
ck_py commit_check.py make "$tmp/final" 300 1
cp -r "$tmp/final" "$mnt/run/checkpoint-300"
echo '{"global_step": 300}' >"$tmp/trainer_state.json"
cp "$tmp/trainer_state.json" "$mnt/run/checkpoint-300/"      # the marker, last
cp "$tmp/trainer_state.json" "$tmp/final/"
ck_until 30 committed checkpoint-300 || fail "checkpoint-300 was not committed by its marker"
served="$served $mnt/run/checkpoint-300 $tmp/final"
# shellcheck disable=SC2086
ck_py commit_check.py same $served || fail "a committed checkpoint reads back differently"
[ -z "$(ls "$stage")" ] || fail "left in progress: $(ls "$stage")"
ck_umount "$mnt"
verify "at the end"
