#!/bin/sh
# Deleting the checkpoint that the packed versions before it rest on: a
# series compacted with --keep-raw 1 keeps only its newest checkpoint raw,
# and older versions are deltas against (or dedups of) its bytes.
# `ckptctl rm` of that newest checkpoint hides it, but its raw files stay
# until a compaction packs them; every older checkpoint still loads bit for
# bit, and verify passes before and after that compaction.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch

tmp=$(ck_tmpdir)
st="$tmp/store"
ck_py packs_make.py "$tmp/run1" 4 9
"$CKPTCTL" init "$st" >/dev/null
for d in "$tmp"/run1/checkpoint-*; do
	name=$(basename "$d")
	mkdir -p "$st/staging/run1"
	cp -r "$d" "$st/staging/run1/$name"
	"$CKPTCTL" commit "$st" "run1/$name" >/dev/null || fail "commit $name"
done
"$CKPTCTL" compact --keep-raw 1 "$st" >/dev/null || fail "compact"

"$CKPTCTL" rm "$st" run1/checkpoint-40 || fail "ckptctl rm of the newest checkpoint"
"$CKPTCTL" ls "$st" run1 | grep -q "checkpoint-40.*deleted" || fail "checkpoint-40 not shown deleted"
[ -e "$st/data/run1/checkpoint-40/model.pt" ] ||
	fail "the raw file the packed versions rest on was reclaimed"
"$CKPTCTL" verify "$st" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "verify after rm"; }
rm -rf "$tmp/run1/checkpoint-40"
ck_mount "$st" "$tmp/mnt" -o ro
ck_py packs_load.py "$tmp/mnt" run1 "$tmp/run1" || fail "an older checkpoint no longer loads"
ck_umount "$tmp/mnt"

# A compaction packs what the deleted checkpoint still holds; reads stay exact.
"$CKPTCTL" compact "$st" >/dev/null || fail "compact after rm"
"$CKPTCTL" verify "$st" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "verify after the second compaction"; }
ck_mount "$st" "$tmp/mnt" -o ro
ck_py packs_load.py "$tmp/mnt" run1 "$tmp/run1" || fail "after the second compaction"
ck_umount "$tmp/mnt"
echo ok
