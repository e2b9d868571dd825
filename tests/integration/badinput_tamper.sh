#!/bin/sh
# Files changed behind the store's back after the import: one tensor byte
# flipped with size and mtime kept (only the content hash can tell: the read
# must fail with an error, never return the flipped byte), or grown (the
# identity check must refuse it).  The untouched files are still served.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

ck_py badinput.py make tamper "$tmp/bad" "$tmp/markers"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/bad" 0
ck_py badinput.py tamper "$tmp/bad"
ck_mount "$tmp/store" "$tmp/mnt" -o "ro,pidfile=$tmp/ckptfs.pid"
ck_py badinput.py check tamper "$tmp/bad" "$tmp/mnt/bad" "$tmp/store.bad.err" "$tmp/markers"
kill -0 "$(cat "$tmp/ckptfs.pid")" || fail "the daemon is gone"
ck_umount "$tmp/mnt"
