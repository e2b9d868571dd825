#!/bin/sh
# Bad torch.save files in an imported dir: truncated, bit-flipped (tensor data
# with a stale CRC, data.pkl with a stale CRC, an invalid opcode with a good
# CRC), wrong magic, empty, lengths that claim gigabytes in the pickle and in
# the zip directory.
# The import reports each (exit 2); the daemon serves the good files before
# and after failed reads of the bad ones, which never return wrong bytes.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

ck_py badinput.py make torch "$tmp/bad" "$tmp/markers"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/bad" 2
ck_mount "$tmp/store" "$tmp/mnt" -o "ro,pidfile=$tmp/ckptfs.pid"
ck_py badinput.py check torch "$tmp/bad" "$tmp/mnt/bad" "$tmp/store.bad.err" "$tmp/markers"
kill -0 "$(cat "$tmp/ckptfs.pid")" || fail "the daemon is gone"
ck_umount "$tmp/mnt"
