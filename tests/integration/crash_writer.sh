#!/bin/sh
# A trainer kill -9ed in the middle of torch.save through the writable
# mount, 22 times at different points (random delays, staged sizes polled,
# exact byte counts): the torn checkpoint-20 is never committed and shows
# as in progress, checkpoint-10 (committed before) loads bit-exactly, the
# daemon stays up; rm -r through the mount clears the torn directory, and
# one uninterrupted save at the end commits and loads exactly.  The store
# is consistent afterwards (ckptctl verify).  See tests/py/crash_writer.py.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt" -o pidfile="$tmp/ckptfs.pid"
mkdir "$tmp/mnt/run"
# The seed changes the kill points from run to run; it is in the log.
seed=${CKPT_TEST_SEED:-$$}
echo "seed $seed (CKPT_TEST_SEED=$seed repeats these kill points)"
ck_py crash_writer.py "$tmp/mnt" "$tmp/store" "$(cat "$tmp/ckptfs.pid")" "$seed" ||
	fail "crash_writer.py (seed $seed)"
[ -z "$(ls "$tmp/store/staging/run")" ] || fail "left in STORE/staging/run: $(ls "$tmp/store/staging/run")"
[ ! -d "$tmp/store/quarantine" ] || [ -z "$(ls -A "$tmp/store/quarantine")" ] ||
	fail "something was quarantined: $(ls -R "$tmp/store/quarantine")"
ck_umount "$tmp/mnt"
"$CKPTCTL" verify "$tmp/store" || fail "ckptctl verify after the crashes"
