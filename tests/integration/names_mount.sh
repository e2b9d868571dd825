#!/bin/sh
# Names of any bytes through a writable mount: series, in-progress
# directories, checkpoints and files with quotes, backslashes, newlines,
# bytes that are not UTF-8 and 255 bytes (a 255-byte checkpoint in a
# 255-byte series too) are created, committed by rename and by attribute,
# quarantined when torn, and read back exactly through the mount, after a
# remount and a reindex, and in ckptctl's JSON (tests/py/names_mount_check.py).
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
tmp=$(ck_tmpdir)
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
check() { PYTHONDONTWRITEBYTECODE=1 "$PY" "$CKPT_SRCDIR/tests/py/names_mount_check.py" "$@"; }

"$CKPTCTL" init "$tmp/store" >/dev/null
check prepare "$tmp/runs" || fail "prepare"
for r in "$tmp/runs"/*; do
	"$CKPTCTL" import "$tmp/store" "$r" --pattern '-([0-9]+)$' >/dev/null || fail "import"
done
ck_mount "$tmp/store" "$tmp/mnt" -o compact=0
check write "$tmp/mnt" || fail "writing through the mount"
check check "$tmp/store" "$tmp/mnt" || fail "after the commits"
ck_umount "$tmp/mnt"
ck_mount "$tmp/store" "$tmp/mnt" -o ro
check check "$tmp/store" "$tmp/mnt" || fail "after a remount"
ck_umount "$tmp/mnt"
rm -r "$tmp/store/index"
"$CKPTCTL" reindex "$tmp/store" >/dev/null || fail "reindex"
ck_mount "$tmp/store" "$tmp/mnt" -o ro
check check "$tmp/store" "$tmp/mnt" || fail "after a reindex"
ck_umount "$tmp/mnt"
echo PASS
