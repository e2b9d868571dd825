#!/bin/sh
# ckptctl gc on a compacted series (imported from full saves by torch,
# seeded): --keep-last 2 leaves the two newest checkpoints reading back bit
# for bit (packed files against their raw files, through ck_packed_pread),
# verify clean and the packs smaller; --dry-run changes nothing; a deleted
# checkpoint a retained composite draws from (a partial save) keeps its
# packed file readable.  Then kill -9 of gc at 4 crash hooks and 10 seeded
# random moments: each time the store reads back and verifies, and a gc run
# to the end leaves exactly what an uninterrupted gc leaves.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_torch

tmp=$(ck_tmpdir)
check="$CKPT_BUILDDIR/tests/unit/packs_check"
K=3
"$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/packs_make.py" "$tmp/run1" 6 11
"$CKPTCTL" init "$tmp/pristine" >/dev/null
"$CKPTCTL" import "$tmp/pristine" "$tmp/run1" >/dev/null
"$CKPTCTL" compact -q --keep-raw 1 --anchor-interval $K "$tmp/pristine" || fail "compact"

holds() {   # holds STORE WHAT: every file the index holds reads back, verify is clean
	"$check" "$1" $K >"$tmp/check.out" 2>&1 || { cat "$tmp/check.out"; fail "$2: read back"; }
	"$CKPTCTL" verify "$1" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "$2: verify"; }
}
pack_bytes() {
	find "$1/packs" -name '*.ckpack' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}
snapshot() {   # every file of the store, its size and content (the index too; locks aside)
	(cd "$1" && find . -type f ! -name '*.lock' ! -name lock.mdb -printf '%p %s ' -exec md5sum {} \; | sort)
}
live_ckpts() {
	"$CKPTCTL" ls "$1" run1 | awk '$3 == "complete" { print $2 }' | tr '\n' ' '
}
holds "$tmp/pristine" "before gc"
[ "$(live_ckpts "$tmp/pristine")" = "checkpoint-10 checkpoint-20 checkpoint-30 checkpoint-40 checkpoint-50 checkpoint-60 " ] ||
	fail "the series is not the six checkpoints: $(live_ckpts "$tmp/pristine")"

# --dry-run: says what would go, changes nothing.
rm -rf "$tmp/st" && cp -a "$tmp/pristine" "$tmp/st"
snapshot "$tmp/st" >"$tmp/before.lst"
"$CKPTCTL" gc --dry-run --keep-last 2 "$tmp/st" >"$tmp/dry.out" || { cat "$tmp/dry.out"; fail "gc --dry-run"; }
grep -q "^would delete  run1/checkpoint-40" "$tmp/dry.out" || { cat "$tmp/dry.out"; fail "dry run: no checkpoint-40"; }
grep -q "checkpoint-50" "$tmp/dry.out" && { cat "$tmp/dry.out"; fail "dry run: would delete a retained checkpoint"; }
snapshot "$tmp/st" >"$tmp/after.lst"
cmp -s "$tmp/before.lst" "$tmp/after.lst" || { diff "$tmp/before.lst" "$tmp/after.lst"; fail "dry run changed files"; }
[ "$(live_ckpts "$tmp/st")" = "$(live_ckpts "$tmp/pristine")" ] || fail "dry run deleted checkpoints"

# The real thing: the reference every crash trial must end at.
before=$(pack_bytes "$tmp/st")
"$CKPTCTL" gc --keep-last 2 "$tmp/st" >"$tmp/gc.out" || { cat "$tmp/gc.out"; fail "gc"; }
cat "$tmp/gc.out"
holds "$tmp/st" "after gc"
[ "$(live_ckpts "$tmp/st")" = "checkpoint-50 checkpoint-60 " ] || fail "gc kept $(live_ckpts "$tmp/st")"
after=$(pack_bytes "$tmp/st")
[ "$after" -lt "$before" ] || fail "pack bytes did not go down: $before -> $after"
echo "pack bytes $before -> $after"
for c in 10 20 30 40; do
	[ ! -e "$tmp/st/manifests/run1/checkpoint-$c.packmap" ] || fail "gc left the packmap of checkpoint-$c"
done
[ -e "$tmp/st/manifests/run1/checkpoint-50.packmap" ] || fail "gc removed the packmap of a retained checkpoint"
"$CKPTCTL" gc "$tmp/st" >"$tmp/gc2.out" || fail "a second gc"
[ "$(pack_bytes "$tmp/st")" = "$after" ] || { cat "$tmp/gc2.out"; fail "a second gc changed the packs"; }
"$CKPTCTL" reindex "$tmp/st" >/dev/null || fail "reindex after gc"
holds "$tmp/st" "reindexed after gc"
want=$after

# Once the checkpoints are deleted (ckptctl rm), a dry run's sweep
# foretells the pack bytes to the byte.
rm -rf "$tmp/dry" && cp -a "$tmp/pristine" "$tmp/dry"
for c in 10 20 30 40; do
	"$CKPTCTL" rm "$tmp/dry" run1/checkpoint-$c >/dev/null || fail "rm checkpoint-$c"
done
"$CKPTCTL" gc --dry-run "$tmp/dry" >"$tmp/dry.out" || { cat "$tmp/dry.out"; fail "gc --dry-run after rm"; }
foretold=$(sed -n 's/^pack bytes: [0-9]* -> \([0-9]*\) .*/\1/p' "$tmp/dry.out")
"$CKPTCTL" gc "$tmp/dry" >"$tmp/gc.out" || { cat "$tmp/gc.out"; fail "gc after rm"; }
[ -n "$foretold" ] && [ "$foretold" = "$(pack_bytes "$tmp/dry")" ] ||
	{ cat "$tmp/dry.out" "$tmp/gc.out"; fail "the dry run foretold '$foretold' pack bytes, gc left $(pack_bytes "$tmp/dry")"; }
[ "$foretold" = "$want" ] || fail "gc after rm left $foretold pack bytes, gc --keep-last 2 $want"

# --keep retains an older checkpoint beside the newest: checkpoint-30's
# delta chains run through the deleted 40 and 50, whose chunks must stay.
rm -rf "$tmp/keep" && cp -a "$tmp/pristine" "$tmp/keep"
"$CKPTCTL" gc --keep-last 1 --keep run1/checkpoint-30 "$tmp/keep" >/dev/null || fail "gc --keep"
[ "$(live_ckpts "$tmp/keep")" = "checkpoint-30 checkpoint-60 " ] || fail "gc --keep kept $(live_ckpts "$tmp/keep")"
holds "$tmp/keep" "after gc --keep"

# Partial saves: checkpoint-60 has no layers.1.weight, its composite takes it
# from checkpoint-50, whose model.pt must survive its deletion and the sweep.
"$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/packs_make.py" "$tmp/run2" 6 12 --partial
"$CKPTCTL" init "$tmp/part" >/dev/null
mkdir -p "$tmp/imp" && mv "$tmp/run2" "$tmp/imp/run1"
"$CKPTCTL" import "$tmp/part" "$tmp/imp/run1" >/dev/null
"$CKPTCTL" compact -q --keep-raw 1 --anchor-interval $K "$tmp/part" || fail "compact (partial)"
"$CKPTCTL" gc --keep-last 1 -v "$tmp/part" >"$tmp/part.out" || { cat "$tmp/part.out"; fail "gc (partial)"; }
grep -q "kept .*run1/checkpoint-50/model.pt" "$tmp/part.out" || { cat "$tmp/part.out"; fail "checkpoint-50/model.pt not kept"; }
holds "$tmp/part" "after gc of partial saves"
grep -q " 1 packed" "$tmp/check.out" || { cat "$tmp/check.out"; fail "the kept packed file is not read back"; }

# Checkpoints committed through the store (STORE/data): compaction drops
# the raw files of packed ones but the newest, gc their packed chunks; the
# store's bytes on disk go down and its data holds the retained ones only.
"$CKPTCTL" init "$tmp/own" >/dev/null
mkdir -p "$tmp/own/staging/run1"
for c in 10 20 30 40 50 60; do
	cp -r "$tmp/run1/checkpoint-$c" "$tmp/own/staging/run1/"
	"$CKPTCTL" commit "$tmp/own" run1/checkpoint-$c >/dev/null || fail "commit checkpoint-$c"
done
"$CKPTCTL" compact -q --keep-raw 1 --anchor-interval $K "$tmp/own" || fail "compact (owned)"
own_before=$(du -sb "$tmp/own" | cut -f1)
"$CKPTCTL" gc --keep-last 2 "$tmp/own" >"$tmp/own.out" || { cat "$tmp/own.out"; fail "gc (owned)"; }
own_after=$(du -sb "$tmp/own" | cut -f1)
[ "$own_after" -lt "$own_before" ] || fail "gc (owned): the store did not shrink: $own_before -> $own_after bytes"
[ "$(ls "$tmp/own/data/run1" | tr '\n' ' ')" = "checkpoint-50 checkpoint-60 " ] ||
	fail "gc (owned): data/run1 holds $(ls "$tmp/own/data/run1" | tr '\n' ' ')"
"$CKPTCTL" verify "$tmp/own" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "gc (owned): verify"; }
# Compaction removed checkpoint-50's raw files: the saved originals, put
# back where they were for the comparison, must equal its packed bytes.
cp "$tmp/run1/checkpoint-50/"* "$tmp/own/data/run1/checkpoint-50/"
"$check" "$tmp/own" $K >"$tmp/check.out" 2>&1 || { cat "$tmp/check.out"; fail "gc (owned): read back"; }
grep -q " 3 packed, 5[0-9]* bytes equal" "$tmp/check.out" || { cat "$tmp/check.out"; fail "gc (owned): checkpoint-50 not read back"; }
echo "committed checkpoints: the store $own_before -> $own_after bytes"

# A checkpoint compacted while it was the newest is mapped, not packed:
# older deltas rest on its raw bytes, so gc keeps it until compaction
# packs it.
"$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/packs_make.py" "$tmp/run3" 7 13
mkdir -p "$tmp/later" && mv "$tmp/run3/checkpoint-70" "$tmp/later/"
"$CKPTCTL" init "$tmp/raw" >/dev/null
"$CKPTCTL" import "$tmp/raw" "$tmp/run3" >/dev/null
"$CKPTCTL" compact -q --anchor-interval $K "$tmp/raw" || fail "compact (raw refs)"
mv "$tmp/later/checkpoint-70" "$tmp/run3/"
"$CKPTCTL" import "$tmp/raw" "$tmp/run3" >/dev/null
"$CKPTCTL" gc --keep-last 1 --keep run3/checkpoint-20 "$tmp/raw" >"$tmp/raw.out" 2>&1 || { cat "$tmp/raw.out"; fail "gc (raw refs)"; }
grep -q "run3/checkpoint-60: kept" "$tmp/raw.out" || { cat "$tmp/raw.out"; fail "checkpoint-60 not kept"; }
[ "$("$CKPTCTL" ls "$tmp/raw" run3 | awk '$3 == "complete" { print $2 }' | tr '\n' ' ')" = \
	"checkpoint-20 checkpoint-60 checkpoint-70 " ] || fail "gc (raw refs) did not keep 20, 60 and 70"
holds "$tmp/raw" "gc keeping a raw reference"
"$CKPTCTL" compact -q --anchor-interval $K "$tmp/raw" || fail "compact (raw refs, again)"
"$CKPTCTL" gc --keep-last 1 --keep run3/checkpoint-20 "$tmp/raw" >"$tmp/raw.out" 2>&1 || { cat "$tmp/raw.out"; fail "gc (raw refs, again)"; }
grep -q "^deleted       run3/checkpoint-60" "$tmp/raw.out" || { cat "$tmp/raw.out"; fail "checkpoint-60 not deleted once packed"; }
holds "$tmp/raw" "gc once compacted"

# gc while a compaction of another series runs: compaction opens its pack
# before it takes the locks, and re-reads the pack position under them, so
# it never appends to a pack gc emptied meanwhile.  The commit lock, held
# here while both start, makes them meet.
rm -rf "$tmp/conc" && cp -a "$tmp/pristine" "$tmp/conc"
for c in 10 20 30 40; do
	"$CKPTCTL" rm "$tmp/conc" run1/checkpoint-$c >/dev/null || fail "rm checkpoint-$c (concurrent)"
done
"$CKPTCTL" import "$tmp/conc" "$tmp/run3" >/dev/null
command -v flock >/dev/null && { flock -x "$tmp/conc/commit.lock" -c "sleep 0.5" & }
sleep 0.1
"$CKPTCTL" compact -q --anchor-interval $K "$tmp/conc" &
pid=$!
sleep 0.1
"$CKPTCTL" gc --rewrite-below 100 "$tmp/conc" >"$tmp/conc.out" 2>&1 || { cat "$tmp/conc.out"; fail "gc beside compaction"; }
wait $pid || fail "compaction beside gc"
wait
holds "$tmp/conc" "gc beside compaction"
"$CKPTCTL" compact -q --anchor-interval $K "$tmp/conc" || fail "compaction after gc"
holds "$tmp/conc" "compaction after gc beside compaction"
grep -q " 21 packed" "$tmp/check.out" || { cat "$tmp/check.out"; fail "compaction beside gc packed too little"; }

trial() {   # trial NAME: after the crash
	holds "$tmp/st" "$1, right after the crash"
	"$CKPTCTL" gc --keep-last 2 "$tmp/st" >"$tmp/gc.out" 2>&1 || { cat "$tmp/gc.out"; fail "$1: gc after the crash"; }
	holds "$tmp/st" "$1, gc run again"
	[ "$(live_ckpts "$tmp/st")" = "checkpoint-50 checkpoint-60 " ] || fail "$1: gc kept $(live_ckpts "$tmp/st")"
	got=$(pack_bytes "$tmp/st")
	[ "$got" = "$want" ] || { ls -l "$tmp/st/packs"; fail "$1: $got pack bytes, an uninterrupted gc leaves $want"; }
}

# deleted-checkpoint-40: gc's last deletion marked, nothing of it
# reclaimed; the next gc has no checkpoint left to delete and must still
# reclaim its files.
for stage in deleted-checkpoint-40 gc-copied gc-committed gc-emptied; do
	rm -rf "$tmp/st" && cp -a "$tmp/pristine" "$tmp/st"
	rc=0
	CKPT_TEST_CRASH_AT=$stage "$CKPTCTL" gc --keep-last 2 "$tmp/st" >/dev/null 2>&1 || rc=$?
	[ $rc = 137 ] || fail "$stage: gc did not stop at the hook (status $rc)"
	trial "$stage"
done

# Random moments: seeded, so that a failure can be replayed.
delays=$(awk 'BEGIN { srand(7); for (i = 0; i < 10; i++) printf "%.3f ", 0.002 + rand() * 0.06 }')
cut=0
for d in $delays; do
	rm -rf "$tmp/st" && cp -a "$tmp/pristine" "$tmp/st"
	env "$CK_KILLABLE" "$CKPTCTL" gc --keep-last 2 "$tmp/st" >/dev/null 2>&1 &
	pid=$!
	sleep "$d"
	kill -9 $pid 2>/dev/null || true
	rc=0
	wait $pid 2>/dev/null || rc=$?
	[ $rc = 137 ] && cut=$((cut + 1))
	trial "kill -9 after ${d}s"
done
echo "$cut of the 10 random kills cut gc short"
echo "14 crashes: the store read back and verified every time, and gc finished the same"
