#!/bin/sh
# A store moves: checkpoints of a small training run written through a
# writable mount (full saves, then a partial one whose composite draws on
# older versions), packed by compaction with the newest kept raw, then
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
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
command -v rsync >/dev/null 2>&1 || skip "no rsync"
tmp=$(ck_tmpdir)
st=$tmp/store mp=$tmp/mnt plain=$tmp/plain
check() { ck_py packs_check.py "$@"; }

"$CKPTCTL" init "$st"
ck_mount "$st" "$mp" -o compact=0
mkdir "$mp/run"
check train "$mp/run" "$plain" 1 3
check train "$mp/run" "$tmp/partial" 4 4 partial
ck_umount "$mp"
"$CKPTCTL" compact "$st" --keep-raw 1 -q || fail "ckptctl compact failed"
[ ! -e "$st/data/run/step-5/model.pt" ] || fail "compaction left the raw files of step-5"
ls "$st/packs" | grep -q . || fail "no packs"
ck_py offline_merge.py "$tmp/merged" "$plain/step-5" "$plain/step-10" "$plain/step-15" \
	"$tmp/partial/step-20" >/dev/null

# serves STORE: every checkpoint bit-exact through a fresh mount, verify clean.
serves() {
	ck_mount "$1" "$mp" -o ro
	check same "$mp/run" "$plain"
	check composite "$mp/run/step-20" "$tmp/merged"
	ck_umount "$mp"
	"$CKPTCTL" verify "$1" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "ckptctl verify $1 exited $?"; }
	grep -q " 0 damaged" "$tmp/verify.out" || fail "verify of $1: $(cat "$tmp/verify.out")"
}

# recorded STORE: the manifest of step-20 names model.pt's inode as it is now.
recorded() {
	ino=$(stat -c %i "$1/data/run/step-20/model.pt")
	grep '^file path="model.pt"' "$1/manifests/run/step-20.manifest" | grep -q " ino=$ino " ||
		fail "$1: the manifest of step-20 does not record model.pt's new inode $ino"
}

serves "$st"

# --- cp -a to another path, the original moved away ------------------------------
cp -a "$st" "$tmp/copy"
mv "$st" "$tmp/away"
serves "$tmp/copy"
recorded "$tmp/copy"
mv "$tmp/away" "$st"

# --- a tar round trip at the same path ----------------------------------------------
(cd "$tmp" && tar cf store.tar store)
rm -rf "$st"
(cd "$tmp" && tar xf store.tar)
serves "$st"
recorded "$st"

# --- rsync -a to a second store, mounted beside the first -------------------------
rsync -a "$st/" "$tmp/second/"
ck_mount "$st" "$tmp/mnt1" -o ro
serves "$tmp/second"
check same "$tmp/mnt1/run" "$plain"
ck_umount "$tmp/mnt1"
recorded "$tmp/second"

# --- a copy with one tensor byte changed, its size kept: refused ------------------
cp -a "$st" "$tmp/tampered"
"$TORCH_PYTHON" - "$tmp/tampered/data/run/step-20/model.pt" <<'PY'
import os, sys
with open(sys.argv[1], "r+b") as f:
    f.seek(os.path.getsize(sys.argv[1]) // 2)
    b = f.read(1)
    f.seek(-1, 1)
    f.write(bytes([b[0] ^ 0x01]))
PY
ck_mount "$tmp/tampered" "$mp" -o ro
cat "$mp/run/step-20/model.pt" >/dev/null 2>"$tmp/err" && fail "a changed model.pt was served"
grep -q "Input/output error" "$tmp/err" || fail "reading a changed file: $(cat "$tmp/err")"
cmp "$mp/run/step-15/optimizer.pt" "$plain/step-15/optimizer.pt" || fail "an unchanged file of the copy differs"
ck_umount "$mp"
rc=0
"$CKPTCTL" verify "$tmp/tampered" >"$tmp/verify.out" 2>&1 || rc=$?
[ $rc = 3 ] || fail "verify of a changed copy exited $rc: $(cat "$tmp/verify.out")"
grep -q "step-20/model.pt" "$tmp/verify.out" || fail "verify does not name the changed file"

# --- files imported in place moved: ckptctl relocate --------------------------------
"$CKPTCTL" init "$tmp/istore"
mkdir -p "$tmp/imported"
cp -r "$plain/step-5" "$plain/step-10" "$tmp/imported/"
ck_import "$tmp/istore" "$tmp/imported" 0 --series run
"$CKPTCTL" compact "$tmp/istore" -q || fail "compact of the imported store"
mv "$tmp/imported" "$tmp/moved"
"$CKPTCTL" verify "$tmp/istore" >/dev/null 2>&1 && fail "verify passed with the imported files gone"
"$CKPTCTL" relocate "$tmp/istore" "$tmp/imported" "$tmp/moved" >"$tmp/relocate.out" || fail "relocate exited $?"
grep -q "relocated 2 checkpoints" "$tmp/relocate.out" || fail "relocate: $(cat "$tmp/relocate.out")"
"$CKPTCTL" verify "$tmp/istore" >/dev/null || fail "verify after relocate"
ck_mount "$tmp/istore" "$mp" -o ro
ck_py commit_check.py same "$mp/run/step-5" "$plain/step-5" "$mp/run/step-10" "$plain/step-10"
ck_umount "$mp"
echo "relocate: ok"
