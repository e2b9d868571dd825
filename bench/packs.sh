#!/bin/sh
# The packed store through the mount on a real training run; see
# bench/packs.py and docs/bench.md ("packs.sh").
#   bench/packs.sh [--steps 200] [--finetune-steps 100] [--runs 5] [--loads-only] [--train-only] [--mount-opts O]
# Trains bench/train_gpt.py with Debian's torch 1.13 on CPU (several
# minutes on 2 cores), saving through four writable mounts, then compacts
# each store and times torch.load through the mount.  Scratch goes to
# $BENCH_DIR (default /var/tmp/ckptfs-packs: a disk, not a tmpfs; about
# 3 GB), removed at the end unless BENCH_KEEP=1 (a kept directory is
# reused: training is skipped, compaction runs again only on what is new).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
for p in ckptfs ckptctl; do
	[ -x "$top/$p" ] || { echo "$top/$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
dir=${BENCH_DIR:-/var/tmp/ckptfs-packs}
mkdir -p "$dir"
cleanup() {
	for m in "$dir"/mnt-*; do
		grep -q " $m fuse" /proc/mounts 2>/dev/null && fusermount3 -u "$m"
	done
	[ "${BENCH_KEEP:-0}" = 1 ] || rm -rf "$dir"
}
trap cleanup EXIT INT TERM
CKPTFS="${CKPTFS:-$top/ckptfs}" CKPTCTL="${CKPTCTL:-$top/ckptctl}" ${TORCH_PYTHON:-/usr/bin/python3} -B "$top/bench/packs.py" \
	--work "$dir" "$@"
