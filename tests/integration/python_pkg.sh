#!/bin/sh
# The ckptfs Python package (python/ckptfs) against a real writable mount
# whose daemon watches the fake NVML (-o health=nvml), with the torch
# Python (tests/py/pkg_check.py):
#  - resume_info() and settled_resume_info() give ckptctl resume-info's
#    answer (paths in the mount or elsewhere, None, CkptctlError), the
#    latter once a save in progress held still;
#  - ckptctl found through $CKPTCTL, the source tree, PATH, in that order;
#    the native library through $CKPTFS_PY_LIB;
#  - with an XID error in the trace: emergency_flag_up() and EmergencyWatch
#    see the daemon's flag and its reason, ckptfs.hf.EmergencyCallback asks
#    for one save (transformers' TrainerCallback where it imports, a
#    stand-in base class here), is_committed() / wait_committed() /
#    in_mount(), and the flag goes as a checkpoint commits; where
#    transformers imports, a real Trainer with the callback saves at once;
#  - `pip install --target` of python/ (offline, --no-build-isolation)
#    imports and runs from there.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
tmp=$(ck_tmpdir)
store=$tmp/store mnt=$tmp/mnt trace=$tmp/trace
LD_LIBRARY_PATH=$CKPT_BUILDDIR/tests/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CKPT_FAKE_NVML_TRACE=$trace
export LD_LIBRARY_PATH CKPT_FAKE_NVML_TRACE
[ -f "$CKPT_BUILDDIR/tests/nvml/libnvidia-ml.so.1" ] || fail "the fake NVML is not built (make check builds it)"
check() { ck_py pkg_check.py "$@"; }

echo "gpu=0 name=FakeH100 temp=60 power=300 util=95 memutil=40 used=60000 total=81559" >"$trace"
"$CKPTCTL" init "$store"
mkdir -p "$tmp/runs/idle/checkpoint-1"
echo '{}' >"$tmp/runs/idle/checkpoint-1/config.json"
ck_import "$store" "$tmp/runs/idle" 0
ck_mount "$store" "$mnt" -o compact=0,health=nvml,health_interval=1,risk_threshold=0.25
mkdir "$mnt/run" "$mnt/hfrun"
ck_save_small "$mnt" run 100 2000
ck_save_small "$mnt" run 200 1000

echo "== resume_info, where ckptctl is"
# The library: a shared object the interpreter has loaded already.
lib=$("$TORCH_PYTHON" -c 'import _ctypes; print(_ctypes.__file__)')
check resume "$store" run "$mnt" + native "$lib" || fail "resume_info"
# $CKPTCTL unset: the source tree's build (built in place), else PATH.
mkdir "$tmp/bin"
ln -s "$CKPTCTL" "$tmp/bin/ckptctl"
expected=$tmp/bin/ckptctl
[ -x "$CKPT_SRCDIR/ckptctl" ] && expected=$CKPT_SRCDIR/ckptctl
env -u CKPTCTL PATH="$tmp/bin:$PATH" PYTHONDONTWRITEBYTECODE=1 \
	"$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/pkg_check.py" locate "$expected" || fail "ckptctl_path()"

echo "== a save in progress: settled_resume_info waits for it to hold still"
mkdir "$mnt/run/checkpoint-250"
check settle "$store" run 2 || fail "settled_resume_info"

echo "== the emergency flag"
echo "gpu=0 xid=48" >>"$trace"
ck_until 10 test -e "$mnt/run/trigger_checkpoint.flag" || fail "no flag 10 s after the XID"
ck_until 5 test -e "$mnt/hfrun/trigger_checkpoint.flag" || fail "no flag in hfrun"
check flag "$mnt/run" "$mnt/idle" + callback "$mnt/run" + \
	committed "$mnt/run" checkpoint-200 checkpoint-250 "$tmp/runs/idle" || fail "the emergency flag"
ck_save_small "$mnt" run 300 0
check noflag "$mnt/run" || fail "the flag after the emergency checkpoint"
check trainer "$mnt/hfrun" || fail "the Trainer with EmergencyCallback"
ck_umount "$mnt"

echo "== pip install --target (offline)"
"$TORCH_PYTHON" -m pip --version >/dev/null 2>&1 || skip "$TORCH_PYTHON has no pip (Debian: python3-pip)"
# A copy: pip builds in the source folder, which may be read-only.
cp -r "$CKPT_SRCDIR/python" "$tmp/pysrc"
"$TORCH_PYTHON" -m pip install -q --no-build-isolation --no-index --target "$tmp/site" "$tmp/pysrc" \
	>"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; fail "pip install --target"; }
PYTHONPATH="$tmp/site" PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" \
	"$CKPT_SRCDIR/tests/py/pkg_check.py" installed "$tmp/site" || fail "the pip-installed package"
echo PASS
