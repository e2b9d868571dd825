#!/bin/sh
# DCP benchmarks of ckptfs (bench/dcp_read.py; docs/bench.md):
#   bench/dcp_read.sh [--gib 1] [--fqns 10000] [--ranks 8] [--runs 5] [--only load|list]
# Scratch files go to $BENCH_DIR (default /var/tmp/ckptfs-bench-dcp: a disk,
# not a tmpfs; about 4 x --gib free) and are removed at the end.  Run as root
# to drop the page cache before cold loads.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
for p in ckptfs ckptctl; do
	[ -x "$top/$p" ] || { echo "$top/$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
dir=${BENCH_DIR:-/var/tmp/ckptfs-bench-dcp}
mkdir -p "$dir"
trap 'for m in "$dir"/mnt "$dir"/lmnt; do fusermount3 -u "$m" 2>/dev/null || true; done; rm -rf "$dir"' EXIT
CKPTFS="${CKPTFS:-$top/ckptfs}" CKPTCTL="${CKPTCTL:-$top/ckptctl}" "${TORCH_PYTHON:-/usr/bin/python3}" -B "$top/bench/dcp_read.py" --dir "$dir" "$@"
