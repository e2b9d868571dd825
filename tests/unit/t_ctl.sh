#!/bin/sh
# The control directory without a mount (tests/unit/ctl_tool over the
# FUSE-free src/ctl): weights/, layers/, history/ and recipes/ of tiny Llama
# series saved as safetensors + torch.save, torch.save alone, safetensors
# alone and single-file combined checkpoints, partial saves included, read
# by the reference safetensors reader and torch (tests/py/ctl_check.py);
# shards; ckptctl diff and recipe, and the refusals of bad recipes with
# their lines.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_torch

tmp=$(ck_tmpdir)
store=$tmp/store
tool="$CKPT_BUILDDIR/tests/unit/ctl_tool"
work=$tmp/work
# (ctl_check.py runs commands joined by "+" in one process: torch loads once.)
ck_py ctl_check.py make "$work" + make-wide "$work/wide" + yaml mix "$tmp/mix.yaml" + yaml cross "$tmp/cross.yaml" + \
	yaml based "$tmp/based.yaml" || fail "making the series"
"$CKPTCTL" init "$store" >/dev/null
for s in run grow other sonly ponly single tied; do
	ck_import "$store" "$work/$s" 0
done

# A copy of what the control directory serves, made through its extents.
ctl=$tmp/ctl
copy() {
	mkdir -p "$(dirname "$ctl/$1")"
	"$tool" ${2:-} "$store" copy "$1" "$ctl/$1" || fail "ctl_tool copy $1"
}
for s in run grow other sonly ponly single tied; do
	copy "weights/$s"
done
mkdir "$tmp/whole"
mv "$ctl/weights" "$tmp/whole/"

# Above the shard size: shards and an index, read through the index.
for s in run grow other sonly ponly single tied; do
	copy "weights/$s" "-s 40000"
done
[ -f "$ctl/weights/run/checkpoint-30/model.safetensors.index.json" ] || fail "no index above the shard size"
set -- weights "$tmp/whole" "$work" + weights "$ctl" "$work"

for ck in run/checkpoint-10 run/checkpoint-20 run/checkpoint-30 grow/checkpoint-10 single/model_000020.pt \
	ponly/checkpoint-30 tied/checkpoint-20; do
	copy "layers/$ck"
	set -- "$@" + layers "$ctl" "$work" "${ck%%/*}" "${ck#*/}"
done
copy layers/grow/checkpoint-20
copy history/grow
set -- "$@" + history "$ctl" "$work"
# stat gives the size LAYER.json has once its numbers are filled in
size=$("$tool" "$store" stat layers/run/checkpoint-30/layers.2.json)
[ "$size" = "file $(wc -c <"$ctl/layers/run/checkpoint-30/layers.2.json")" ] || fail "LAYER.json: stat says $size"
[ "$("$tool" "$store" xattr layers/run/checkpoint-30/layers.2.json user.ckptfs.kind)" = layer-json ] ||
	fail "user.ckptfs.kind"
"$tool" "$store" xattr weights/run/checkpoint-20/model.safetensors user.ckptfs.sources >"$tmp/src.json" ||
	fail "user.ckptfs.sources"
set -- "$@" + sources "$tmp/src.json"

# weights/ builds its catalogs without the optimizer state: the same
# weights, no moments, optimizer.pt never parsed.
whole=$("$tool" "$store" catalog run/checkpoint-20) || fail "ctl_tool catalog"
only=$("$tool" "$store" catalog run/checkpoint-20 weights) || fail "ctl_tool catalog weights"
case $whole in
"weights "*" moments 0 "*) fail "the whole catalog of run/checkpoint-20 has no moments: $whole" ;;
*" optimizer yes") ;;
*) fail "the whole catalog of run/checkpoint-20 has no optimizer: $whole" ;;
esac
[ "$only" = "${whole%% moments*} moments 0 states 0 optimizer no" ] ||
	fail "the weights catalog of run/checkpoint-20: $only (whole: $whole)"

# ckptctl diff, within a series and across two
i=0
for pair in "run/checkpoint-10 run/checkpoint-30" "run/checkpoint-30 other/checkpoint-20" \
	"grow/checkpoint-10 grow/checkpoint-20"; do
	i=$((i + 1))
	a=${pair% *} b=${pair#* }
	"$CKPTCTL" diff "$store" "$a" "$b" --json >"$tmp/diff$i.json" || fail "ckptctl diff $pair"
	set -- "$@" + diff "$tmp/diff$i.json" "$work" "$a" "$b"
done
"$CKPTCTL" diff "$store" run/checkpoint-10 run/checkpoint-20 | grep -q "^layers.1 .* 0 .*36 " ||
	fail "diff: layers.1 should have 36 changed tensors"

# Recipes: kept in the store, served as checkpoints.
for name in mix cross based; do
	"$CKPTCTL" recipe add "$store" "$name" "$tmp/$name.yaml" || fail "recipe add $name"
	copy "recipes/$name"
	copy "weights/@recipes/$name"
	set -- "$@" + recipe "$ctl" "$work" "$name"
done
ck_py ctl_check.py "$@" || fail "weights/ (whole and in shards), layers/, history/, provenance, diff or recipes/ (see above)"
"$CKPTCTL" recipe ls "$store" | grep -q "^cross  *ok" || fail "recipe ls"
"$CKPTCTL" recipe show "$store" cross | grep -q "^blocks 0-1: other/checkpoint-20 blocks 2-3" || fail "recipe show"
"$CKPTCTL" recipe add "$store" mix "$tmp/mix.yaml" 2>"$tmp/err" && fail "a second recipe named mix"
grep -q "exists already" "$tmp/err" || fail "a taken name: $(cat "$tmp/err")"
"$CKPTCTL" recipe rm "$store" cross >/dev/null || fail "recipe rm"
"$tool" "$store" ls recipes | grep -q cross && fail "a removed recipe is still listed"

# Refusals: FILE:LINE: why.
bad() {
	printf '%s\n' "$2" >"$tmp/bad.yaml"
	if "$CKPTCTL" recipe add "$store" bad "$tmp/bad.yaml" 2>"$tmp/err"; then
		fail "recipe accepted: $2"
	fi
	grep -q "$tmp/bad.yaml:$1" "$tmp/err" || fail "expected $tmp/bad.yaml:$1, got: $(cat "$tmp/err")"
}
slice() {
	printf '  - sources:\n      - model: %s\n        layer_range: [%s]\n' "$1" "$2"
}
bad "3: unknown checkpoint 'run/checkpoint-99'" "slices:
$(slice run/checkpoint-99 "0, 4")
merge_method: passthrough"
bad "3: unknown checkpoint 'nope/checkpoint-10'" "slices:
$(slice nope/checkpoint-10 "0, 4")
merge_method: passthrough"
bad "4: layer_range \[0, 5\] out of range" "slices:
$(slice run/checkpoint-10 "0, 5")
merge_method: passthrough"
bad "7: layer_range \[2, 4\] overlaps \[0, 3\]" "slices:
$(slice run/checkpoint-10 "0, 3")
$(slice run/checkpoint-20 "2, 4")
merge_method: passthrough"
bad "1: missing layers: no slice takes block 1" "slices:
$(slice run/checkpoint-10 "0, 1")
$(slice run/checkpoint-20 "2, 4")
merge_method: passthrough"
bad "5: merge_method 'slerp' computes new tensor values" "slices:
$(slice run/checkpoint-10 "0, 4")
merge_method: slerp"
bad "6: dtype bfloat16, but" "slices:
$(slice run/checkpoint-10 "0, 4")
merge_method: passthrough
dtype: bfloat16"
bad "7: 'model.layers.0.mlp.up_proj.weight' is in block 0" "slices:
$(slice run/checkpoint-10 "0, 4")
merge_method: passthrough
post_weights:
  - name: model.layers.0.mlp.up_proj.weight
    model: run/checkpoint-20"
bad "2: models: lists whole models for averaging" "merge_method: passthrough
models: [{model: run/checkpoint-10}]"
bad " more than 100000 YAML nodes" 'a: &a [x, x, x, x, x, x, x, x, x, x]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
f: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]'
head -c 1100000 /dev/zero | tr '\0' ' ' >"$tmp/big.yaml"
"$CKPTCTL" recipe add "$store" big "$tmp/big.yaml" 2>"$tmp/err" && fail "a 1.1 MB recipe accepted"
grep -q "a recipe is at most 1048576 bytes" "$tmp/err" || fail "oversized: $(cat "$tmp/err")"
# shape mismatch: a series of another architecture (wider MLP)
ck_import "$store" "$work/wide" 0
bad "7: 'model.layers.2.mlp.gate_proj.weight' of wide/checkpoint-2 is float32 \[96, 32\] where the base has float32 \[64, 32\]" "slices:
$(slice run/checkpoint-10 "0, 2")
$(slice wide/checkpoint-2 "2, 4")
merge_method: passthrough
base_model: run/checkpoint-30"
echo "t_ctl: all checks passed"
