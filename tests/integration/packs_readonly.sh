#!/bin/sh
# A series committed into the store, compacted with --keep-raw 1 (the raw
# files of every checkpoint but the newest are removed), then mounted
# read-only: every checkpoint torch.loads bit for bit the same as what was
# committed, the older ones from packs through their delta chains; and
# again after the index is lost and rebuilt by reindex (from the manifests,
# packmaps and packs: the raw files are gone).
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch

tmp=$(ck_tmpdir)
st="$tmp/store"
ck_py packs_make.py "$tmp/run1" 5 9
"$CKPTCTL" init "$st" >/dev/null
for d in "$tmp"/run1/checkpoint-*; do
	name=$(basename "$d")
	mkdir -p "$st/staging/run1"
	cp -r "$d" "$st/staging/run1/$name"
	"$CKPTCTL" commit "$st" "run1/$name" >/dev/null || fail "commit $name"
done

# The store given as a relative path: the raw files, recorded with absolute
# paths, are still recognised as the store's own and removed.
ctl=$(cd "$(dirname "$CKPTCTL")" && pwd)/ckptctl
(cd "$tmp" && "$ctl" compact --anchor-interval 2 --keep-raw 1 store) | tee "$tmp/compact.out"
grep -q "compacted 12 files" "$tmp/compact.out" || fail "expected 12 files packed"
grep -q "raw files removed" "$tmp/compact.out" || fail "no raw file removed with --keep-raw 1"
for c in 10 20 30 40; do
	[ ! -e "$st/data/run1/checkpoint-$c/model.pt" ] || fail "checkpoint-$c kept its raw model.pt"
done
[ -e "$st/data/run1/checkpoint-50/model.pt" ] || fail "the newest checkpoint lost its raw file"
"$CKPTCTL" verify "$st" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "verify after compaction"; }

ck_mount "$st" "$tmp/mnt" -o ro
ck_py packs_load.py "$tmp/mnt" run1 "$tmp/run1" || fail "a packed checkpoint does not load the same"
ck_umount "$tmp/mnt"

# A bit flip in the middle of the pack: verify names the damage, exits 3.
pack="$st/packs/pack-00000000.ckpack"
cp "$pack" "$tmp/pack.orig"
"$TORCH_PYTHON" -c 'import os, sys
f = open(sys.argv[1], "r+b"); n = os.path.getsize(sys.argv[1]); f.seek(n // 2)
b = f.read(1); f.seek(n // 2); f.write(bytes([b[0] ^ 4]))' "$pack"
rc=0
"$CKPTCTL" verify "$st" >"$tmp/verify.out" 2>&1 || rc=$?
cat "$tmp/verify.out"
[ $rc = 3 ] || fail "verify of a flipped pack exited $rc, not 3"
grep -q "^DAMAGED  run1/checkpoint-" "$tmp/verify.out" || fail "verify names no damaged file"
grep -q "pack-00000000.ckpack" "$tmp/verify.out" || fail "verify does not name the pack"
cp "$tmp/pack.orig" "$pack"

rm -rf "$st/index"
"$CKPTCTL" reindex -q "$st" || fail "reindex"
"$CKPTCTL" verify "$st" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "verify after reindex"; }
ck_mount "$st" "$tmp/mnt" -o ro
ck_py packs_load.py "$tmp/mnt" run1 "$tmp/run1" || fail "after reindex: a packed checkpoint does not load the same"
ck_umount "$tmp/mnt"
