#!/bin/sh
# The checks only a GPU machine can run: the real-client integration tests
# under that machine's Python (torch 2.x with CUDA, safetensors,
# transformers: map_location=cuda, safe_open(device=cuda), from_pretrained
# and greedy generation on the weights views, torch 2.x's own DCP writer
# and reader, the transformers Trainer through a writable mount and with
# the ckptfs package's EmergencyCallback), then the health watcher against
# the real NVML.  Not part of `make check`: CI has no GPU.
#
#   tests/gpu/checks.sh BUILDDIR LOGDIR [TEST...]
#
# BUILDDIR holds ckptfs and ckptctl; each test's log and health.json go
# to LOGDIR.  TORCH_PYTHON defaults to python3 (the GPU machine's torch);
# CHECK_TIMEOUT (300 s) bounds each test.
# Prints one PASS/FAIL/SKIP line per check; exits 1 if any failed.
set -u
[ $# -ge 2 ] || { sed -n 2,14p "$0"; exit 2; }
build=$(cd "$1" && pwd) logs=$2
shift 2
mkdir -p "$logs"
src=$(cd "$(dirname "$0")/../.." && pwd)
export CKPT_BUILDDIR="$build" CKPT_SRCDIR="$src" TORCH_PYTHON="${TORCH_PYTHON:-python3}"
export CKPT_REQUIRE_ALL=1
tests=${*:-real_clients eval_views eval_dcp dcp_merge composite_resume example_resume python_pkg}
# python_pkg raises the emergency flag through the fake NVML (a check
# program: `make check` builds it, this script too).
[ -f "$build/tests/nvml/libnvidia-ml.so.1" ] || make -C "$build" tests/nvml/libnvidia-ml.so.1 >/dev/null
failed=0

"$TORCH_PYTHON" - <<'EOF' | tee "$logs/versions.txt"
import importlib, torch
print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")
for m in ("safetensors", "transformers", "numpy"):
    try:
        print(m, importlib.import_module(m).__version__)
    except ImportError as e:
        print(m, "absent:", e)
EOF

# The watcher against the real NVML: a read-only mount with health=nvml
# publishes every GPU's metrics with no error within a few rounds.
tmp=$(mktemp -d)
"$build/ckptctl" init "$tmp/store" >/dev/null
mkdir "$tmp/mnt"
if "$build/ckptfs" "$tmp/store" "$tmp/mnt" -o ro,health=nvml,health_interval=1 2>"$logs/health.err"; then
	sleep 5
	cp "$tmp/mnt/.ckptfs/health.json" "$logs/health.json"
	fusermount3 -u "$tmp/mnt" || umount "$tmp/mnt"
	if "$TORCH_PYTHON" - "$logs/health.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["state"] == "ok", d["state"]
assert d["rounds"] >= 3, d["rounds"]
assert d["gpus"], "no GPU"
for g in d["gpus"]:
    assert not g.get("error"), g
    m = g["metrics"]
    assert 0 < m["temperature_c"] < 110 and m["power_w"] > 0 and m["memory_total"] > 0, m
    assert 0 <= g["score"] <= 1, g
    print("GPU %s %s: %s C, %.0f W, %d MiB of %d, score %.3f, factors %s" % (
        g["index"], g["name"], m["temperature_c"], m["power_w"], m["memory_used"] >> 20,
        m["memory_total"] >> 20, g["score"], g["factors"]))
EOF
	then echo "PASS: health=nvml on the real NVML"
	else echo "FAIL: health=nvml on the real NVML"; failed=1; cat "$logs/health.json" "$logs/health.err"
	fi
else
	echo "FAIL: ckptfs -o health=nvml did not mount"; failed=1; cat "$logs/health.err"
fi
rm -rf "$tmp"

for t in $tests; do
	start=$(date +%s)
	timeout "${CHECK_TIMEOUT:-300}" sh "$src/tests/integration/$t.sh" >"$logs/$t.log" 2>&1
	rc=$?
	case $rc in
	0) verdict=PASS ;;
	77) verdict=SKIP ;;
	*) verdict="FAIL (exit $rc)" failed=1 ;;
	esac
	echo "$verdict: $t ($(($(date +%s) - start)) s)"
	grep -E "^absent:|greedy generation|cuda" "$logs/$t.log" | sort | uniq -c | head -20
	[ $rc = 0 ] || [ $rc = 77 ] || tail -25 "$logs/$t.log"
done

exit $failed
