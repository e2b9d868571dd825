#!/bin/sh
# The store's filesystem fills up (a 24 MiB tmpfs): a save that does not
# fit fails with ENOSPC in the writer, nothing torn is committed (not even
# when asked to), the daemon stays up and serves what was committed, and
# once the failed directory is removed a small save commits again.  Needs
# root for the tmpfs (skips 77 otherwise).  See tests/py/crash_enospc.py.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

ck_tmpfs "$tmp/fs" 24m
"$CKPTCTL" init "$tmp/fs/store"
ck_mount "$tmp/fs/store" "$tmp/mnt" -o pidfile="$tmp/ckptfs.pid"
mkdir "$tmp/mnt/run"
ck_py crash_enospc.py "$tmp/mnt" "$tmp/fs/store" "$(cat "$tmp/ckptfs.pid")" || fail "crash_enospc.py"
df -k "$tmp/fs" | tail -n 1
ck_umount "$tmp/mnt"
"$CKPTCTL" verify "$tmp/fs/store" || fail "ckptctl verify after ENOSPC"
