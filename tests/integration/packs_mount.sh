#!/bin/sh
# The packed store through the mount: full checkpoints of a small training
# run (model, AdamW state, a safetensors copy) written through a writable
# mount, packed by `ckptctl compact --keep-raw 1` while the mount is live
# and then by the daemon's own background compaction (-o compact=1).  Each
# time every checkpoint reads back bit-exactly (bytes, torch.load, mmap of
# safetensors) through the live mount, whose raw files were removed under
# it, and through a fresh one; a partial save's composite, drawing from
# packed versions, equals the offline merge.  A bit flipped in a pack makes the files
# that need it fail with EIO; no file gives other bytes.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store mnt=$tmp/mnt plain=$tmp/plain
check() { ck_py packs_check.py "$@"; }
raw_gone() {	# raw_gone CKPT: waits up to 60 s for its raw files to be removed
	i=0
	while [ -e "$store/data/run/$1/model.pt" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	[ ! -e "$store/data/run/$1/model.pt" ] || fail "raw files of $1 still there"
}

"$CKPTCTL" init "$store"
mkdir -p "$plain"

# Four saves, read once (composites built on the raw files), then packed
# by ckptctl beside the live mount: the mount follows at the next open.
ck_mount "$store" "$mnt" -o compact=0,refresh=1
mkdir "$mnt/run"
check train "$mnt/run" "$plain" 1 4
[ -e "$store/data/run/step-5/model.pt" ] || fail "no raw file for step-5 under STORE/data"
check same "$mnt/run" "$plain"
"$CKPTCTL" compact "$store" --keep-raw 1 || fail "ckptctl compact failed"
raw_gone step-5
raw_gone step-15
[ -e "$store/data/run/step-20/model.pt" ] || fail "the newest checkpoint lost its raw files"
check same "$mnt/run" "$plain"
ck_umount "$mnt"

# Two more saves; the daemon packs them itself (the newest stays raw).
# Then a partial save (block 1 only): its composite draws everything else
# from step-30, which the daemon packs once step-35 commits.
ck_mount "$store" "$mnt" -o compact=1,refresh=1
check train "$mnt/run" "$plain" 5 6
raw_gone step-25
check same "$mnt/run" "$plain"
check train "$mnt/run" "$tmp/partial" 7 7 partial
raw_gone step-30
ck_py offline_merge.py "$tmp/merged" "$plain/step-5" "$plain/step-10" "$plain/step-15" "$plain/step-20" \
	"$plain/step-25" "$plain/step-30" "$tmp/partial/step-35" >/dev/null
check composite "$mnt/run/step-35" "$tmp/merged"
check same "$mnt/run" "$plain"
ck_umount "$mnt"
ls "$store/packs" | grep -q . || fail "no pack files in STORE/packs"

# A fresh read-only mount: everything from the packs, nothing to verify raw.
ck_mount "$store" "$mnt" -o ro
check same "$mnt/run" "$plain"
check composite "$mnt/run/step-35" "$tmp/merged"
ck_umount "$mnt"

# One bit flipped in the middle of the biggest pack.
pack=$(ls -S "$store"/packs/* | head -n 1)
"$TORCH_PYTHON" - "$pack" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x10]))
PY
ck_mount "$store" "$mnt" -o ro
check damaged "$mnt/run" "$plain"
ck_umount "$mnt"
echo "packs_mount: ok"
