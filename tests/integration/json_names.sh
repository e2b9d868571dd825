#!/bin/sh
# Series, checkpoint, file and tensor names holding quotes, backslashes,
# newlines, control characters, bytes that are not UTF-8, and 255-byte
# names, through every JSON document: `ckptctl ls/show/stats/verify --json`
# and the user.ckptfs.sources attribute of every file of a read-only mount
# (getfattr and os.getxattr).  Each must parse with Python's json module and
# give every name back byte for byte (tests/py/json_names_check.py).
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
command -v getfattr >/dev/null 2>&1 || skip "no getfattr (package attr)"
tmp=$(ck_tmpdir)

ck_py json_names_check.py build "$tmp/store" "$tmp/runs" || fail "names in ckptctl --json"
ck_mount "$tmp/store" "$tmp/mnt" -o ro
ck_py json_names_check.py mount "$tmp/store" "$tmp/runs" "$tmp/mnt" || fail "names in user.ckptfs.sources"
ck_umount "$tmp/mnt"
ck_py json_names_check.py damage "$tmp/store" "$tmp/runs" || fail "names in ckptctl verify --json"
echo "PASS: names of any bytes in every JSON document"
