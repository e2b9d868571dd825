# Shared helpers for the integration tests (sourced, POSIX sh).
#
# Each test: `. "$CKPT_SRCDIR/tests/integration/lib.sh"`, then need_fuse /
# need_torch (exit 77 = skip when absent), ck_tmpdir, ck_mount STORE MNT [opts].
# Mounts and daemons started through these helpers are cleaned up on exit.

set -eu
: "${CKPT_BUILDDIR:=$(pwd)}"
: "${CKPT_SRCDIR:=$CKPT_BUILDDIR}"
: "${CKPT_FIXTURES=$CKPT_SRCDIR/../shared/fixtures}"	# make check: ./configure --with-fixtures
: "${TORCH_PYTHON:=/usr/bin/python3}"
CKPTFS="$CKPT_BUILDDIR/ckptfs"
CKPTCTL="$CKPT_BUILDDIR/ckptctl"
export CKPT_BUILDDIR CKPT_SRCDIR CKPT_FIXTURES TORCH_PYTHON CKPTFS CKPTCTL

_ck_mounts=""
_ck_fs_mounts=""
_ck_tmp=""

ck_cleanup() {
	for m in $_ck_mounts; do
		if grep -q " $m fuse" /proc/mounts 2>/dev/null; then
			fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || true
		fi
	done
	# After the FUSE mounts: their daemons may hold files there until they end.
	for m in $_ck_fs_mounts; do
		umount "$m" 2>/dev/null || { sleep 1; umount "$m" 2>/dev/null; } || umount -l "$m" 2>/dev/null || true
	done
	[ -n "$_ck_tmp" ] && rm -rf "$_ck_tmp"
	return 0
}
trap ck_cleanup EXIT INT TERM

# A skip is a failure where everything must run (CI sets CKPT_REQUIRE_ALL=1):
# there a missing FUSE or torch is a broken machine, not a reason to pass.
skip() {
	if [ "${CKPT_REQUIRE_ALL:-0}" = 1 ]; then
		echo "FAIL: would skip, but CKPT_REQUIRE_ALL=1: $*" >&2
		exit 1
	fi
	echo "SKIP: $*"
	exit 77
}
fail() { echo "FAIL: $*" >&2; exit 1; }

need_fuse() {
	[ -c /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null 2>&1 || skip "no fusermount3"
}

need_torch() {
	"$TORCH_PYTHON" -c 'import torch' 2>/dev/null || skip "$TORCH_PYTHON cannot import torch"
}

# Creates a scratch directory removed on exit; prints its path.
# (Created when lib.sh is sourced: `tmp=$(ck_tmpdir)` runs in a subshell,
# which could not hand a lazily made path back to the exit trap.)
_ck_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckptfs-test.XXXXXX")
ck_tmpdir() {
	echo "$_ck_tmp"
}

is_mounted() { grep -q " $1 fuse" /proc/mounts; }

# ck_mount STORE MNT [ckptfs args...]: ckptfs returns once the mount is live.
ck_mount() {
	store=$1 mnt=$2
	shift 2
	mkdir -p "$mnt"
	_ck_mounts="$_ck_mounts $mnt"
	"$CKPTFS" "$store" "$mnt" "$@" || fail "ckptfs $store $mnt $* exited $?"
	is_mounted "$mnt" || fail "ckptfs returned but $mnt is not mounted"
}

# ck_umount MNT: unmounts and waits for the daemon to go away.
ck_umount() {
	fusermount3 -u "$1" || fail "fusermount3 -u $1 failed"
	i=0
	while is_mounted "$1" && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	is_mounted "$1" && fail "$1 still mounted"
	return 0
}

# ck_py SCRIPT ARGS...: runs tests/py/SCRIPT with the torch Python (no .pyc
# files in the source tree, which may be read-only in a VPATH build).
ck_py() {
	_cp_script=$1
	shift
	PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$CKPT_SRCDIR/tests/py/$_cp_script" "$@"
}

# ck_import STORE DIR WANT_RC [import options...]: runs `ckptctl import`,
# keeps its stderr in STORE.<basename of DIR>.err (also shown in the log),
# and fails unless it exits WANT_RC (0 all indexed, 2 some files refused).
ck_import() {
	_ci_store=$1 _ci_dir=$2 _ci_want=$3
	shift 3
	_ci_rc=0
	_ci_err="$_ci_store.$(basename "$_ci_dir").err"
	"$CKPTCTL" import "$_ci_store" "$_ci_dir" "$@" 2>"$_ci_err" || _ci_rc=$?
	sed 's/^/  import: /' "$_ci_err"
	[ "$_ci_rc" = "$_ci_want" ] || fail "ckptctl import $_ci_dir exited $_ci_rc, expected $_ci_want"
	return 0
}

# ck_track MNT: also unmount MNT on exit (for tests that run ckptfs themselves,
# e.g. with -f in the background, or expect it to fail).
ck_track() {
	_ck_mounts="$_ck_mounts $1"
}

# ck_tmpfs DIR SIZE: a tmpfs of SIZE (e.g. 24m) mounted on DIR, unmounted on
# exit; skips (77) where mounting is not allowed (not root).
ck_tmpfs() {
	mkdir -p "$1"
	mount -t tmpfs -o size="$2" tmpfs "$1" 2>/dev/null || skip "cannot mount a tmpfs on $1 (not root?)"
	_ck_fs_mounts="$_ck_fs_mounts $1"
}
