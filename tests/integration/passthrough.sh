#!/bin/sh
# FUSE passthrough: a committed file served as it was saved (a full save,
# a json file, the newest checkpoint a trainer just wrote) is handed to the
# kernel, which reads the physical file itself; user.ckptfs.io says how a
# file is served.  Through real mounts with torch.load and shared mappings:
#   - read-only: checkpoint-10's files load equal to the originals and are
#     served by passthrough, opened once or twice; checkpoint-20's
#     synthesized composites by the daemon; -o nopassthrough serves all
#     through the daemon;
#   - a tensor byte flipped behind the store's back (size and mtime kept),
#     in a small file and in the last tensor of a 32 MiB one (hashed on
#     several threads): passthrough is refused for that file (its hash is
#     checked before the kernel gets it), the daemon serves it and refuses
#     the flipped range with EIO, the intact files beside it still go by
#     passthrough;
#   - the warm-up at mount hashes the newest checkpoints' files served as
#     saved, exactly those their first opens then hand to the kernel, the
#     older DCP data files a merged .metadata points the loader at
#     (.ckptfs-from/) included;
#   - writable: a checkpoint saved through the mount and committed by
#     rename loads back by passthrough.
# Composites are served by the daemon here (-o nomaterialize); those the
# warm-up materializes for passthrough are preload.sh's.
# Passthrough needs Linux 6.9+ built with FUSE_PASSTHROUGH and root
# (CAP_SYS_ADMIN); elsewhere the same checks expect the daemon everywhere.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

want=daemon
if can_passthrough; then
	want=passthrough
fi
echo "expecting files served as saved to go by: $want"

ck_py composite_check.py make "$tmp/run"
ck_py passthrough_check.py make_big "$tmp/big/checkpoint-1/model.pt"
"$CKPTCTL" init "$tmp/store" >/dev/null
ck_import "$tmp/store" "$tmp/run" 0
ck_import "$tmp/store" "$tmp/big" 0
# A DCP series: its step-30 draws on the data files of steps 10 and 20.
ck_py dcp_series.py save "$tmp/dcp" || fail "saving the DCP series"
ck_import "$tmp/store" "$tmp/dcp" 0
big_orig="$tmp/big/checkpoint-1/model.pt"
big_mnt="$tmp/mnt/big/checkpoint-1/model.pt"

echo "--- read-only"
ck_mount "$tmp/store" "$tmp/mnt" -o ro,nomaterialize
ck_py passthrough_check.py serve "$tmp/run" "$tmp/mnt/run" "$want"
ck_py passthrough_check.py big "$big_orig" "$big_mnt" "$want"
ck_umount "$tmp/mnt"

echo "--- -o nopassthrough"
ck_mount "$tmp/store" "$tmp/mnt" -o ro,nopassthrough
ck_py passthrough_check.py serve "$tmp/run" "$tmp/mnt/run" daemon
ck_umount "$tmp/mnt"

echo "--- the warm-up checks the newest files served as saved before their first open"
# The debug log counts the files the warm-up hashed; they must be exactly
# those of the newest checkpoints that their opens then hand to the kernel.
mkdir -p "$tmp/mnt"
ck_track "$tmp/mnt"
"$CKPTFS" "$tmp/store" "$tmp/mnt" -f -o ro,nomaterialize,log_level=debug 2>"$tmp/warm.err" &
fg=$!
i=0
until grep -q "warm-up: " "$tmp/warm.err" || [ $i -ge 100 ]; do sleep 0.1; i=$((i + 1)); done
checked=$(sed -n 's/.*warm-up: [0-9]* files.*, \([0-9]*\) served as saved checked.*/\1/p' "$tmp/warm.err")
from=$tmp/mnt/dcp/step-30/.ckptfs-from
by_pt=$(ck_py passthrough_check.py count "$tmp/mnt/run/checkpoint-20" "$tmp/mnt/big/checkpoint-1" \
	"$tmp/mnt/dcp/step-30" "$from/step-10" "$from/step-20")
older=$(ck_py passthrough_check.py count "$from/step-10" "$from/step-20")
ck_umount "$tmp/mnt"
wait "$fg" || fail "ckptfs -f exited non-zero"
echo "warm-up checked $checked files; $by_pt went by passthrough"
[ -n "$checked" ] && [ "$checked" = "$by_pt" ] || fail "warm-up checked '$checked' files, $by_pt went by passthrough"
[ "$want" = daemon ] || [ "$by_pt" -gt 0 ] || fail "no file of the newest checkpoints went by passthrough"
[ "$want" = daemon ] || [ "$older" -gt 0 ] || fail "no older DCP data file went by passthrough"

echo "--- a tensor byte flipped in checkpoint-10/optimizer.pt and model.pt and in the big file"
ck_py passthrough_check.py flip "$tmp/run/checkpoint-10/optimizer.pt"
ck_py passthrough_check.py flip "$tmp/run/checkpoint-10/model.pt" last
ck_py passthrough_check.py flip "$big_orig" last
ck_mount "$tmp/store" "$tmp/mnt" -o "ro,nomaterialize,pidfile=$tmp/ckptfs.pid"
ck_py passthrough_check.py damaged "$tmp/run" "$tmp/mnt/run" "$want"
ck_py passthrough_check.py big "$big_orig" "$big_mnt" "$want" flipped
kill -0 "$(cat "$tmp/ckptfs.pid")" || fail "the daemon is gone"
ck_umount "$tmp/mnt"
ck_py passthrough_check.py flip "$tmp/run/checkpoint-10/optimizer.pt"   # restored
ck_py passthrough_check.py flip "$tmp/run/checkpoint-10/model.pt" last
ck_py passthrough_check.py flip "$big_orig" last

echo "--- writable: save, commit, load back"
ck_mount "$tmp/store" "$tmp/mnt" -o nomaterialize
ck_py passthrough_check.py save_load "$tmp/mnt" "$want"
ck_umount "$tmp/mnt"
echo "ok"
