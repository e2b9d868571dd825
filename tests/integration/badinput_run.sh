#!/bin/sh
# The bad-input test flow, shared by badinput_*.sh (tests/py/badinput.py):
#   badinput_run.sh KIND WANT_RC
# makes the KIND set of files, imports them (the import must exit WANT_RC),
# for KIND tamper changes them behind the store's back, mounts read-only,
# checks what is served, and checks the daemon is still alive.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
kind=$1 want_rc=$2
tmp=$(ck_tmpdir)

ck_py badinput.py make "$kind" "$tmp/bad" "$tmp/markers"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/bad" "$want_rc"
if [ "$kind" = tamper ]; then
	ck_py badinput.py tamper "$tmp/bad"
fi
ck_mount "$tmp/store" "$tmp/mnt" -o "ro,pidfile=$tmp/ckptfs.pid"
ck_py badinput.py check "$kind" "$tmp/bad" "$tmp/mnt/bad" "$tmp/store.bad.err" "$tmp/markers"
kill -0 "$(cat "$tmp/ckptfs.pid")" || fail "the daemon is gone"
ck_umount "$tmp/mnt"
