#!/bin/sh
# kill -9 of a lossy compaction at each of its crash hooks
# (CKPT_TEST_CRASH_AT) and at seeded random moments.  Each time: the raw
# files are all still there (nothing exact goes before the lossy coding is
# committed), verify is clean, and through a mount every checkpoint reads
# either exact or within its bound -- never damaged, never past it; then a
# compaction run to the end (recovery applies a packmap the index lacks)
# leaves the two older checkpoints lossy, the newest two exact, and the
# raw files of packed checkpoints removed.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
plain=$tmp/plain st=$tmp/st mnt=$tmp/mnt
B=0.05

ck_py lossy_check.py train "$plain" 40 10 >/dev/null

fresh() {	# a store at $st with the four checkpoints committed into it (its own
		# files, under STORE/data: a copy of a store would name the original's)
	rm -rf "$st"
	"$CKPTCTL" init "$st" >/dev/null
	mkdir -p "$st/staging/run"
	for c in 10 20 30 40; do
		cp -r "$plain/checkpoint-$c" "$st/staging/run/"
		"$CKPTCTL" commit "$st" run/checkpoint-$c >/dev/null || fail "commit checkpoint-$c"
	done
	"$CKPTCTL" lossy "$st" run $B --keep-exact 2 >/dev/null
}

reads() {	# reads WHAT MODE: through a read-only mount, MODE either (after a crash) or bound
	"$CKPTCTL" verify "$st" >"$tmp/verify" 2>&1 || { cat "$tmp/verify"; fail "$1: verify"; }
	ck_mount "$st" "$mnt" -o ro
	ck_py lossy_check.py series "$plain" "$mnt/run" $B checkpoint-10:$2 checkpoint-20:$2 checkpoint-30:exact \
		checkpoint-40:exact >"$tmp/reads" 2>&1 || { cat "$tmp/reads"; fail "$1: checkpoints do not read back"; }
	ck_umount "$mnt"
}

trial() {	# trial WHAT: after the crash
	for c in 10 20 30 40; do
		[ -e "$st/data/run/checkpoint-$c/model.pt" ] || fail "$1: a raw file went before the end"
	done
	reads "$1, right after the crash" either
	echo "$1 crashed: $("$CKPTCTL" ls "$st" run | awk 'NR > 1 { printf "%s=%s ", $2, $NF }')"
	"$CKPTCTL" compact -q "$st" --keep-raw 1 || fail "$1: compaction after the crash"
	reads "$1, compacted again" bound
	for c in 10 20 30; do
		[ ! -e "$st/data/run/checkpoint-$c/model.pt" ] || fail "$1: raw files of checkpoint-$c stayed"
	done
	[ -e "$st/data/run/checkpoint-40/model.pt" ] || fail "$1: the newest lost its raw files"
}

# Checkpoints written: 1 the newest (mapped raw), 2 checkpoint-30 (packed
# exactly), 3 checkpoint-10 and 4 checkpoint-20 (lossy).
for stage in lossy-append-3 lossy-synced-3 lossy-reread-3 lossy-packmap-3 lossy-committed-3 \
	     lossy-append-4 lossy-packmap-4; do
	fresh
	rc=0
	CKPT_TEST_CRASH_AT=$stage "$CKPTCTL" compact -q "$st" --keep-raw 1 || rc=$?
	[ $rc = 137 ] || fail "$stage: compaction did not stop at the hook (status $rc)"
	trial "$stage"
done

# Random moments: seeded, so that a failure can be replayed.
delays=$(awk 'BEGIN { srand(7); for (i = 0; i < 3; i++) printf "%.2f ", 0.02 + rand() * 0.4 }')
for d in $delays; do
	fresh
	env "$CK_KILLABLE" "$CKPTCTL" compact -q "$st" --keep-raw 1 >/dev/null 2>&1 &
	pid=$!
	sleep "$d"
	kill -9 $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
	if [ -e "$st/data/run/checkpoint-30/model.pt" ]; then
		trial "kill -9 after ${d}s"
	else
		reads "kill -9 after ${d}s, finished first" bound
	fi
done
echo "10 crashes: nothing exact lost before its lossy coding was committed; every checkpoint exact or within its bound"
