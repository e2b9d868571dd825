#!/bin/sh
# One store on a GlusterFS volume, two nodes (docs/bench.md, "gluster"):
# the volume (replica 2, both bricks on this machine) mounted twice, as
# tests/integration/gluster.sh sets it up, a writable ckptfs on node A and
# a read-only one on node B, each with its own index.
#   1. torch.load of a checkpoint (MIB MiB, default 512) through node B's
#      ckptfs against torch.load of the same file straight from node B's
#      GlusterFS mount, cold (page cache dropped) and warm, RUNS runs each
#      (default 5), alternating which goes first; with passthrough (the
#      default: the kernel reads the backing file) and through the daemon
#      (-o nopassthrough).
#   2. A commit on node A to the checkpoint visible on node B: COMMITS
#      commits (default 20) of a small checkpoint, renamed into place
#      through node A's mount; node B polls every 10 ms; for refresh=1 and
#      the default refresh=5.
# Run from the build directory as root: sh bench/gluster.sh [MIB [RUNS [COMMITS]]].
# Prints every sample and the medians; nothing is asserted.
set -eu
mib=${1:-512} runs=${2:-5} commits=${3:-20}
CKPT_BUILDDIR=$(pwd)
CKPT_SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
export CKPT_BUILDDIR CKPT_SRCDIR
unset CKPT_REQUIRE_ALL
. "$CKPT_SRCDIR/tests/integration/lib.sh"
. "$CKPT_SRCDIR/tests/integration/gluster.sh"
need_fuse
need_torch
need_gluster
tmp=$(ck_tmpdir)
py() { PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$CKPT_SRCDIR/bench/gluster_load.py" "$@"; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

ck_gluster ckptbench
sa=$node_a/store sb=$node_b/store ia=$tmp/index-a ib=$tmp/index-b ma=$tmp/mnt-a mb=$tmp/mnt-b
echo "== $(git -C "$CKPT_SRCDIR" rev-parse --short HEAD 2>/dev/null || echo ?), $(nproc) CPUs, $(uname -r)"
"$CKPTCTL" --index-dir "$ia" init "$sa" >/dev/null
ck_mount "$sa" "$ma" -o compact=0,index_dir="$ia"
mkdir "$ma/run"
py save "$ma/run/tmp" "$mib" 1
mv "$ma/run/tmp" "$ma/run/step-1"
size=$(stat -c %s "$sb/data/run/step-1/model.pt")
echo "checkpoint: $size bytes"

# --- 1. torch.load through node B's ckptfs vs straight from node B's client ----------
for mode in passthrough nopassthrough; do
	ck_mount "$sb" "$mb" -o ro,$mode,index_dir="$ib"
	: >"$tmp/cold.direct" && : >"$tmp/cold.ckptfs" && : >"$tmp/warm.direct" && : >"$tmp/warm.ckptfs"
	for i in $(seq "$runs"); do
		if [ $((i % 2)) = 1 ]; then order="direct ckptfs"; else order="ckptfs direct"; fi
		for w in $order; do
			if [ $w = direct ]; then f=$sb/data/run/step-1/model.pt; else f=$mb/run/step-1/model.pt; fi
			drop
			py load "$f" >>"$tmp/cold.$w"
			py load "$f" >>"$tmp/warm.$w"
		done
	done
	for c in cold warm; do
		d=$(median <"$tmp/$c.direct") k=$(median <"$tmp/$c.ckptfs")
		echo "torch.load $c, $mode: direct from node B's GlusterFS $(tr '\n' ' ' <"$tmp/$c.direct")-> median $d s;" \
			"through node B's ckptfs $(tr '\n' ' ' <"$tmp/$c.ckptfs")-> median $k s;" \
			"ckptfs/direct speed $(echo "scale=3; $d / $k" | bc)x"
	done
	ck_umount "$mb"
done

# --- 2. commit on node A -> visible on node B ------------------------------------------
for refresh in 1 5; do
	ck_mount "$sb" "$mb" -o ro,refresh=$refresh,index_dir="$ib"
	: >"$tmp/visible"
	for i in $(seq "$commits"); do
		step=$((100 * refresh + i))
		mkdir "$ma/run/tmp-$step"
		printf '{"step": %d}\n' "$step" >"$ma/run/tmp-$step/config.json"
		"$TORCH_PYTHON" -c "import torch; torch.save({'w': torch.ones(1024)}, '$ma/run/tmp-$step/model.pt')"
		mv "$ma/run/tmp-$step" "$ma/run/step-$step"   # returns once committed
		t0=$(date +%s%N)
		while [ ! -e "$mb/run/step-$step" ]; do sleep 0.01; done
		echo "$(( ($(date +%s%N) - t0) / 1000000 ))" >>"$tmp/visible"
		sleep 0.$(( (i * 37) % 10 ))   # commits land at scattered points of the refresh period
	done
	sort -n "$tmp/visible" >"$tmp/visible.sorted"
	echo "commit on node A -> visible on node B, refresh=$refresh, $commits commits (ms):" \
		"$(tr '\n' ' ' <"$tmp/visible.sorted")"
	echo "  min $(head -1 "$tmp/visible.sorted"), median $(median <"$tmp/visible.sorted")," \
		"90th percentile $(sed -n "$(( (commits * 9 + 9) / 10 ))p" "$tmp/visible.sorted"), max $(tail -1 "$tmp/visible.sorted")"
	ck_umount "$mb"
done
ck_umount "$ma"
