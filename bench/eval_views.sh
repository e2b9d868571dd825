#!/bin/sh
# An eval box over a compacted store: MNT/.ckptfs/weights/ of 20 checkpoints
# against plain safetensors copies, and listing layers/ of a 10,000-tensor
# checkpoint; see bench/eval_views.py and docs/bench.md ("eval_views.sh").
#   bench/eval_views.sh [--runs 3] [--listing-only] [--mount-opts OPTS]
# Trains bench/train_gpt.py with Debian's torch 1.13 on CPU first (a few
# minutes on 2 cores).  Scratch goes to $BENCH_DIR (default
# /var/tmp/ckptfs-evalviews: a disk, not a tmpfs; about 2 GB), removed at
# the end unless BENCH_KEEP=1 (a kept directory is reused).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
# CKPTFS=, CKPTCTL=: other binaries (an older build, to compare)
CKPTFS=${CKPTFS:-$top/ckptfs} CKPTCTL=${CKPTCTL:-$top/ckptctl}
for p in "$CKPTFS" "$CKPTCTL"; do
	[ -x "$p" ] || { echo "$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
dir=${BENCH_DIR:-/var/tmp/ckptfs-evalviews}
mkdir -p "$dir"
cleanup() {
	for m in "$dir"/mnt*; do
		grep -q " $m fuse" /proc/mounts 2>/dev/null && fusermount3 -u "$m"
	done
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM
CKPTFS="$CKPTFS" CKPTCTL="$CKPTCTL" ${TORCH_PYTHON:-/usr/bin/python3} -B "$top/bench/eval_views.py" \
	--work "$dir" "$@"
