#!/bin/sh
# Write-path benchmark of the writable ckptfs mount; see docs/bench.md.
#   bench/write.sh [--gib 1] [--rss-gib 4] [--runs 3] [--mount-opts OPTS]
# Scratch files go to $BENCH_DIR (default /var/tmp/ckptfs-bench-write: a
# disk, not a tmpfs; the plain directory and the store share it); it needs
# about (5 x --runs + 1) x --gib + --rss-gib free (20 GiB with the
# defaults) and is removed at the end.  Run as root to drop the page cache
# before each save.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
for p in ckptfs ckptctl; do
	[ -x "$top/$p" ] || { echo "$top/$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
dir=${BENCH_DIR:-/var/tmp/ckptfs-bench-write}
mkdir -p "$dir"
cleanup() {
	if grep -q " $dir/mnt fuse" /proc/mounts; then fusermount3 -u "$dir/mnt" || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
CKPTFS="${CKPTFS:-$top/ckptfs}" CKPTCTL="${CKPTCTL:-$top/ckptctl}" /usr/bin/python3 -B "$top/bench/write.py" --dir "$dir" "$@"
