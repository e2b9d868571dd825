#!/bin/sh
# A store moves, on a local disk: the steps are in relocate_steps.sh (cp -a
# elsewhere, a tar round trip, rsync -a to a second store, a changed copy
# refused, ckptctl relocate).
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
command -v rsync >/dev/null 2>&1 || skip "no rsync"
tmp=$(ck_tmpdir)
w=$tmp r=$tmp mopts="" more=1
ctl() { "$CKPTCTL" "$@"; }
. "$CKPT_SRCDIR/tests/integration/relocate_steps.sh"
echo "relocate: ok"
