#!/bin/sh
# kill -9 of `ckptctl compact` at 5 crash hooks (CKPT_TEST_CRASH_AT) and at
# 8 seeded random moments: each time the store must read back exactly as
# it stands (packed files equal their raw files, chains within K, every
# chunk decodes) and verify clean; then a compaction run to the end
# (recovery applies a packmap the index lacks) must leave it so again.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_torch

tmp=$(ck_tmpdir)
check="$CKPT_BUILDDIR/tests/unit/packs_check"
K=3
"$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/packs_make.py" "$tmp/run1" 6 5
"$CKPTCTL" init "$tmp/pristine" >/dev/null
"$CKPTCTL" import "$tmp/pristine" "$tmp/run1" >/dev/null

holds() {   # holds WHAT: the store $tmp/st reads back and verifies
	"$check" "$tmp/st" $K >"$tmp/check.out" 2>&1 || { cat "$tmp/check.out"; fail "$1: read back"; }
	"$CKPTCTL" verify "$tmp/st" >"$tmp/verify.out" 2>&1 || { cat "$tmp/verify.out"; fail "$1: verify"; }
}

trial() {   # trial NAME: after the crash
	holds "$1, right after the crash"
	sed -n 1p "$tmp/check.out" | sed "s/^/$1 crashed: /"
	"$CKPTCTL" compact -q --anchor-interval $K "$tmp/st" || fail "$1: compaction after the crash"
	holds "$1, compacted again"
	grep -q " 15 packed" "$tmp/check.out" || { cat "$tmp/check.out"; fail "$1: not every older file packed"; }
}

# The first checkpoint written is the newest, mapped raw; the next ones pack.
for stage in compact-append-2 compact-synced-3 compact-packmap-4 compact-committed-5 compact-packmap-1; do
	rm -rf "$tmp/st" && cp -a "$tmp/pristine" "$tmp/st"
	rc=0
	CKPT_TEST_CRASH_AT=$stage "$CKPTCTL" compact -q --anchor-interval $K "$tmp/st" || rc=$?
	[ $rc = 137 ] || fail "$stage: compaction did not stop at the hook (status $rc)"
	trial "$stage"
done

# Random moments: seeded, so that a failure can be replayed.
delays=$(awk 'BEGIN { srand(4); for (i = 0; i < 8; i++) printf "%.2f ", 0.05 + rand() * 0.9 }')
for d in $delays; do
	rm -rf "$tmp/st" && cp -a "$tmp/pristine" "$tmp/st"
	env "$CK_KILLABLE" "$CKPTCTL" compact -q --anchor-interval $K "$tmp/st" >/dev/null 2>&1 &
	pid=$!
	sleep "$d"
	kill -9 $pid 2>/dev/null || true
	wait $pid 2>/dev/null || true
	trial "kill -9 after ${d}s"
done
echo "13 crashes: the store read back and verified every time"
