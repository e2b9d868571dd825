#!/bin/sh
# The lossy tier, as a user meets it: a series' policy recorded with
# `ckptctl lossy`, checkpoints of a real training run (torch.save files,
# safetensors, a DCP data file) written through a writable mount, then
#  - `compact --dry-run` says what it would save and changes nothing;
#  - `compact --keep-raw 1` codes the older ones lossily while the mount is
#    live (a file being read meanwhile stays exact to its end);
#  - through a fresh mount every tensor of a lossy checkpoint is within the
#    bound of its original (torch.load, the safetensors reader, each DCP
#    blob; zip CRCs valid), everything else bit for bit, the newest two
#    byte for byte; ls, show and user.ckptfs.lossy say so; verify is clean;
#  - training resumed from a lossy checkpoint ends close to the exact resume;
#  - the daemon's background compaction applies the policy to a new save and
#    never touches the newest; `lossy off` stops it; gc and reindex keep it.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store mnt=$tmp/mnt ro=$tmp/ro plain=$tmp/plain
B=0.05

save() {	# save CKPT: the checkpoint written into the series through the mount
	cp -r "$plain/$1" "$mnt/run/tmp-$1" || fail "cannot write $1 through the mount"
	mv "$mnt/run/tmp-$1" "$mnt/run/$1" || fail "cannot commit $1"
	[ -e "$store/data/run/$1/model.pt" ] || fail "$1 not committed under STORE/data"
}
lossy_col() { "$CKPTCTL" ls "$store" run | awk -v c="$1" '$2 == c { print $NF }'; }
bound() { ck_py lossy_check.py bound "$plain/$1" "$2/run/$1" $B || fail "$1 through $2: past the bound"; }
exact() { ck_py lossy_check.py exact "$plain/$1" "$2/run/$1" || fail "$1 through $2: not exact"; }

"$CKPTCTL" init "$store" >/dev/null
"$CKPTCTL" lossy "$store" run $B --keep-exact 2 --chain 3 || fail "cannot record the policy"
"$CKPTCTL" lossy "$store" run | grep -q "within $B x max|x|.*newest 2; chains of up to 3 residuals" ||
	fail "the policy does not read back: $("$CKPTCTL" lossy "$store" run)"
ck_py lossy_check.py train "$plain" 60 10

ck_mount "$store" "$mnt" -o compact=0,refresh=1,nopassthrough
mkdir "$mnt/run"
for c in 10 20 30 40; do save checkpoint-$c; done

# Dry run: the two older checkpoints, their savings and the bound; nothing written.
"$CKPTCTL" compact "$store" --dry-run >"$tmp/dry" || fail "dry run failed"
cat "$tmp/dry"
[ "$(grep -c "^would code run/checkpoint-[12]0: .* within $B x max|x|" "$tmp/dry")" = 2 ] || fail "dry run lines"
grep -q "checkpoint-[34]0" "$tmp/dry" && fail "the dry run would code a checkpoint kept exact"
[ -z "$(ls "$store/packs" 2>/dev/null)" ] || fail "the dry run wrote packs"
[ "$(lossy_col checkpoint-10)" = - ] || fail "the dry run changed the index"

# A reader half way through a file when it is coded lossily reads it exact to the end.
ck_py lossy_check.py hold "$mnt/run/checkpoint-20/model.pt" "$plain/checkpoint-20/model.pt" "$tmp/ready" "$tmp/go" \
	>"$tmp/hold" 2>&1 &
hold=$!
ck_until 30 test -e "$tmp/ready" || fail "the reader did not start"
"$CKPTCTL" compact "$store" --keep-raw 1 >"$tmp/compact" || { cat "$tmp/compact"; fail "compaction failed"; }
cat "$tmp/compact"
grep -q "^lossy run/checkpoint-10: " "$tmp/compact" || fail "checkpoint-10 not coded lossily"
[ ! -e "$store/data/run/checkpoint-20/model.pt" ] || fail "the raw file of a lossy checkpoint stayed"
[ -e "$store/data/run/checkpoint-40/model.pt" ] || fail "the newest lost its raw file"
# The mount's refresh notices the packed files (within refresh=1, more
# on a loaded machine): checkpoint-10 then says it is served lossily.
lossy_seen() { getfattr -n user.ckptfs.lossy "$mnt/run/checkpoint-10/model.pt" >/dev/null 2>&1; }
ck_until 30 lossy_seen || fail "the mount did not notice the lossy packs"
touch "$tmp/go"
wait $hold || { cat "$tmp/hold"; fail "a file read across its lossy coding changed"; }
cat "$tmp/hold"
# A composite this mount built before the compaction (the warm-up builds
# each newest checkpoint as it commits) keeps serving the exact bytes it was
# built from; one built now is the lossy coding.  Either is within the
# bound; the fresh mount below must serve the coding.
ck_py lossy_check.py bound "$plain/checkpoint-10" "$mnt/run/checkpoint-10" $B either ||
	fail "checkpoint-10 through the live mount: past the bound"
ck_umount "$mnt"

# A fresh mount: the bound, exactness, and what says so.
ck_mount "$store" "$ro" -o ro
for c in 10 20; do bound checkpoint-$c "$ro"; done
for c in 30 40; do exact checkpoint-$c "$ro"; done
[ "$(lossy_col checkpoint-10)" = $B ] && [ "$(lossy_col checkpoint-20)" = $B ] || fail "ls does not mark them lossy"
[ "$(lossy_col checkpoint-30)" = - ] && [ "$(lossy_col checkpoint-40)" = - ] || fail "ls marks an exact one lossy"
"$CKPTCTL" ls "$store" run/checkpoint-20 | grep -q "optimizer.pt  \[lossy: .* within $B x max|x|\]" || fail "ls of the files"
x=$(getfattr --only-values -n user.ckptfs.lossy "$ro/run/checkpoint-20/optimizer.pt") || fail "no user.ckptfs.lossy"
echo "user.ckptfs.lossy: $x"
"$TORCH_PYTHON" -c 'import json, sys
d = json.loads(sys.argv[1])
assert d["method"] == "qres-linf" and d["bound"] == float(sys.argv[2]) and 0 < d["max_rel_error"] <= d["bound"]
assert d["sources"][0]["checkpoint"] == "checkpoint-20"' "$x" $B || fail "user.ckptfs.lossy: $x"
getfattr -n user.ckptfs.lossy "$ro/run/checkpoint-40/model.pt" >/dev/null 2>&1 && fail "an exact file has user.ckptfs.lossy"
getfattr -n user.ckptfs.lossy "$ro/run/checkpoint-20/config.json" >/dev/null 2>&1 && fail "config.json has user.ckptfs.lossy"
# So do the control directory's views made of it.
n=0
for f in "$ro"/.ckptfs/layers/run/checkpoint-20/*.safetensors; do
	if getfattr -n user.ckptfs.lossy "$f" >/dev/null 2>&1; then n=$((n + 1)); fi
done
[ $n -gt 0 ] || fail "no layer of a lossy checkpoint under .ckptfs/layers has user.ckptfs.lossy"
for f in "$ro"/.ckptfs/layers/run/checkpoint-40/*.safetensors; do
	if getfattr -n user.ckptfs.lossy "$f" >/dev/null 2>&1; then fail "$f (exact) has user.ckptfs.lossy"; fi
done
"$CKPTCTL" show "$store" run/checkpoint-20 optimizer.pt --json >"$tmp/show.json" || fail "show failed"
"$TORCH_PYTHON" - "$tmp/show.json" $B <<'EOF' || fail "ckptctl show"
import json, sys
t = json.load(open(sys.argv[1]))["tensors"]
lossy = [x for x in t if x["lossy"]]
assert len(lossy) >= 20 and all(x["lossy"]["max_err"] <= float(sys.argv[2]) * x["lossy"]["max_abs"] for x in lossy)
assert all(x["lossy"] is None for x in t if x["name"].endswith(".step")), "a step counter shows lossy"
print("show: %d of %d tensors lossy, each within its bound" % (len(lossy), len(t)))
EOF
"$CKPTCTL" verify "$store" >"$tmp/verify" || { cat "$tmp/verify"; fail "verify"; }

# Resuming from the lossy checkpoint ends close to resuming from the exact one.
l_lossy=$(ck_py lossy_check.py resume "$ro/run/checkpoint-20" 30) || fail "resume from the lossy checkpoint"
l_exact=$(ck_py lossy_check.py resume "$plain/checkpoint-20" 30) || fail "resume from the exact checkpoint"
echo "resumed 30 steps: loss $l_lossy from the lossy checkpoint, $l_exact from the exact one"
awk -v a="$l_lossy" -v b="$l_exact" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.03 * b) }' ||
	fail "the lossy resume ended at $l_lossy, the exact one at $l_exact"
ck_umount "$ro"

# The daemon's background compaction applies the recorded policy: a new save
# makes checkpoint-30 lossy, never the newest two.
ck_mount "$store" "$mnt" -o compact=1,refresh=1
save checkpoint-50
coded() { [ "$(lossy_col "$1")" = $B ]; }
ck_until 60 coded checkpoint-30 || fail "background compaction did not code checkpoint-30"
[ "$(lossy_col checkpoint-40)" = - ] && [ "$(lossy_col checkpoint-50)" = - ] || fail "a kept checkpoint went lossy"
ck_umount "$mnt"
"$CKPTCTL" lossy "$store" run off | grep -q "exact (no lossy policy)" || fail "lossy off"
ck_mount "$store" "$mnt" -o compact=1,refresh=1
save checkpoint-60
sleep 3
[ "$(lossy_col checkpoint-40)" = - ] || fail "checkpoint-40 coded lossily with no policy"
ck_umount "$mnt"

# gc sweeps the exact records the lossy ones replaced; reindex keeps them lossy.
before=$(du -sb "$store/packs" | cut -f1)
"$CKPTCTL" gc "$store" >"$tmp/gc" || { cat "$tmp/gc"; fail "gc"; }
after=$(du -sb "$store/packs" | cut -f1)
echo "packs: $before bytes before gc, $after after"
"$CKPTCTL" reindex "$store" >/dev/null || fail "reindex"
[ "$(lossy_col checkpoint-30)" = $B ] || fail "reindex lost the lossy maps"
ck_mount "$store" "$ro" -o ro
for c in 10 20 30; do bound checkpoint-$c "$ro"; done
for c in 40 50 60; do exact checkpoint-$c "$ro"; done
ck_umount "$ro"
"$CKPTCTL" verify "$store" >"$tmp/verify" || { cat "$tmp/verify"; fail "verify after gc and reindex"; }
echo "lossy tier: bound, exactness, resume, policy, gc and reindex hold"
