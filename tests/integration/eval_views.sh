#!/bin/sh
# MNT/.ckptfs through a real mount, read by real readers: weights/ of tiny
# Llama series saved as safetensors, torch.save and single-file combined
# checkpoints (partial saves included, packed by compaction) bit-exactly the
# merged weights, in shards too (-o weights_shard); layers/ and history/,
# a layer file's data through numpy memmaps; recipes (one series, and
# across two) equal to LLMTailor-style merges; a recipe of the example
# trainer's checkpoints resumed through the mount equals the offline merge
# resumed, and trains on; .ckptfs never listed (ls, du, find, cp -r, rsync);
# a recipe whose checkpoint is deleted says why.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch

tmp=$(ck_tmpdir)
store=$tmp/store
work=$tmp/work
mnt=$tmp/mnt
# (ctl_check.py runs commands joined by "+" in one process: torch loads once.)
ck_py ctl_check.py make "$work" + yaml mix "$tmp/mix.yaml" + yaml cross "$tmp/cross.yaml" + \
	yaml based "$tmp/based.yaml" + tailor-yaml tailor "$tmp/tail.yaml" || fail "making the series"
"$TORCH_PYTHON" "$CKPT_SRCDIR/examples/llmtailor_train.py" --out "$work/tailor" --steps 16 >"$tmp/train.log" ||
	fail "example trainer: $(cat "$tmp/train.log")"
"$CKPTCTL" init "$store" >/dev/null
for s in run grow other sonly ponly single tied tailor; do
	ck_import "$store" "$work/$s" 0
done
# Most versions read from packs, as an eval box over a compacted store does.
"$CKPTCTL" compact "$store" -q || fail "ckptctl compact"
for name in mix cross based tail; do
	"$CKPTCTL" recipe add "$store" "$name" "$tmp/$name.yaml" >/dev/null || fail "recipe add $name"
done

ck_mount "$store" "$mnt" -o refresh=1
ctl=$mnt/.ckptfs

# Never listed where a tree walk would find it.
ls -a "$mnt" | grep -q ckptfs && fail "ls -a MNT lists .ckptfs"
find "$mnt" | grep -q '\.ckptfs' && fail "find MNT walks into .ckptfs"
du -a "$mnt" | grep -q '\.ckptfs' && fail "du MNT counts .ckptfs"
[ "$(du -s "$mnt" | cut -f1)" -lt "$(du -s "$ctl/weights" | cut -f1)" ] &&
	fail "du -s MNT is smaller than the weights view alone: it cannot have walked the checkpoints"
cp -r "$mnt/run/checkpoint-20" "$tmp/copy" || fail "cp -r"
[ "$(cd "$tmp/copy" && ls | sort | tr '\n' ' ')" = "config.json generation_config.json model.pt model.safetensors optimizer.pt scheduler.pt tokenizer_config.json trainer_state.json " ] ||
	fail "cp -r MNT/run/checkpoint-20 copied $(ls -a "$tmp/copy")"
if command -v rsync >/dev/null 2>&1; then
	rsync -a --dry-run -v "$mnt/" "$tmp/rs/" | grep -q '^\.ckptfs' && fail "rsync of MNT sees .ckptfs"
fi
[ -d "$ctl" ] || fail "MNT/.ckptfs not found by name"
touch "$ctl/x" 2>/dev/null && fail "a file created in .ckptfs"
mkdir "$mnt/.ckptfs" 2>/dev/null && fail "mkdir MNT/.ckptfs"

[ "$(getfattr --only-values -n user.ckptfs.kind "$ctl/layers/run/checkpoint-30/layers.2.json" 2>/dev/null)" = layer-json ] ||
	fail "user.ckptfs.kind of a LAYER.json"
getfattr --only-values -n user.ckptfs.sources "$ctl/weights/run/checkpoint-20/model.safetensors" | grep -q '"checkpoint-10"' ||
	fail "user.ckptfs.sources of a weights file"

# weights/, layers/ and history/ by the reference reader and torch, a
# layer file's data through numpy memmaps of the mounted file, recipes
# equal to LLMTailor-style merges; and the offline merge of the example
# trainer's checkpoints for the resume below.
set -- weights "$ctl" "$work"
for ck in run/checkpoint-20 run/checkpoint-30 grow/checkpoint-10 single/model_000020.pt tied/checkpoint-20; do
	set -- "$@" + layers "$ctl" "$work" "${ck%%/*}" "${ck#*/}"
done
set -- "$@" + history "$ctl" "$work"
for name in mix cross based; do
	set -- "$@" + recipe "$ctl" "$work" "$name"
done
set -- "$@" + memmap "$ctl/layers/run/checkpoint-30/layers.2.safetensors" + tailor-merge "$work/tailor" "$tmp/offline"
ck_py ctl_check.py "$@" || fail "weights/, layers/, history/, recipes/ or the offline merge (see above)"

# A recipe of the example trainer's checkpoints, resumed through the mount,
# equals the offline LLMTailor-style merge resumed, and trains on.
for from in "$ctl/recipes/tail" "$tmp/offline"; do
	out=$tmp/resumed-$(basename "$from")
	"$TORCH_PYTHON" "$CKPT_SRCDIR/examples/llmtailor_train.py" --out "$out" --resume-from "$from" --steps 24 \
		--policy full >"$tmp/resume.log" 2>&1 || fail "resume from $from: $(cat "$tmp/resume.log")"
	grep -q "resumed at step 16" "$tmp/resume.log" || fail "resume from $from: $(cat "$tmp/resume.log")"
done

ck_umount "$mnt"
# Shards through the mount: above -o weights_shard, an index and its shards.
ck_mount "$store" "$mnt" -o ro,refresh=1,weights_shard=40000
[ -f "$ctl/weights/run/checkpoint-30/model.safetensors.index.json" ] || fail "no shards above weights_shard"
ck_py ctl_check.py tailor-same "$tmp/resumed-tail" "$tmp/resumed-offline" 24 + weights "$ctl" "$work" ||
	fail "the resumed runs differ, or weights/ in shards (see above)"

# A recipe whose checkpoint is deleted no longer checks: it says why.
"$CKPTCTL" rm "$store" other/checkpoint-20 >/dev/null || fail "ckptctl rm"
# Recipes check against the index at once; the view follows at its next
# refresh (refresh=1): wait for both.
followed() { [ -f "$ctl/recipes/cross/RECIPE_ERROR" ] && [ ! -d "$ctl/weights/other/checkpoint-20" ]; }
ck_until 10 followed || true
[ -d "$ctl/weights/other/checkpoint-20" ] && fail "weights/ still has a deleted checkpoint"
grep -q "unknown checkpoint 'other/checkpoint-20'" "$ctl/recipes/cross/RECIPE_ERROR" ||
	fail "recipes/cross after its checkpoint was deleted: $(ls "$ctl/recipes/cross")"
[ -f "$ctl/recipes/mix/model.pt" ] || fail "recipes/mix is gone too"

ck_umount "$mnt"
echo "eval_views: all checks passed"
