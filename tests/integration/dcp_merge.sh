#!/bin/sh
# torch DCP saves as merged checkpoints, read by torch's own DCP reader
# (tests/py/dcp_series.py: torch 1.13's real writer and reader; the tests'
# writer of torch 2.x's layout):
#   - a one-process series (full at 10, odd layers at 20, even at 30; model
#     and AdamW moments as FQNs) and a 2-rank one (row-split ShardedTensors)
#     imported and mounted read-only: every step loads bit-exactly what the
#     offline merge holds, in one process (2 ranks -> 1) and in 2 ranks split
#     by columns; a save's directory lists its own data files only, older
#     ones under .ckptfs-from/<checkpoint>/;
#   - the 2-rank series saved by the real writer through a writable mount
#     (commit on .metadata), loaded through it and through a read-only mount;
#   - the 2.0-2.3 and 2.4+ layouts (one file per rank, planner_data,
#     storage_meta), and a series whose saves are of both: not mixed, the
#     reason in user.ckptfs.sources;
#   - Megatron-Core torch_dist (DCP, mcore_data, common.pt, metadata.json);
#   - show and stats name FQNs and layers; deleting the full save keeps
#     what the partial saves after it draw on;
#   - bad .metadata refused at import with the file and the reason, never
#     served, nothing executed.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store

ck_py dcp_series.py save "$tmp/one" || fail "saving the one-process series"
ck_py dcp_series.py save "$tmp/two" --ranks 2 || fail "saving the 2-rank series"
ck_py dcp_series.py save "$tmp/l24" --layout 2.4 --ranks 2 || fail "writing the 2.4 layout"
ck_py dcp_series.py save "$tmp/l20" --layout 2.0 --ranks 2 || fail "writing the 2.0 layout"
ck_py dcp_series.py save "$tmp/mixed" --layout 2.0 --ranks 2 --steps 10 || fail "writing the mixed series"
ck_py dcp_series.py save "$tmp/mixed" --layout 2.4 --ranks 2 --steps 20,30 || fail "writing the mixed series"
ck_py dcp_series.py megatron "$tmp/megatron" || fail "writing the Megatron checkpoints"

# The plain series is what torch sees without ckptfs: step-20 alone lacks
# the even layers, which is why a merge is needed at all.
ck_py dcp_series.py check "$tmp/one" "$tmp/one" --steps 10,20 >"$tmp/plain.out" 2>&1 &&
	fail "step-20 of the plain series loads into a full state dict"
grep -Eq "KeyError: 'model.embed_tokens.weight'|Missing key in checkpoint state_dict: model.embed_tokens.weight" "$tmp/plain.out" || fail "unexpected: $(tail -3 "$tmp/plain.out")"

"$CKPTCTL" init "$store" >/dev/null
for s in one two l24 l20 mixed megatron; do
	ck_import "$store" "$tmp/$s" 0
done
"$CKPTCTL" ls "$store" one/step-20 >"$tmp/ls.out"
# torch 1.13's writer puts each item in a data file of its own, torch 2.x
# all of a rank's in one (16 tensors here): either way they are indexed.
grep -Eq "^other +[0-9]+ +[1-9][0-9]* +__0_0.distcp$" "$tmp/ls.out" ||
	fail "a data file's items are not indexed: $(head -3 "$tmp/ls.out")"

ck_mount "$store" "$tmp/mnt" -o ro
m=$tmp/mnt
ck_py dcp_series.py check "$m/one" "$tmp/one" || fail "the one-process series through the mount"
ck_py dcp_series.py check "$m/two" "$tmp/two" || fail "the 2-rank series loaded by one process"
ck_py dcp_series.py check "$m/two" "$tmp/two" --ranks 2 || fail "the 2-rank series loaded by 2 ranks split by columns"
ck_py dcp_series.py check "$m/l24" "$tmp/l24" --ranks 2 || fail "the 2.4 layout"
ck_py dcp_series.py check "$m/l20" "$tmp/l20" || fail "the 2.0 layout"
ck_py dcp_series.py megatron-check "$m/megatron" "$tmp/megatron" || fail "Megatron torch_dist"

# A save's directory: its own data files under their names, no other
# save's; the older ones its .metadata names under .ckptfs-from.
own=$(ls "$tmp/one/step-20" | sort | tr '\n' ' ')
served=$(ls "$m/one/step-20" | sort | tr '\n' ' ')
[ "$own" = "$served" ] || fail "step-20 lists '$served', its save wrote '$own'"
[ "$(ls "$m/one/step-20/.ckptfs-from")" = step-10 ] || fail ".ckptfs-from of step-20: $(ls "$m/one/step-20/.ckptfs-from")"
for f in "$m"/one/step-20/.ckptfs-from/step-10/*; do
	cmp -s "$f" "$tmp/one/step-10/$(basename "$f")" || fail "$f is not step-10's $(basename "$f")"
done
n10=$(ls "$m/one/step-30/.ckptfs-from/step-10" | wc -l)
n20=$(ls "$m/one/step-30/.ckptfs-from/step-20" | wc -l)
[ "$n10" -gt 0 ] && [ "$n20" -gt 0 ] || fail "step-30 draws on step-10 ($n10 files) and step-20 ($n20)"
[ ! -e "$m/one/step-10/.ckptfs-from" ] || fail "the full save step-10 has a .ckptfs-from"
cmp -s "$m/one/step-10/.metadata" "$tmp/one/step-10/.metadata" || fail "step-10's .metadata is not served as saved"
getfattr -n user.ckptfs.sources --only-values "$m/one/step-20/.metadata" >"$tmp/src.json" ||
	fail "no user.ckptfs.sources"
"$TORCH_PYTHON" - "$tmp/src.json" <<'PY' || fail "user.ckptfs.sources of step-20/.metadata: $(head -c 300 "$tmp/src.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["kind"] == "dcp-metadata" and s["synthesized"] and "not_merged" not in s, s
t = s["tensors"]
assert t["model.layers.1.weight"] == "step-20" and t["model.layers.0.weight"] == "step-10", t
assert t["optim.state.layers.3.weight.exp_avg"] == "step-20", t
PY

# Saves of two torch families are not mixed: step-20 holds its own items
# only, and says why.
getfattr -n user.ckptfs.sources --only-values "$m/mixed/step-20/.metadata" >"$tmp/mixed.json"
grep -q '"not_merged": "older saves from step-10 on not merged: step-10 was saved by torch 2.0-2.3' "$tmp/mixed.json" ||
	fail "the mixed series does not say why: $(head -c 400 "$tmp/mixed.json")"
# Counted by the torch at hand (its reader's counts differ by version).
items() { ck_py dcp_series.py load "$@" | sed -n 's/.*: \([0-9]*\) items$/\1/p'; }
own20=$(items "$tmp/mixed/step-20") own30=$(items "$tmp/mixed/step-30")
both=$(items "$tmp/mixed/step-20" "$tmp/mixed/step-30")
[ -n "$own20" ] && [ "$own30" -lt "$both" ] || fail "mixed: saves of $own20 and $own30 items, $both together"
[ "$(items "$m/mixed/step-20")" = "$own20" ] || fail "mixed step-20 is not its own save"
n=$(items "$m/mixed/step-30")
[ "$n" = "$both" ] || fail "mixed step-30 does not merge step-20: $n items, with step-20's $both"

# show and stats: FQNs and layers.
"$CKPTCTL" show "$store" two/step-30 .metadata >"$tmp/show.out" || fail "ckptctl show"
grep -Eq "^model.layers.1.weight\[8:16, 0:16\] +float32 +\[8, 16\] +layers.1 +20 +exact +step-20$" "$tmp/show.out" ||
	fail "show: $(grep layers.1.weight "$tmp/show.out")"
grep -Eq "^optim.state.layers.0.weight.exp_avg\[0:8, 0:16\] .* layers.0 +30 +exact +step-30$" "$tmp/show.out" ||
	fail "show: $(grep layers.0.weight.exp_avg "$tmp/show.out")"
"$CKPTCTL" stats "$store" one >"$tmp/stats.out" || fail "ckptctl stats"
sed -n '/step-30 vs step-20/,$p' "$tmp/stats.out" >"$tmp/stats30.out"
grep -Eq "^ +layers.0 +8 .* 0.0%$" "$tmp/stats30.out" || fail "stats: layers.0 at step 30: $(cat "$tmp/stats30.out")"
grep -Eq "^ +layers.1 +8 .* 0 +100.0%$" "$tmp/stats30.out" || fail "stats: layers.1 at step 30: $(cat "$tmp/stats30.out")"
"$CKPTCTL" verify "$store" two >"$tmp/verify.out" || fail "ckptctl verify: $(tail -3 "$tmp/verify.out")"
ck_umount "$m"

# Every .metadata written by ckptfs's emitter, the full save's too.
ck_mount "$store" "$m" -o ro,always_synthesize
ck_py dcp_series.py check "$m/one" "$tmp/one" || fail "the one-process series, every .metadata synthesized"
getfattr -n user.ckptfs.sources --only-values "$m/one/step-10/.metadata" | grep -q '"synthesized": true' ||
	fail "step-10/.metadata is not synthesized with -o always_synthesize"
ck_umount "$m"

# Deleting the full save keeps what the merged ones draw on.
"$CKPTCTL" rm "$store" one/step-10 >"$tmp/rm.out" || fail "ckptctl rm: $(tail -3 "$tmp/rm.out")"
grep -q "kept .*one/step-10/.metadata" "$tmp/rm.out" || fail "step-10's .metadata was not kept: $(cat "$tmp/rm.out")"
ck_mount "$store" "$m" -o ro
[ ! -e "$m/one/step-10" ] || fail "the deleted step-10 is listed"
ck_py dcp_series.py check "$m/one" "$tmp/one" --steps 20,30 || fail "the series after deleting step-10"
ck_umount "$m"

# Bad .metadata: refused at import with the file and the reason.
for kind in truncated garbled absolute escape past-end overlap hole hostile; do
	ck_py dcp_series.py bad $kind "$tmp/one/step-10" "$tmp/bad/$kind/step-10" >/dev/null || fail "making $kind"
done
"$CKPTCTL" init "$tmp/bs" >/dev/null
for kind in truncated:'not a valid DCP .metadata: pickle: ' \
	garbled:'not a valid DCP .metadata: pickle: ' \
	absolute:"relative_path '/etc/hostname' is absolute" \
	escape:"leaves the checkpoint ('..')" \
	past-end:'of __0_[0-9]*\.distcp, which has ' \
	overlap:"chunks at \\[0, 0\\] and \\[0, 0\\] overlap" \
	hole:'chunks cover 496 of its 512 elements' \
	hostile:'dangerous global posix.system (never executed)'; do
	k=${kind%%:*} why=${kind#*:}
	ck_import "$tmp/bs" "$tmp/bad/$k" 2 --series "$k"
	grep -q "refused $tmp/bad/$k/step-10/.metadata: .*$why" "$tmp/bs.$k.err" ||
		fail "$k: the refusal does not say '$why'"
done
[ ! -e "$tmp/bad/hostile.ran" ] || fail "the hostile .metadata ran"
ck_mount "$tmp/bs" "$tmp/bm" -o ro
for k in truncated absolute overlap hostile; do
	cat "$tmp/bm/$k/step-10/.metadata" >/dev/null 2>&1 && fail "the refused $k .metadata is served"
done
ck_umount "$tmp/bm"

# The 2-rank series saved through a writable mount, a commit at every
# .metadata, then loaded through it and, after compaction, read-only.
"$CKPTCTL" init "$tmp/w" >/dev/null
ck_mount "$tmp/w" "$tmp/wm" -o compact=0
mkdir "$tmp/wm/run"
ck_py dcp_series.py save "$tmp/wm/run" --ranks 2 || fail "the 2-rank save through the writable mount"
nothing_staged() { [ -z "$(ls "$tmp/w/staging/run" 2>/dev/null)" ]; }
ck_until 5 nothing_staged || fail "saves left uncommitted: $(ls "$tmp/w/staging/run")"
ck_py dcp_series.py check "$tmp/wm/run" "$tmp/two" || fail "loaded by one process through the writable mount"
ck_py dcp_series.py check "$tmp/wm/run" "$tmp/two" --ranks 2 || fail "loaded by 2 ranks through the writable mount"
ck_umount "$tmp/wm"
"$CKPTCTL" show "$tmp/w" run/step-20 .metadata | grep -q "^model.layers.3.bias .* layers.3 .* step-20$" ||
	fail "the committed save is not indexed by FQN"
"$CKPTCTL" compact "$tmp/w" --keep-raw 1 >/dev/null || fail "ckptctl compact"
ck_mount "$tmp/w" "$tmp/wm" -o ro
ck_py dcp_series.py check "$tmp/wm/run" "$tmp/two" --ranks 2 || fail "loaded by 2 ranks after compaction"
ck_umount "$tmp/wm"
echo "PASS: DCP series merged by FQN load in torch's reader, 1 and 2 ranks, through read-only and writable mounts"
