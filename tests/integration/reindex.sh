#!/bin/sh
# The index rebuilt from the manifests alone (torch 1.13, a read-only mount).
# A run with a full save at step 10 and a partial one at step 20 (plus a
# refused file), and a series of single-file checkpoints with a user step
# pattern, are imported; `ckptctl ls/show --json` of everything and the
# SHA-256 of every file read through the mount are recorded.  Then the
# index is deleted: ckptctl and ckptfs say how to recover; `ckptctl
# reindex` brings back the same ls/show output and the same bytes; a
# damaged and a torn manifest are reported and skipped while the rest is
# reindexed; --verify names a file changed since import.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store
mnt=$tmp/mnt

# record NAME: what the store shows, into $tmp/NAME.json.
record() {
	ck_mount "$store" "$mnt" -o ro
	ck_py reindex_check.py record "$store" "$mnt" "$tmp/$1.json" || fail "recording $1"
	ck_umount "$mnt"
}

# reindex WANT_RC [options]: runs `ckptctl reindex`, output in $tmp/reindex.out/.err.
reindex() {
	_ri_want=$1
	shift
	_ri_rc=0
	"$CKPTCTL" reindex "$store" "$@" >"$tmp/reindex.out" 2>"$tmp/reindex.err" || _ri_rc=$?
	sed 's/^/  reindex: /' "$tmp/reindex.out" "$tmp/reindex.err"
	[ "$_ri_rc" = "$_ri_want" ] || fail "ckptctl reindex $* exited $_ri_rc, expected $_ri_want"
	return 0
}

ck_py composite_check.py make "$tmp/run"
printf 'not a checkpoint\n' >"$tmp/run/checkpoint-20/broken.pt"
mkdir "$tmp/snaps"
cp "$tmp/run/checkpoint-10/model.pt" "$tmp/snaps/s5.pt"
cp "$tmp/run/checkpoint-20/model.pt" "$tmp/snaps/s7.pt"
"$CKPTCTL" init "$store"
ck_import "$store" "$tmp/run" 2
ck_import "$store" "$tmp/snaps" 0 --series snaps --pattern '^s([0-9]+)\.pt$'
for m in run/checkpoint-10 run/checkpoint-20 snaps/s5.pt snaps/s7.pt; do
	[ -f "$store/manifests/$m.manifest" ] || fail "no manifest for $m"
done
record before

# --- no index ---------------------------------------------------------------
rm -rf "$store/index"
rc=0
"$CKPTCTL" ls "$store" 2>"$tmp/err" || rc=$?
[ "$rc" = 1 ] || fail "ckptctl ls without an index exited $rc"
grep -q "index missing: run ckptctl reindex $store" "$tmp/err" || fail "ckptctl ls: $(cat "$tmp/err")"
mkdir -p "$mnt"
ck_track "$mnt"
if "$CKPTFS" "$store" "$mnt" -o ro 2>"$tmp/err"; then
	fail "ckptfs mounted a store without an index"
fi
grep -q "index missing: run ckptctl reindex $store" "$tmp/err" || fail "ckptfs: $(cat "$tmp/err")"
! is_mounted "$mnt" || fail "ckptfs left $mnt mounted"

reindex 0
grep -q "^reindexed 4 checkpoints; 0 damaged manifests skipped" "$tmp/reindex.out" || fail "reindex summary"
record after
ck_py reindex_check.py same "$tmp/before.json" "$tmp/after.json" || fail "the rebuilt index shows something else"
reindex 0 --verify
! grep -q CHANGED "$tmp/reindex.out" || fail "reindex --verify named an unchanged file"

# --- damaged manifests: reported, skipped, the rest reindexed -----------------
cp "$store/manifests/run/checkpoint-20.manifest" "$tmp/ck20.manifest"
cp "$store/manifests/snaps/s7.pt.manifest" "$tmp/s7.manifest"
sed -i 's/ offset=0$/ offset=1/' "$store/manifests/run/checkpoint-20.manifest"     # an edit
head -c 700 "$tmp/s7.manifest" >"$store/manifests/snaps/s7.pt.manifest"             # a torn write
reindex 2
grep -q "^reindexed 2 checkpoints; 2 damaged manifests skipped" "$tmp/reindex.out" || fail "reindex summary"
grep -q "damaged manifest $store/manifests/run/checkpoint-20.manifest: checksum mismatch" "$tmp/reindex.err" ||
	fail "the edited manifest was not reported"
grep -q "damaged manifest $store/manifests/snaps/s7.pt.manifest: no checksum line" "$tmp/reindex.err" ||
	fail "the torn manifest was not reported"
record damaged
ck_py reindex_check.py without "$tmp/before.json" "$tmp/damaged.json" run/checkpoint-20 snaps/s7.pt ||
	fail "the rest of the store is not what it was"

# Put back, everything is back.
cp "$tmp/ck20.manifest" "$store/manifests/run/checkpoint-20.manifest"
cp "$tmp/s7.manifest" "$store/manifests/snaps/s7.pt.manifest"
reindex 0
record restored
ck_py reindex_check.py same "$tmp/before.json" "$tmp/restored.json" || fail "restored manifests"

# --- --verify: a file changed since import ------------------------------------
touch -d '2001-02-03 04:05:06' "$tmp/run/checkpoint-10/optimizer.pt"
reindex 2 --verify
grep -q "^CHANGED  run/checkpoint-10: $tmp/run/checkpoint-10/optimizer.pt: changed since import" \
	"$tmp/reindex.out" || fail "--verify did not name the changed file"
[ "$(grep -c CHANGED "$tmp/reindex.out")" = 1 ] || fail "--verify named more than the changed file"
echo "ok"
