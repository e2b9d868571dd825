#!/bin/sh
# The lossy tier on a real training run; see bench/lossy.py and docs/bench.md
# ("The lossy tier").
#   bench/lossy.sh [--steps 200] [--bound 0.05] [--anchor-interval 4] [--bounds 0.01,...] [--runs 5] [--resume-steps 200] [--loads-only]
# Trains bench/train_gpt.py with Debian's torch 1.13 on CPU through writable
# mounts (several minutes on 2 cores), codes the full-save and LLMTailor
# series lossily, times torch.load of lossy checkpoints through the mount and
# resumes training from a lossy and an exact step-100 checkpoint (tens of
# minutes more).  Scratch goes to $BENCH_DIR (default /var/tmp/ckptfs-lossy:
# a disk, not a tmpfs; about 3 GB), removed at the end unless BENCH_KEEP=1.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
for p in ckptfs ckptctl; do
	[ -x "$top/$p" ] || { echo "$top/$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
dir=${BENCH_DIR:-/var/tmp/ckptfs-lossy}
mkdir -p "$dir"
cleanup() {
	for m in "$dir"/mnt-*; do
		grep -q " $m fuse" /proc/mounts 2>/dev/null && fusermount3 -u "$m"
	done
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM
CKPTFS="${CKPTFS:-$top/ckptfs}" CKPTCTL="${CKPTCTL:-$top/ckptctl}" ${TORCH_PYTHON:-/usr/bin/python3} -B "$top/bench/lossy.py" \
	--work "$dir" "$@"
