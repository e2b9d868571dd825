# The steps of the relocation tests (relocate.sh on a local disk,
# gluster_relocate.sh on a GlusterFS volume), sourced after lib.sh with:
#   $w      where the stores are made, copied and restored (node A's view)
#   $r      the same directory as the readers see it (node B's view; $w
#           on a local disk)
#   ctl     ckptctl as this node runs it (--index-dir on a shared store)
#   $mopts  extra ckptfs -o options ("" or index_dir=DIR)
#   $more   1: also a changed copy and files imported in place (the
#           local test; on a shared volume they add time, not coverage)
# Checkpoints of a small training run are written through a writable mount
# (full saves, then a partial one whose composite draws on older
# versions) and packed by compaction with the newest kept raw.  Then
#   - cp -a to another path, the original moved away;
#   - a tar round trip at the same path (new inodes, mtimes rounded to the
#     second);
#   - rsync -a to a second store, mounted beside the first;
# each mounts with no extra step and serves every checkpoint bit-exactly
# (bytes, torch.load, safetensors), and ckptctl verify finds it intact.
# A file read again after a copy has its new identity recorded (its
# manifest names the new inode); a copy with one tensor byte changed is
# refused (EIO), never served.  Files imported in place that moved are
# found again with ckptctl relocate.
mp=$tmp/mnt plain=$tmp/plain
check() { ck_py packs_check.py "$@"; }
opts() { echo "$1${mopts:+,$mopts}"; }

ctl init "$w/store"
ck_mount "$w/store" "$mp" -o "$(opts compact=0)"
mkdir "$mp/run"
check train "$mp/run" "$plain" 1 3 + train "$mp/run" "$tmp/partial" 4 4 partial
ck_umount "$mp"
ctl compact "$w/store" --keep-raw 1 --reclaim-delay 0 -q || fail "ckptctl compact failed"
[ ! -e "$w/store/data/run/step-5/model.pt" ] || fail "compaction left the raw files of step-5"
ls "$w/store/packs" | grep -q . || fail "no packs"
ck_py offline_merge.py "$tmp/merged" "$plain/step-5" "$plain/step-10" "$plain/step-15" \
	"$tmp/partial/step-20" >/dev/null

# serves NAME: every checkpoint of store NAME (under $r) bit-exact through
# a fresh mount, and verify finds it intact.
serves() {
	ck_mount "$r/$1" "$mp" -o "$(opts ro)"
	check same "$mp/run" "$plain" + composite "$mp/run/step-20" "$tmp/merged"
	ck_umount "$mp"
	ctl verify "$r/$1" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "ckptctl verify $r/$1 exited $?"; }
	grep -q " 0 damaged" "$tmp/verify.out" || fail "verify of $r/$1: $(cat "$tmp/verify.out")"
}

# recorded NAME: the manifest of step-20 names model.pt's inode as it is now.
recorded() {
	ino=$(stat -c %i "$r/$1/data/run/step-20/model.pt")
	grep '^file path="model.pt"' "$r/$1/manifests/run/step-20.manifest" | grep -q " ino=$ino " ||
		fail "$1: the manifest of step-20 does not record model.pt's new inode $ino"
}

serves store

# --- cp -a to another path, the original moved away ------------------------------
cp -a "$w/store" "$w/copy"
mv "$w/store" "$w/away"
serves copy
recorded copy
mv "$w/away" "$w/store"

# --- a tar round trip at the same path ----------------------------------------------
(cd "$w" && tar cf "$tmp/store.tar" store)
rm -rf "$w/store"
(cd "$w" && tar xf "$tmp/store.tar")
serves store
recorded store

# --- rsync -a to a second store, mounted beside the first -------------------------
rsync -a "$w/store/" "$w/second/"
ck_mount "$r/store" "$tmp/mnt1" -o "$(opts ro)"
serves second
check same "$tmp/mnt1/run" "$plain"
ck_umount "$tmp/mnt1"
recorded second

[ "$more" = 1 ] || return 0

# --- a copy with one tensor byte changed, its size kept: refused ------------------
cp -a "$w/store" "$w/tampered"
"$TORCH_PYTHON" - "$w/tampered/data/run/step-20/model.pt" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x01]))
PY
ck_mount "$r/tampered" "$mp" -o "$(opts ro)"
cat "$mp/run/step-20/model.pt" >/dev/null 2>"$tmp/err" && fail "a changed model.pt was served"
grep -q "Input/output error" "$tmp/err" || fail "reading a changed file: $(cat "$tmp/err")"
cmp "$mp/run/step-15/optimizer.pt" "$plain/step-15/optimizer.pt" || fail "an unchanged file of the copy differs"
ck_umount "$mp"
rc=0
ctl verify "$r/tampered" >"$tmp/verify.out" 2>&1 || rc=$?
[ $rc = 3 ] || fail "verify of a changed copy exited $rc: $(cat "$tmp/verify.out")"
grep -q "step-20/model.pt" "$tmp/verify.out" || fail "verify does not name the changed file"

# --- files imported in place moved: ckptctl relocate --------------------------------
# (absolute paths: on a shared filesystem they are the same only where every
# node mounts it at the same place, so this part stays on node A's paths)
ctl init "$w/istore"
mkdir -p "$w/imported"
cp -r "$plain/step-5" "$plain/step-10" "$w/imported/"
ck_import_with() { _ci_rc=0; ctl import "$@" 2>"$tmp/import.err" || _ci_rc=$?; }
ck_import_with "$w/istore" "$w/imported" --series run
[ "$_ci_rc" = 0 ] || fail "import exited $_ci_rc: $(cat "$tmp/import.err")"
ctl compact "$w/istore" --reclaim-delay 0 -q || fail "compact of the imported store"
mv "$w/imported" "$w/moved"
ctl verify "$w/istore" >/dev/null 2>&1 && fail "verify passed with the imported files gone"
ctl relocate "$w/istore" "$w/imported" "$w/moved" >"$tmp/relocate.out" || fail "relocate exited $?"
grep -q "relocated 2 checkpoints" "$tmp/relocate.out" || fail "relocate: $(cat "$tmp/relocate.out")"
ctl verify "$w/istore" >/dev/null || fail "verify after relocate"
ck_mount "$w/istore" "$mp" -o "$(opts ro)"
ck_py commit_check.py same "$mp/run/step-5" "$plain/step-5" "$mp/run/step-10" "$plain/step-10"
ck_umount "$mp"
