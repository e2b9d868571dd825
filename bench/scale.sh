#!/bin/sh
# The store at scale (docs/bench.md, "scale"): a synthetic store of N
# checkpoints x T tensors (default 500 x 10,000: manifests written by the
# store's writer, sparse files) in a scratch directory, then
#   1. its index built from the manifests (ckptctl reindex: what a node's
#      first open of a shared store does);
#   2. ckptfs mounted read-only: mount to `ls` listing every checkpoint, and
#      the daemon's RSS then;
#   3. bench/scale refresh: open to listed in-process, a refresh when
#      nothing changed, and refreshes after 1, 10 and 100 checkpoints
#      committed by another node: on the local index, then as on a shared
#      filesystem (CKPT_TEST_SHARED_FS=1: node-local indexes following the
#      journal).
# Run from the build directory, as root (for the mount): sh bench/scale.sh
# [N [T [DIR]]].  Needs about 3 GB of disk per 500 x 10,000.
set -eu
n=${1:-500} t=${2:-10000}
top=${3:-$(mktemp -d "${TMPDIR:-/tmp}/ckptfs-scale.XXXXXX")}
b=$(pwd)
mkdir -p "$top"
store=$top/store mnt=$top/mnt
cleanup() {
	grep -q " $mnt fuse" /proc/mounts && fusermount3 -u "$mnt"
	rm -rf "$top"
}
trap cleanup EXIT
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }

echo "== $n checkpoints x $t tensors, in $top ($(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo ?)), load $(cut -d" " -f1-3 /proc/loadavg)"
"$b/bench/scale" make "$store" "$n" "$t"
echo "manifests: $(du -sh "$store/manifests" | cut -f1)"
t0=$(now)
"$b/ckptctl" reindex "$store" -q
echo "index built from the manifests: $(since "$t0") s, $(du -sh "$store/index" | cut -f1)"

mkdir -p "$mnt"
sync
echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true
t0=$(now)
"$b/ckptfs" "$store" "$mnt" -o ro,nowarmup,pidfile="$top/pid"
listed=$(ls "$mnt/run" | wc -l)
echo "mount to listed: $(since "$t0") s ($listed checkpoints listed)"
ls -l "$mnt/run/checkpoint-$n/" >/dev/null
echo "daemon RSS after listing: $(awk '/VmRSS/ { printf "%.1f MiB", $2 / 1024 }' /proc/"$(cat "$top/pid")"/status)"
fusermount3 -u "$mnt"

echo "-- refresh, STORE/index (a local filesystem)"
"$b/bench/scale" refresh "$store" "$t" 1 10 100 2>/dev/null
echo "-- refresh, node-local indexes (as on a shared filesystem)"
CKPT_TEST_SHARED_FS=1 "$b/bench/scale" refresh "$store" "$t" 1 10 100 2>/dev/null
