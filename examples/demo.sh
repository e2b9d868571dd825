#!/usr/bin/env bash
# ckptfs end to end, in about a minute on a laptop CPU:
#   1. train a tiny Llama-like model; checkpoint-10 is a full save,
#      checkpoint-20 saves only decoder blocks 1 and 3 (a partial save)
#   2. import the run into a store (in place: nothing is copied)
#   3. mount the store read-only: checkpoint-20 looks complete
#   4. resume training from the mounted checkpoint-20 with plain torch.load,
#      and check it is bit-identical to resuming from an offline merge
#   5. unmount
# Installs missing Debian packages (.ci/deps, needs root or sudo) and builds
# ckptfs first if needed.  Work files go to $DEMO_DIR (kept) or a temporary
# directory (removed at the end).
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"
py=/usr/bin/python3   # Debian's python3-torch, whatever python comes first on PATH

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

if ! missing=$(.ci/deps --missing); then
	say "Installing missing packages: $(echo $missing)"
	.ci/deps
fi
if [ -n "${DEMO_DIR:-}" ]; then
	work=$DEMO_DIR
	mkdir -p "$work"
else
	work=$(mktemp -d "${TMPDIR:-/tmp}/ckptfs-demo.XXXXXX")
fi
mnt=$work/mnt
cleanup() {
	if grep -q " $mnt fuse" /proc/mounts; then fusermount3 -u "$mnt"; fi
	[ -n "${DEMO_DIR:-}" ] || rm -rf "$work"
}
trap cleanup EXIT

build() {
	if [ ! -f Makefile ]; then
		[ -x configure ] || ./autogen.sh
		./configure
	fi
	make -j2 ckptfs ckptctl
}
say "Building ckptfs (if needed)"
build >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

say "1. Train, with a full save at step 10 and a partial save at step 20"
rm -rf "$work/run" "$work/store" "$work/merged"
$py -B examples/tiny_train.py train "$work/run"
du -sh "$work/run"/checkpoint-*

say "2. Import the run into a store (indexes the files where they are)"
run ./ckptctl init "$work/store"
run ./ckptctl import "$work/store" "$work/run"
run ./ckptctl ls "$work/store" run

say "3. Mount it read-only: checkpoint-20 is complete"
mkdir -p "$mnt"
run ./ckptfs "$work/store" "$mnt" -o ro
echo "on disk, checkpoint-20 has:"
ls -l "$work/run/checkpoint-20" | sed 1d
echo "in the mount, checkpoint-20 has:"
ls -l "$mnt/run/checkpoint-20" | sed 1d
echo "where optimizer.pt's pieces come from (getfattr -n user.ckptfs.sources):"
getfattr --absolute-names -n user.ckptfs.sources --only-values "$mnt/run/checkpoint-20/optimizer.pt" |
	$py -c 'import json, sys
d = json.load(sys.stdin)
for s in d.get("sources", []):
    print("  %-14s %4s tensors  %s" % (s.get("checkpoint"), s.get("tensors", "?"), s.get("path")))'
echo "where some of model.safetensors' tensors come from:"
echo "$ ./ckptctl show $work/store run/checkpoint-20 model.safetensors | grep ..."
./ckptctl show "$work/store" run/checkpoint-20 model.safetensors | grep -E '^TENSOR|q_proj|lm_head'

say "4. Resume training from the mount, as a trainer would"
echo "(and, to compare, from a copy merged offline the slow way)"
$py -B tests/py/offline_merge.py "$work/merged/checkpoint-20" \
	"$work/run/checkpoint-10" "$work/run/checkpoint-20" >/dev/null
$py -B examples/tiny_train.py resume "$mnt/run/checkpoint-20" "$work/merged/checkpoint-20"

say "5. Unmount"
run fusermount3 -u "$mnt"
echo "done${DEMO_DIR:+; files are in $work}"
