#!/bin/sh
# Enum members in checkpoints (DeepSpeed's ZeroStageEnum and the like):
# Python >= 3.11 pickles them as builtins.getattr(EnumClass, 'NAME'), so a
# blanket ban of getattr would refuse real DeepSpeed optimizer states.
# Import must accept that use of getattr, serve the file, and still refuse
# every other use of getattr: a dunder attribute, a dangerous class, or
# calling what getattr returned.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
mkdir -p "$tmp/py" "$tmp/run/checkpoint-1"
cat >"$tmp/py/zenum.py" <<'PY'
import enum
class ZeroStageEnum(int, enum.Enum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
PY
PYTHONPATH="$tmp/py" "$TORCH_PYTHON" - "$tmp/run/checkpoint-1" <<'PY'
import collections, subprocess, sys, torch, zenum
d = sys.argv[1]
torch.manual_seed(0)
torch.save({"zero_stage": zenum.ZeroStageEnum.gradients, "w": torch.randn(4, 4)}, d + "/optim_states.pt")

class Dunder:
    def __reduce__(self):
        return (getattr, (collections.OrderedDict, "__init__"))
class Dangerous:
    def __reduce__(self):
        return (getattr, (subprocess.Popen, "wait"))
class CallsResult:
    def __reduce__(self):
        return (collections.OrderedDict.fromkeys, (["a"],))
for name, obj in [("dunder", Dunder()), ("dangerous", Dangerous()), ("calls_result", CallsResult())]:
    torch.save({"x": obj, "w": torch.zeros(2)}, "%s/evil_%s.pt" % (d, name))
PY
"$CKPTCTL" init "$tmp/store"
set +e
"$CKPTCTL" import "$tmp/store" "$tmp/run" 2>"$tmp/import.err"
rc=$?
set -e
cat "$tmp/import.err"
[ $rc -eq 2 ] || fail "import exited $rc, expected 2 (some files refused)"
grep -q "optim_states.pt" "$tmp/import.err" && fail "the Enum-member file was refused"
for name in dunder dangerous calls_result; do
	grep "evil_$name.pt" "$tmp/import.err" | grep -q "dangerous global" ||
		fail "evil_$name.pt was not refused as dangerous"
done

ck_mount "$tmp/store" "$tmp/mnt" -o ro
PYTHONPATH="$tmp/py" "$TORCH_PYTHON" - "$tmp/run/checkpoint-1/optim_states.pt" \
	"$tmp/mnt/run/checkpoint-1/optim_states.pt" <<'PY'
import sys, torch, zenum
# DeepSpeed loads its own files with the full unpickler (torch >= 2.6 defaults to weights_only)
a, b = (torch.load(p, weights_only=False) for p in sys.argv[1:3])
assert b["zero_stage"] is zenum.ZeroStageEnum.gradients, b
assert torch.equal(a["w"], b["w"])
print("Enum-member checkpoint served through the mount: equal")
PY
ck_umount "$tmp/mnt"
