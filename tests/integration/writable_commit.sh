#!/bin/sh
# The writable mount, as a trainer uses it: torch.save a full state dict and
# its optimizer into run/tmp-checkpoint-10/ and `mv` it to checkpoint-10 (the
# commit), then a partial save (odd blocks only) the same way as
# checkpoint-20, which reads back, through the same mount and a fresh
# read-only one, bit-exactly as the offline merge of both saves.  A torn
# save is quarantined (the rename fails with EIO) and checkpoint-20 stays
# the newest; setxattr user.ckptfs.commit commits a directory in place;
# committed checkpoints, and everything under -o ro, refuse changes (EROFS).
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
check() { ck_py writable_check.py "$@"; }

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt"

# A new series (mkdir at the root), then a full save committed by rename.
mkdir "$tmp/mnt/run"
check save "$tmp/mnt/run" tmp-checkpoint-10 "$tmp/plain" full
[ "$(ls "$tmp/mnt/run")" = "tmp-checkpoint-10" ] || fail "in progress: $(ls "$tmp/mnt/run")"
[ -z "$("$CKPTCTL" ls "$tmp/store" 2>/dev/null | grep checkpoint)" ] || fail "committed before the rename"
mv "$tmp/mnt/run/tmp-checkpoint-10" "$tmp/mnt/run/checkpoint-10" || fail "commit by rename failed"
[ "$(ls "$tmp/mnt/run")" = "checkpoint-10" ] || fail "after the commit: $(ls "$tmp/mnt/run")"
[ -d "$tmp/store/data/run/checkpoint-10" ] || fail "checkpoint-10 not under STORE/data"

# A partial save: only the odd blocks and their optimizer entries.
check save "$tmp/mnt/run" tmp-checkpoint-20 "$tmp/plain" odd
mv "$tmp/mnt/run/tmp-checkpoint-20" "$tmp/mnt/run/checkpoint-20" || fail "second commit failed"
[ "$(ls "$tmp/mnt/run" | tr '\n' ' ')" = "checkpoint-10 checkpoint-20 " ] ||
	fail "listing: $(ls "$tmp/mnt/run")"
ck_py offline_merge.py "$tmp/merged" "$tmp/plain/tmp-checkpoint-10" "$tmp/plain/tmp-checkpoint-20" >/dev/null
check same "$tmp/mnt/run/checkpoint-20" "$tmp/merged"

# A torn save never commits: EIO, quarantined, checkpoint-20 stays newest.
mkdir "$tmp/mnt/run/tmp-checkpoint-30"
check truncated "$tmp/mnt/run/tmp-checkpoint-30"
"$TORCH_PYTHON" - "$tmp/mnt/run" <<'PY' || fail "rename of a torn save did not fail with EIO"
import errno, os, sys
try:
    os.rename(sys.argv[1] + "/tmp-checkpoint-30", sys.argv[1] + "/checkpoint-30")
except OSError as e:
    sys.exit(0 if e.errno == errno.EIO else "rename: %s" % e)
sys.exit("a truncated checkpoint was committed")
PY
[ "$(ls "$tmp/mnt/run" | tr '\n' ' ')" = "checkpoint-10 checkpoint-20 " ] ||
	fail "listing after a refused commit: $(ls "$tmp/mnt/run")"
"$CKPTCTL" quarantine "$tmp/store" >"$tmp/quarantine.out"
cat "$tmp/quarantine.out"
grep -q "tmp-checkpoint-30" "$tmp/quarantine.out" || fail "not in ckptctl quarantine"
[ "$(ls "$tmp/store/data/run" | tail -n 1)" = "checkpoint-20" ] || fail "newest is not checkpoint-20"

# Committing in place by xattr (the name already carries its step).
check save "$tmp/mnt/run" checkpoint-40 "$tmp/plain" full
"$TORCH_PYTHON" -c 'import os, sys; os.setxattr(sys.argv[1], "user.ckptfs.commit", b"1")' \
	"$tmp/mnt/run/checkpoint-40" || fail "commit by setxattr failed"
[ -d "$tmp/store/data/run/checkpoint-40" ] || fail "checkpoint-40 not committed"
step=$("$TORCH_PYTHON" -c 'import os, sys; print(os.getxattr(sys.argv[1], "user.ckptfs.step").decode())' \
	"$tmp/mnt/run/checkpoint-40") || fail "checkpoint-40 is not served from the view"
[ "$step" = 40 ] || fail "checkpoint-40: step $step"
check same "$tmp/mnt/run/checkpoint-40" "$tmp/plain/checkpoint-40"

# Committed checkpoints are immutable.
check erofs "$tmp/mnt/run/checkpoint-10" "$tmp/mnt/run/checkpoint-20"
ck_umount "$tmp/mnt"

# A fresh read-only mount serves the same composite and refuses everything.
ck_mount "$tmp/store" "$tmp/ro" -o ro
check same "$tmp/ro/run/checkpoint-20" "$tmp/merged"
check erofs "$tmp/ro/run/checkpoint-20"
mkdir "$tmp/ro/run/tmp-checkpoint-50" 2>"$tmp/mkdir.err" && fail "mkdir in a read-only mount succeeded"
grep -q "Read-only file system" "$tmp/mkdir.err" || fail "mkdir under -o ro: $(cat "$tmp/mkdir.err")"
ck_umount "$tmp/ro"
