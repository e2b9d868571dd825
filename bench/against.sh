#!/bin/sh
# Another revision's binaries against this tree's, in the same run: the
# read path (bench/composite_read.sh) and compaction (bench/packs.sh) with
# REV's ckptfs and ckptctl and with this tree's, in turn; see docs/bench.md
# ("against.sh").
#   bench/against.sh REV [--gib 1] [--runs 3] [--rounds 2] [--steps 60]
# REV is built from `git archive` into $BENCH_DIR (default
# /var/tmp/ckptfs-against, removed at the end).  Each round runs
# composite_read.sh once per side (--rss-gib none), the sides in turn, the
# first side alternating between rounds.  Then bench/train_gpt.py trains
# once through REV's writable mounts (--steps steps, so that the stores are
# in the format both sides read) and each side compacts its own copy of the
# four stores and times torch.load through its mounts.  The bench scripts
# and their Python are this tree's; only the binaries differ.  Run as root.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || { sed -n '6p' "$0" | sed 's/^# *//' >&2; exit 64; }
rev=$1
shift
gib=1 runs=3 rounds=2 steps=60
while [ $# -gt 0 ]; do
	case $1 in
	--gib) gib=$2; shift 2 ;;
	--runs) runs=$2; shift 2 ;;
	--rounds) rounds=$2; shift 2 ;;
	--steps) steps=$2; shift 2 ;;
	*) echo "against.sh: unknown option $1" >&2; exit 64 ;;
	esac
done
for p in ckptfs ckptctl; do
	[ -x "$top/$p" ] || { echo "$top/$p is not built (./autogen.sh && ./configure && make)" >&2; exit 1; }
done
sha=$(git -C "$top" rev-parse --short "$rev^{commit}")
dir=${BENCH_DIR:-/var/tmp/ckptfs-against}
mkdir -p "$dir"
trap 'rm -rf "$dir"' EXIT

echo "building $rev ($sha) in $dir/old ..." >&2
rm -rf "$dir/old"
mkdir -p "$dir/old"
git -C "$top" archive "$sha" | tar -x -C "$dir/old"
(cd "$dir/old" && ./autogen.sh && ./configure && make -j2 ckptfs ckptctl) >"$dir/old-build.log" 2>&1 ||
	{ tail -20 "$dir/old-build.log" >&2; exit 1; }
old_fs=$dir/old/ckptfs old_ctl=$dir/old/ckptctl
new_fs=$top/ckptfs new_ctl=$top/ckptctl
head=$(git -C "$top" describe --always --dirty)

# side NAME: the binaries of "old" or "new".
side() {
	if [ "$1" = old ]; then
		echo "$old_fs $old_ctl"
	else
		echo "$new_fs $new_ctl"
	fi
}

read_path() {
	set -- $(side "$1") "$1" "$2"
	echo "=== composite_read.sh, round $4: $3 ($( [ "$3" = old ] && echo "$sha" || echo "$head"))"
	CKPTFS=$1 CKPTCTL=$2 BENCH_DIR=$dir/read sh "$top/bench/composite_read.sh" \
		--gib "$gib" --runs "$runs" --rss-gib "" | sed -n '/^| measurement/,$p'
}

r=1
while [ "$r" -le "$rounds" ]; do
	if [ $((r % 2)) = 1 ]; then first=old second=new; else first=new second=old; fi
	read_path "$first" "$r"
	read_path "$second" "$r"
	r=$((r + 1))
done

echo "training $steps steps through $sha's mounts ..." >&2
CKPTFS=$old_fs CKPTCTL=$old_ctl BENCH_KEEP=1 BENCH_DIR=$dir/trained \
	sh "$top/bench/packs.sh" --train-only --steps "$steps" --finetune-steps $((steps / 2)) >&2
for s in old new; do
	set -- $(side "$s")
	echo "=== packs.sh on a copy of the trained stores: $s ($( [ "$s" = old ] && echo "$sha" || echo "$head"))"
	rm -rf "$dir/packs-$s"
	cp -a "$dir/trained" "$dir/packs-$s"
	CKPTFS=$1 CKPTCTL=$2 BENCH_DIR=$dir/packs-$s sh "$top/bench/packs.sh" --runs "$runs"
	rm -rf "$dir/packs-$s"
done
