#!/bin/sh
# A partial save resumed through the mount (torch 1.13, the real client).
# checkpoint-10 of a tiny Llama-like model is a full HF-Trainer-style save,
# checkpoint-20 holds only the odd decoder blocks.  Through a read-only
# mount, checkpoint-20 must load bit-exactly what an offline merge gives
# (model.pt, model.safetensors, optimizer.pt, scheduler.pt, the JSON files),
# training resumed from it must equal training resumed from the merged copy,
# and the provenance (xattr, ckptctl show) must say which step each tensor
# comes from.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
command -v getfattr >/dev/null 2>&1 || skip "no getfattr (package attr)"
tmp=$(ck_tmpdir)

ck_py composite_check.py make "$tmp/run"
"$CKPTCTL" init "$tmp/store"
ck_import "$tmp/store" "$tmp/run" 0
"$CKPTCTL" ls "$tmp/store" run

ck_mount "$tmp/store" "$tmp/mnt" -o ro
ls -l "$tmp/mnt/run/checkpoint-20"
if touch "$tmp/mnt/run/checkpoint-20/new" 2>/dev/null; then
	fail "created a file in a read-only mount"
fi

ck_py composite_check.py verify "$tmp/run" "$tmp/mnt/run" "$tmp/work"

mkdir "$tmp/show"
for f in model.pt model.safetensors optimizer.pt; do
	"$CKPTCTL" show "$tmp/store" run/checkpoint-20 "$f" --json >"$tmp/show/$f.json" ||
		fail "ckptctl show run/checkpoint-20 $f --json exited $?"
done
getfattr --absolute-names -n user.ckptfs.sources --only-values "$tmp/mnt/run/checkpoint-20/model.pt" >"$tmp/sources.json" ||
	fail "getfattr user.ckptfs.sources failed"
echo "user.ckptfs.sources of model.pt: $(head -c 300 "$tmp/sources.json")..."
ck_py composite_check.py provenance "$tmp/run" "$tmp/mnt/run" "$tmp/show"

# -o direct_io=torch: the torch.save files read, load and map (privately,
# as torch.load(mmap=True) does) the same as through the page cache.
ck_mount "$tmp/store" "$tmp/dio" -o ro,direct_io=torch
for f in model.pt optimizer.pt scheduler.pt model.safetensors; do
	cmp "$tmp/dio/run/checkpoint-20/$f" "$tmp/mnt/run/checkpoint-20/$f" || fail "direct_io=torch: $f differs"
done
PYTHONPATH="$CKPT_SRCDIR/tests/py" "$TORCH_PYTHON" - "$tmp/dio/run/checkpoint-20" "$tmp/mnt/run/checkpoint-20" <<'PY' ||
import sys, torch, mountcheck
dio, cached = sys.argv[1], sys.argv[2]
for f in ("model.pt", "optimizer.pt"):
    assert mountcheck.read_mmapped(dio + "/" + f, private=True) == mountcheck.read_all(cached + "/" + f), f
a, b = torch.load(dio + "/model.pt"), torch.load(cached + "/model.pt")
assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
PY
	fail "direct_io=torch: a private map or torch.load differs"
ck_umount "$tmp/dio"

ck_umount "$tmp/mnt"
