#!/bin/sh
# MNT/.ckptfs over torch DCP saves written by torch's own DCP writer (one
# process, and 2 ranks with ShardedTensors split by rows, by columns or in
# blocks along both; a full save, then partial ones), in a compacted
# store: weights/ of every step read by the reference safetensors reader
# equals the offline merge of the saves' model.* FQNs (prefix stripped)
# bit for bit, layers/ their weights and optim.state moments with
# LAYER.json's steps and relative L2 changes, history/ the layers' files;
# a sharded weight's bytes are its ranks' data files' extents; ckptctl
# diff reads the three splits as equal.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch

tmp=$(ck_tmpdir)
store=$tmp/store
mnt=$tmp/mnt
ck_py ctl_check.py dcp-save "$tmp/work" || fail "saving the DCP series"
"$CKPTCTL" init "$store" >/dev/null
for s in dcp1 dcp2 dcp2c dcp2g; do
	ck_import "$store" "$tmp/work/$s" 0
done
"$CKPTCTL" compact "$store" -q || fail "ckptctl compact"

ck_mount "$store" "$mnt" -o ro
ctl=$mnt/.ckptfs
src=$(getfattr --absolute-names --only-values -n user.ckptfs.sources "$ctl/weights/dcp2/step-20/model.safetensors") ||
	fail "user.ckptfs.sources of a DCP weights file"
for rank in 0 1; do
	echo "$src" | grep -q "dcp2/step-10/__${rank}_[0-9]*\.distcp" ||
		fail "weights/dcp2/step-20/model.safetensors does not read rank $rank's data files: $src"
done
ck_py ctl_check.py dcp "$ctl" "$tmp/work" || fail "weights/, layers/ or history/ of the DCP series (see above)"
# The same training split by rows, by columns and in blocks holds the same
# tensors, read here 8 bytes at a time across the runs.
for other in dcp2c dcp2g; do
	"$CKPTCTL" diff "$store" dcp2/step-30 $other/step-30 --json --chunk-size 8 >"$tmp/diff.json" ||
		fail "ckptctl diff of the row split and $other"
	"$TORCH_PYTHON" - "$tmp/diff.json" <<'PY' || fail "the row split and $other differ: $(head -c 600 "$tmp/diff.json")"
import json, sys
d = json.load(open(sys.argv[1]))
split = [t for t in d["tensors"] if t["name"].endswith(".weight") and "norm" not in t["name"]]
assert len(split) >= 4, len(split)
bad = [(t["name"], t["status"]) for t in d["tensors"] if t["status"] != "identical"]
assert not bad, bad
PY
done
ck_umount "$mnt"
echo "eval_dcp: all checks passed"
