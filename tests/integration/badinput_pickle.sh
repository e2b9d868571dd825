#!/bin/sh
# Hostile pickles in an imported dir: GLOBALs os.system, posix.system, eval,
# subprocess.getoutput that would each touch a marker file, and nesting a
# million deep.  Nothing may ever run (no marker, neither on import nor on
# reads through the mount) and nothing may crash.
# The import reports each (exit 2); the daemon serves the good files before
# and after failed reads of the bad ones, which never return wrong bytes.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

ck_py badinput.py make pickle "$tmp/bad" "$tmp/markers"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/bad" 2
ck_mount "$tmp/store" "$tmp/mnt" -o "ro,pidfile=$tmp/ckptfs.pid"
ck_py badinput.py check pickle "$tmp/bad" "$tmp/mnt/bad" "$tmp/store.bad.err" "$tmp/markers"
kill -0 "$(cat "$tmp/ckptfs.pid")" || fail "the daemon is gone"
ck_umount "$tmp/mnt"
