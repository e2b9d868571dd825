#!/bin/sh
# The mount(8) side of ckptfs.  mount-helpers/mount.ckptfs called the way
# mount(8) calls /sbin/mount.TYPE (SPEC DIR [-sfnv] [-o opts]): flags,
# fstab-style options, exit statuses (0, 1 usage, 2 no ckptfs, 32 failed);
# mount.fuse3 running `ckptfs SOURCE DIR -o OPTS` for type fuse.ckptfs with
# PATH holding the build dir; and, as root in a private mount namespace
# where overlays put ckptfs and the helper where an installation would,
# the real `mount -t ckptfs`, `mount -t fuse.ckptfs` and an fstab line.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
ck_tmpdir >/dev/null	# in this shell, so that the exit trap removes it
tmp=$(ck_tmpdir)
fix=$CKPT_FIXTURES
[ -f "$fix/safetensors/burn_mnist.safetensors" ] || skip "no fixtures in $fix"
helper=$CKPT_SRCDIR/mount-helpers/mount.ckptfs
store=$tmp/store
mnt=$tmp/mnt
run=$tmp/run1
mkdir -p "$mnt" "$run/checkpoint-10"
ck_track "$mnt"
cp "$fix/safetensors/burn_mnist.safetensors" "$run/checkpoint-10/model.safetensors"
echo '{"hidden_size": 8}' >"$run/checkpoint-10/config.json"
"$CKPTCTL" init "$store" >/dev/null || fail "ckptctl init"
ck_import "$store" "$run" 0
file=run1/checkpoint-10/model.safetensors

# helper_exit WANT ARGS...: the helper exits WANT.
helper_exit() {
	_he_want=$1
	shift
	_he_rc=0
	"$helper" "$@" >"$tmp/out" 2>"$tmp/err" || _he_rc=$?
	[ "$_he_rc" = "$_he_want" ] || fail "mount.ckptfs $* exited $_he_rc, expected $_he_want: $(cat "$tmp/err")"
}

# check_mount TYPE OPT: mounted with that type and first kernel option, and serving.
check_mount() {
	grep -q " $mnt $1 $2," /proc/mounts || fail "expected $1 $2 on $mnt: $(grep " $mnt " /proc/mounts)"
	cmp "$run/checkpoint-10/model.safetensors" "$mnt/$file" || fail "$mnt/$file differs from its source"
}

# --- the helper, called directly -------------------------------------------
helper_exit 1
helper_exit 1 "$store"
helper_exit 1 "$store" "$mnt" -o
helper_exit 1 "$store" "$mnt" -q
helper_exit 1 "$store" "$mnt" -o ro,frobnicate	# ckptfs: bad option
! is_mounted "$mnt" || fail "a bad option mounted"
helper_exit 32 "$tmp/no-such-store" "$mnt" -o ro
grep -q "no-such-store" "$tmp/err" || fail "the failure is not explained: $(cat "$tmp/err")"
! is_mounted "$mnt" || fail "a bad store mounted"

# -f (fake) and -v: says what it would run, mounts nothing.
helper_exit 0 "$store" "$mnt" -fv -o ro
grep -q "ckptfs $store $mnt -o ro" "$tmp/err" || fail "-v does not show the command: $(cat "$tmp/err")"
! is_mounted "$mnt" || fail "-f (fake) mounted"

# ckptfs found through PATH, as mount(8) would run the helper.
env -u CKPTFS PATH="$CKPT_BUILDDIR:$PATH" "$helper" "$store" "$mnt" -s -n -o ro,noauto,user,nofail,_netdev,defaults,x-systemd.requires=foo,comment=ckpt ||
	fail "mount.ckptfs through PATH exited $?"
check_mount fuse.ckptfs ro
ck_umount "$mnt"

# ... and through $CKPTFS, with glued -oOPTS and -r.
"$helper" "$store" "$mnt" -r -oallow_other || fail "mount.ckptfs -r exited $?"
check_mount fuse.ckptfs ro
grep " $mnt " /proc/mounts | grep -q allow_other || fail "allow_other not passed on"
ck_umount "$mnt"

# No ckptfs anywhere: exit 2 with a hint.
if ! PATH=/nonexistent command -v ckptfs >/dev/null 2>&1; then
	_rc=0
	env -u CKPTFS PATH=/nonexistent "$helper" "$store" "$mnt" 2>"$tmp/err" || _rc=$?
	[ $_rc = 2 ] || fail "missing ckptfs: exit $_rc, expected 2"
	grep -q "ckptfs not found" "$tmp/err" || fail "missing ckptfs not explained"
fi

# --- mount.fuse3 for type fuse.ckptfs, exactly as mount(8) runs it ---------------
fuse_helper=
for m in /sbin/mount.fuse3 /usr/sbin/mount.fuse3 /sbin/mount.fuse /usr/sbin/mount.fuse; do
	if [ -x "$m" ]; then
		fuse_helper=$m
		break
	fi
done
if [ -n "$fuse_helper" ]; then
	env -u CKPTFS PATH="$CKPT_BUILDDIR:$PATH" "$fuse_helper" "$store" "$mnt" -o ro,noauto,_netdev,x-foo=1 -t fuse.ckptfs ||
		fail "$fuse_helper -t fuse.ckptfs exited $?"
	check_mount fuse.ckptfs ro
	ck_umount "$mnt"
else
	skip_part "no mount.fuse3"
fi

# --- real mount(8), as root, in a private mount namespace ------------------------
# mount(8) runs helpers only from /sbin and without PATH (so mount.fuse3's
# `sh -c ckptfs` searches the shell's default PATH): overlays put the
# helper in /sbin and ckptfs in /usr/local/bin, as `make install` would,
# visible only inside the namespace.
if [ "$(id -u)" != 0 ]; then
	skip_part "mount(8) needs root"
	ck_done
fi
if ! unshare --mount --propagation private true 2>/dev/null; then
	skip_part "unshare --mount does not work here"
	ck_done
fi
mkdir -p "$tmp/ov/bin" "$tmp/ov/sbin"
cp "$CKPT_BUILDDIR/ckptfs" "$tmp/ov/bin/ckptfs"
cp "$helper" "$tmp/ov/sbin/mount.ckptfs"
printf '%s %s fuse.ckptfs ro,allow_other,noauto,x-ckptfs-test=1 0 0\n' "$store" "$mnt" >"$tmp/fstab"
cat >"$tmp/inner.sh" <<'EOF'
# Runs inside `unshare --mount`: $1 tmp, $2 store, $3 mnt, $4 file, $5 source,
# $6 mount.fuse3's path or "".  Exits 77 when a part could not run.
set -u
tmp=$1 store=$2 mnt=$3 file=$4 src=$5 fuse_helper=$6
trap 'grep -q " $mnt " /proc/mounts && umount -l "$mnt"' EXIT
fail() { echo "FAIL (namespace): $*" >&2; exit 1; }
sbin=$(realpath /sbin)
mount -t overlay ckptfs-test -o "lowerdir=$tmp/ov/bin:/usr/local/bin" /usr/local/bin 2>/dev/null &&
	mount -t overlay ckptfs-test -o "lowerdir=$tmp/ov/sbin:$sbin" "$sbin" 2>/dev/null || {
	echo "SKIP part: no overlay mounts here"
	exit 77
}
skipped=0
mounted_ok() {
	grep -q " $mnt fuse.ckptfs ro," /proc/mounts || fail "$1: not mounted ro as fuse.ckptfs"
	cmp "$src" "$mnt/$file" || fail "$1: $file differs"
	umount "$mnt" || fail "$1: umount"
	! grep -q " $mnt " /proc/mounts || fail "$1: still mounted after umount"
}
env -u CKPTFS mount -t ckptfs "$store" "$mnt" -o ro || fail "mount -t ckptfs exited $?"
mounted_ok "mount -t ckptfs"
# Type fuse.ckptfs goes through fuse3's mount.fuse3 (package fuse3).
if [ -n "$fuse_helper" ]; then
	env -u CKPTFS mount -t fuse.ckptfs "$store" "$mnt" -o ro,allow_other || fail "mount -t fuse.ckptfs exited $?"
	mounted_ok "mount -t fuse.ckptfs"
	env -u CKPTFS mount -T "$tmp/fstab" "$mnt" || fail "mount from an fstab line exited $?"
	mounted_ok "fstab: fuse.ckptfs ro,allow_other"
else
	echo "SKIP part: no mount.fuse3 for type fuse.ckptfs"
	skipped=1
fi
rc=0
env -u CKPTFS mount -t ckptfs "$tmp/no-such-store" "$mnt" -o ro 2>/dev/null || rc=$?
[ $rc = 32 ] || fail "mount -t ckptfs of a bad store exited $rc, expected 32"
echo "namespace part passed"
[ $skipped = 0 ] || exit 77
EOF
rc=0
unshare --mount --propagation private sh "$tmp/inner.sh" "$tmp" "$store" "$mnt" "$file" \
	"$run/checkpoint-10/model.safetensors" "$fuse_helper" || rc=$?
[ $rc = 77 ] && skip_part "parts of mount(8) in a private namespace"
[ $rc = 0 ] || [ $rc = 77 ] || fail "mount(8) in a private namespace"
echo "PASS"
ck_done
