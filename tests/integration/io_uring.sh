#!/bin/sh
# FUSE over io_uring (-o io_uring, where the kernel offers it).
# With the fuse module's enable_uring set for the test (and set back after
# it), a writable mount takes its requests through its per-CPU rings: a
# trainer's full and partial saves written and committed through it (the
# commit's rename answered while its handler goes on to invalidate names)
# read back bit-exactly through it, a read-only mount without the option
# (no rings) serves the same bytes, and at the unmount the daemon says how
# many requests the rings served, none refused.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
[ "$(id -u)" = 0 ] || skip "setting the fuse module's enable_uring needs root"
param=/sys/module/fuse/parameters/enable_uring
[ -w "$param" ] || skip "this kernel has no FUSE over io_uring (no $param)"
tmp=$(ck_tmpdir)
check() { ck_py writable_check.py "$@"; }

was=$(cat "$param")
restore_param() { echo "$was" >"$param"; }
ck_atexit restore_param
echo Y >"$param"

# ck_fg STORE MNT LOG OPTS: a foreground daemon logging to LOG; its pid in $fg.
ck_fg() {
	mkdir -p "$2"
	ck_track "$2"
	"$CKPTFS" "$1" "$2" -f -o "log_level=info,$4" 2>"$3" &
	fg=$!
	ck_until 10 is_mounted "$2" || fail "$2 not mounted: $(cat "$3")"
}

"$CKPTCTL" init "$tmp/store"
ck_fg "$tmp/store" "$tmp/mnt" "$tmp/rings.err" compact=0,io_uring
rw=$fg
grep -q "FUSE over io_uring: [0-9]* queues* x 2 threads" "$tmp/rings.err" ||
	fail "the writable mount started no rings: $(cat "$tmp/rings.err")"

mkdir "$tmp/mnt/run"
check save "$tmp/mnt/run" tmp-checkpoint-10 "$tmp/plain" full
mv "$tmp/mnt/run/tmp-checkpoint-10" "$tmp/mnt/run/checkpoint-10" || fail "commit by rename failed"
check save "$tmp/mnt/run" tmp-checkpoint-20 "$tmp/plain" odd
mv "$tmp/mnt/run/tmp-checkpoint-20" "$tmp/mnt/run/checkpoint-20" || fail "second commit failed"
[ "$(ls "$tmp/mnt/run" | tr '\n' ' ')" = "checkpoint-10 checkpoint-20 " ] ||
	fail "listing: $(ls "$tmp/mnt/run")"
ck_py offline_merge.py "$tmp/merged" "$tmp/plain/tmp-checkpoint-10" "$tmp/plain/tmp-checkpoint-20" >/dev/null
check same "$tmp/mnt/run/checkpoint-20" "$tmp/merged"

# The same store through /dev/fuse alone (the default): the same bytes,
# and no rings.
ck_fg "$tmp/store" "$tmp/dev" "$tmp/dev.err" ro
for f in pytorch_model.bin optimizer.pt; do
	cmp "$tmp/dev/run/checkpoint-20/$f" "$tmp/mnt/run/checkpoint-20/$f" ||
		fail "$f differs between the ring mount and the /dev/fuse one"
done
ck_umount "$tmp/dev"
wait "$fg" || fail "the /dev/fuse daemon exited $?"
! grep -q "io_uring" "$tmp/dev.err" || fail "a mount without -o io_uring used rings: $(cat "$tmp/dev.err")"

ck_umount "$tmp/mnt"
wait "$rw" || fail "the ring daemon exited $?: $(cat "$tmp/rings.err")"
cat "$tmp/rings.err"
served=$(sed -n 's/.*FUSE over io_uring: \([0-9]*\) requests served.*/\1/p' "$tmp/rings.err")
[ "${served:-0}" -ge 100 ] || fail "the rings served '${served}' requests"
! grep -q "refused\|not answered" "$tmp/rings.err" || fail "a ring entry was refused or a request lost"
echo "PASS"
