#!/bin/sh
# Real torch 2.x and safetensors files (shared/fixtures) imported and served
# back: every zip-format torch.save file loads through the mount exactly as
# from the original; the legacy and the broken one are refused by the import
# with a reason and not served; the safetensors files come back valid, equal
# and laid out like the reference writer.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
fixtures="$CKPT_SHARED/fixtures"
[ -d "$fixtures/torch2x" ] || fail "no fixtures in $fixtures"
tmp=$(ck_tmpdir)

cp -R "$fixtures/torch2x" "$fixtures/safetensors" "$tmp/"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/torch2x" 2
ck_import "$tmp/store" "$tmp/safetensors" 0
"$CKPTCTL" ls "$tmp/store"

ck_mount "$tmp/store" "$tmp/mnt" -o ro
ck_py fixtures_check.py torch "$tmp/torch2x" "$tmp/mnt/torch2x" "$tmp/store.torch2x.err"
ck_py fixtures_check.py safetensors "$tmp/safetensors" "$tmp/mnt/safetensors"
ck_umount "$tmp/mnt"
