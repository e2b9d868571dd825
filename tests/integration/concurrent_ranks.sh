#!/bin/sh
# 4 processes write the files of one DeepSpeed-like checkpoint at once
# (per-rank optimizer shards, rank 0's model states) through the writable
# mount while 2 others load older committed checkpoints over and over and
# compare them bit for bit; the `latest` marker written after every rank is
# done commits it, and every file then loads exactly.  The store is
# consistent afterwards (ckptctl verify).  See tests/py/crash_ranks.py.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt"
mkdir "$tmp/mnt/ds"
TMPDIR=$tmp ck_py crash_ranks.py "$tmp/mnt/ds" "$tmp/store" || fail "crash_ranks.py"
[ "$(cat "$tmp/store/staging/ds/latest")" = global_step30 ] || fail "latest not kept in the store"
ck_umount "$tmp/mnt"
"$CKPTCTL" verify "$tmp/store" || fail "ckptctl verify after the concurrent save"
