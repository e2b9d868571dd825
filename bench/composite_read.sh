#!/bin/sh
# Read-path benchmark of ckptfs composites; see docs/bench.md.
#   bench/composite_read.sh [--gib 1] [--rss-gib 4] [--tensors 10000] [--runs 3]
#   bench/composite_read.sh --resume [--gib 0.5] [--trials 7] [--versus OPTS]   (first load after a mount;
#       --versus: each trial also with -o OPTS, against the same plain loads)
# Scratch files go to $BENCH_DIR (default /var/tmp/ckptfs-bench: a disk,
# not a tmpfs); it needs about 3 x the largest size free and is removed at
# the end.  Run as root to drop the page cache between cold runs.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
for p in ckptfs ckptctl; do
	[ -x "$top/$p" ] || { echo "$top/$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
dir=${BENCH_DIR:-/var/tmp/ckptfs-bench}
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT
CKPTFS="${CKPTFS:-$top/ckptfs}" CKPTCTL="${CKPTCTL:-$top/ckptctl}" /usr/bin/python3 -B "$top/bench/composite_read.py" --dir "$dir" "$@"
