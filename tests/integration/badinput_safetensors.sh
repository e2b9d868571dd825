#!/bin/sh
# Bad safetensors files in an imported dir: short, truncated, trailing bytes,
# garbled or non-UTF-8 header, huge or overlong header length, a hole in the
# offsets, an unknown dtype, a shape that does not match its bytes.
# The import reports each (exit 2); the daemon serves the good files before
# and after failed reads of the bad ones, which never return wrong bytes.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

ck_py badinput.py make safetensors "$tmp/bad" "$tmp/markers"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/bad" 2
ck_mount "$tmp/store" "$tmp/mnt" -o "ro,pidfile=$tmp/ckptfs.pid"
ck_py badinput.py check safetensors "$tmp/bad" "$tmp/mnt/bad" "$tmp/store.bad.err" "$tmp/markers"
kill -0 "$(cat "$tmp/ckptfs.pid")" || fail "the daemon is gone"
ck_umount "$tmp/mnt"
