#!/bin/sh
# Many users on a read-only mount (-o ro,allow_other): an owner, a member of
# the files' group, another user and nobody each stat, read, list and read
# the user.ckptfs.* attributes of runs whose files are 0600, 0640 and 0644
# and whose directories are 0700, 0750, 0755 and 1777.  Every answer must
# be the one the same operation on the imported files gives that user.
# A composite drawing from an older checkpoint only its owner may read is
# readable by nobody who cannot read that checkpoint, nor are the views of
# the control directory made of it (MNT/.ckptfs, whose directories answer
# as the checkpoints'), and a mount without allow_other refuses every user
# but the one who mounted it.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_users
tmp=$(ck_tmpdir)
chmod 755 "$tmp"
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
# Other users run these: copies in the test's directory, since the checkout
# may sit in a directory only root can enter (mktemp -d).
cp "$CKPT_SRCDIR/tests/py/perm_ops.py" "$CKPTCTL" "$tmp/"
chmod 0755 "$tmp/perm_ops.py" "$tmp/ckptctl"
ops_py=$tmp/perm_ops.py
CKPTCTL=$tmp/ckptctl

G=ckr$$g O=ckr$$o M=ckr$$m X=ckr$$x
ck_group "$G"
ck_user "$O" "$G"
ck_user "$M" "" "$G"
ck_user "$X"
users="$O $M $X nobody"

# The runs: one per directory mode, each with files of every mode, also
# one directory down.
base=$tmp/local
mkdir -m 755 "$base"
for d in 0700 0750 0755 1777; do
	c=$base/run_$d/checkpoint-10
	mkdir -p "$c/sub"
	for f in 600 640 644; do
		echo "mode $f" >"$c/f$f.txt"
		chmod "$f" "$c/f$f.txt"
	done
	echo sub >"$c/sub/f644.txt"
	chmod 644 "$c/sub/f644.txt"
	chown -R "$O:$G" "$base/run_$d"
	chmod "$d" "$base/run_$d" "$c" "$c/sub"
done

# A composite: checkpoint-20 (the owner's, readable by all) saved only
# tensor a; b comes from checkpoint-10, which only $M may read.
mixed=$base/mixed
mkdir -p "$mixed/checkpoint-10" "$mixed/checkpoint-20"
"$PY" - "$mixed" <<'EOF'
import json, struct, sys
def save(path, names):
    hdr, data = {}, b""
    for i, n in enumerate(names):
        hdr[n] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
        data += struct.pack("<2f", i, -i)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + data)
save(sys.argv[1] + "/checkpoint-10/model.safetensors", ["a", "b"])
save(sys.argv[1] + "/checkpoint-20/model.safetensors", ["a"])
EOF
chown -R "$M:$M" "$mixed/checkpoint-10"
chmod 700 "$mixed/checkpoint-10"
chmod 600 "$mixed/checkpoint-10/model.safetensors"
chown -R "$O:$G" "$mixed" "$mixed/checkpoint-20"
chown -R "$M:$M" "$mixed/checkpoint-10"

store=$tmp/store
"$CKPTCTL" init "$store" >/dev/null
for r in "$base"/run_* "$mixed"; do
	ck_import "$store" "$r" 0
done
[ "$(stat -c %a "$store")" = 700 ] || fail "ckptctl init made the store $(stat -c %a "$store")"
mp=$tmp/mnt
ck_mount "$store" "$mp" -o ro,allow_other

ops=$tmp/ops
: >"$ops"
op() { printf '%s\n' "$(printf '%s\t' "$@" | sed 's/\t$//')" >>"$ops"; }
op stat .
op list .
for d in 0700 0750 0755 1777; do
	r=run_$d c=run_$d/checkpoint-10
	op stat "$r"
	op list "$r"
	op stat "$c"
	op list "$c"
	op getxattr "$c" user.ckptfs.step
	op list "$c/sub"
	for f in "$c/f600.txt" "$c/f640.txt" "$c/f644.txt" "$c/sub/f644.txt"; do
		op stat "$f"
		op read "$f"
		op getxattr "$f" user.ckptfs.kind
		op getxattr "$f" user.ckptfs.sources
	done
done

# matrix WHAT: every user's answers from the mount equal the files'.
matrix() {
	for u in $users; do
		ck_as "$u" "$PY" "$ops_py" "$base" "$ops" >"$tmp/local.$u" || fail "$u: operations on the files failed"
		ck_as "$u" "$PY" "$ops_py" "$mp" "$ops" >"$tmp/mount.$u" || fail "$u: operations on the mount failed"
		diff "$tmp/local.$u" "$tmp/mount.$u" >"$tmp/diff.$u" || {
			cat "$tmp/diff.$u"
			fail "$1: $u: the mount answers differently from the files (< files, > mount)"
		}
		grep -q "EACCES" "$tmp/local.$u" || [ "$u" = "$O" ] || fail "$u: nothing was refused: not a test"
	done
}
matrix "a new store"
grep -q "EACCES" "$tmp/local.nobody" && ! grep -q "EACCES" "$tmp/local.$O" ||
	fail "the owner was refused something, or nobody nothing"

# The composite: who may read it is who may read both versions.  One mode
# cannot say that $M, who owns the older version but is not in the newest's
# group, may (docs/design.md, "Owners and modes"): refused too.
comp=$mp/mixed/checkpoint-20/model.safetensors
[ "$(stat -c %U:%G:%a "$comp")" = "$O:$G:600" ] || fail "composite shows $(stat -c %U:%G:%a "$comp")"
# Its weights view: read-only, the same owner.
wv=$mp/.ckptfs/weights/mixed/checkpoint-20/model.safetensors
[ "$(stat -c %U:%G:%a "$wv")" = "$O:$G:400" ] || fail "weights view shows $(stat -c %U:%G:%a "$wv")"
for u in $O $X nobody $M; do
	both=OK
	for v in 10 20; do
		ck_as "$u" cat "$mixed/checkpoint-$v/model.safetensors" >/dev/null 2>&1 || both=EACCES
	done
	got=OK
	ck_as "$u" cat "$comp" >/dev/null 2>&1 || got=EACCES
	xattr=OK
	ck_as "$u" getfattr -n user.ckptfs.sources "$comp" >/dev/null 2>&1 || xattr=EACCES
	if [ "$u" = "$M" ]; then
		[ "$both" = OK ] || fail "$M cannot read both versions: not the case meant"
		both=EACCES
	fi
	[ "$got" = "$both" ] || fail "$u reads the composite: $got, reading every version it draws from: $both"
	[ "$xattr" = "$both" ] || fail "$u reads user.ckptfs.sources of the composite: $xattr, expected $both"
	got=OK
	ck_as "$u" cat "$wv" >/dev/null 2>&1 || got=EACCES
	xattr=OK
	ck_as "$u" getfattr -n user.ckptfs.sources "$wv" >/dev/null 2>&1 || xattr=EACCES
	[ "$got/$xattr" = "$both/$both" ] || fail "$u reads the weights view (and its sources): $got/$xattr, expected $both"
	# LAYER.json's numbers come from both versions of each tensor: the
	# older one is only $M's, who is refused the newest's mode.
	ck_as "$u" cat "$mp/.ckptfs/layers/mixed/checkpoint-20/other.json" >/dev/null 2>&1 &&
		fail "$u reads a LAYER.json drawn from a checkpoint only $M may read"
	# The views' directories answer as the checkpoints'.
	for d in 0700 0750 0755 1777; do
		want=OK
		ck_as "$u" ls "$base/run_$d/checkpoint-10" >/dev/null 2>&1 || want=EACCES
		got=OK
		ck_as "$u" ls "$mp/.ckptfs/layers/run_$d/checkpoint-10" >/dev/null 2>&1 || got=EACCES
		[ "$got" = "$want" ] || fail "$u lists layers/run_$d/checkpoint-10: $got, its checkpoint: $want"
	done
done
cmp "$mp/.ckptfs/layers/mixed/checkpoint-20/other.json" "$mp/.ckptfs/layers/mixed/checkpoint-20/other.json" ||
	fail "root cannot read a LAYER.json"
ck_as "$X" cat "$mixed/checkpoint-20/model.safetensors" >/dev/null || fail "$X cannot read the newest version"
cmp "$comp" "$comp" || fail "root cannot read the composite"

# Without allow_other only whoever mounted reaches the mount.
ck_mount "$store" "$tmp/mnt2" -o ro
ls "$tmp/mnt2/run_0755" >/dev/null || fail "root cannot list its own mount"
for u in $O $X nobody; do
	ck_as "$u" ls "$tmp/mnt2" >/dev/null 2>&1 && fail "$u lists a mount without allow_other"
	ck_as "$u" cat "$tmp/mnt2/run_0755/checkpoint-10/f644.txt" >/dev/null 2>&1 &&
		fail "$u reads a mount without allow_other"
done

# A store imported before owners were recorded (version 1 manifests, file
# records without owners): owners and modes come from the files, and for a
# file that is gone, from the directory that held it.
ck_umount "$mp"
"$CKPT_BUILDDIR/tests/unit/manifest_tool" drop-owners "$store"/manifests/*/*.manifest || fail "manifest_tool"
grep -q "^ckptfs-manifest 1$" "$store/manifests/run_0750/checkpoint-10.manifest" || fail "not a version 1 manifest"
rm -r "$store/index"
"$CKPTCTL" reindex "$store" >/dev/null || fail "reindex"
ck_mount "$store" "$mp" -o ro,allow_other
matrix "a store from before owners were recorded"
comp=$mp/mixed/checkpoint-20/model.safetensors
ck_as "$X" cat "$comp" >/dev/null 2>&1 && fail "old store: $X reads the composite"
cmp "$comp" "$comp" || fail "old store: root cannot read the composite"

# -o nopermissions: no check at all, on purpose.
ck_umount "$mp"
ck_mount "$store" "$mp" -o ro,allow_other,nopermissions
ck_as nobody cat "$mp/run_0700/checkpoint-10/f600.txt" >/dev/null ||
	fail "-o nopermissions still refuses"
ck_umount "$mp"
ck_umount "$tmp/mnt2"
echo PASS
