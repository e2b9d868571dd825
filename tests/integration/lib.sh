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
CKPTCTL="$CKPT_BUILDDIR/ckptctl"	# also the one the ckptfs Python package runs
# The ckptfs Python package, as the examples and tests import it from a
# source tree.
PYTHONPATH="$CKPT_SRCDIR/python${PYTHONPATH:+:$PYTHONPATH}"
export CKPT_BUILDDIR CKPT_SRCDIR CKPT_FIXTURES TORCH_PYTHON CKPTFS CKPTCTL PYTHONPATH

_ck_mounts=""
_ck_fs_mounts=""
_ck_tmp=""
_ck_atexit=""
_ck_users=""
_ck_groups=""

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
	# Then what the test registered with ck_atexit (services it started).
	for f in $_ck_atexit; do
		"$f" || true
	done
	[ -n "$_ck_tmp" ] && rm -rf "$_ck_tmp"
	for u in $_ck_users; do userdel "$u" 2>/dev/null || true; done
	for g in $_ck_groups; do groupdel "$g" 2>/dev/null || true; done
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

# skip_part WHY: a part of the test cannot run here.  Where everything must
# run (CKPT_REQUIRE_ALL=1) that fails the test; elsewhere the rest goes on
# and the test ends as skipped (77), not passed (ck_done).
_ck_skipped_parts=0
skip_part() {
	[ "${CKPT_REQUIRE_ALL:-0}" != 1 ] || fail "would skip a part, but CKPT_REQUIRE_ALL=1: $*"
	echo "SKIP part: $*"
	_ck_skipped_parts=$((_ck_skipped_parts + 1))
}
# ck_done: the end of a test that may have skipped parts: 77 if it did.
ck_done() {
	[ "$_ck_skipped_parts" = 0 ] || exit 77
	exit 0
}

need_fuse() {
	[ -c /dev/fuse ] || skip "no /dev/fuse"
	command -v fusermount3 >/dev/null 2>&1 || skip "no fusermount3"
}

need_torch() {
	"$TORCH_PYTHON" -c 'import torch' 2>/dev/null || skip "$TORCH_PYTHON cannot import torch"
}

# need_users: root, with the tools to make users and act as them.
need_users() {
	[ "$(id -u)" = 0 ] || skip "not root: cannot act as other users"
	for _nu in useradd userdel groupadd groupdel setpriv; do
		command -v "$_nu" >/dev/null 2>&1 || skip "no $_nu"
	done
	id nobody >/dev/null 2>&1 || skip "no user nobody"
}

# ck_until SECONDS COMMAND...: COMMAND succeeds within SECONDS, run every
# 0.1 s until it does (and not again after: it may be a mount); its last
# status is the function's.
ck_until() {
	_cu_n=$(($1 * 10))
	shift
	while :; do
		"$@" && return 0
		_cu_rc=$?
		[ "$_cu_n" -gt 0 ] || return $_cu_rc
		sleep 0.1
		_cu_n=$((_cu_n - 1))
	done
}

# /etc/passwd is locked while another test adds a user: try again a while.
_ck_retry() {
	_cr_i=0
	until "$@" 2>/dev/null; do
		_cr_i=$((_cr_i + 1))
		[ $_cr_i -lt 50 ] || fail "$* failed"
		sleep 0.2
	done
}

# ck_group NAME: a group, removed on exit.
ck_group() {
	_ck_retry groupadd "$1"
	_ck_groups="$_ck_groups $1"
}

# ck_user NAME [PRIMARY_GROUP [SUPPLEMENTARY_GROUP]]: a user without a home
# or a login (its own group as primary unless one is given), removed on exit.
ck_user() {
	if [ -n "${2:-}" ]; then
		_ck_retry useradd -M -N -s /usr/sbin/nologin -g "$2" ${3:+-G "$3"} "$1"
	else
		_ck_retry useradd -M -U -s /usr/sbin/nologin ${3:+-G "$3"} "$1"
		_ck_groups="$_ck_groups $1"
	fi
	_ck_users="$1 $_ck_users"
}

# ck_as USER COMMAND...: runs COMMAND as USER, with its groups.
ck_as() {
	_ca_u=$1
	shift
	setpriv --reuid="$_ca_u" --regid="$(id -g "$_ca_u")" --init-groups -- "$@"
}

# Creates a scratch directory removed on exit; prints its path.
# (Created when lib.sh is sourced: `tmp=$(ck_tmpdir)` runs in a subshell,
# which could not hand a lazily made path back to the exit trap.)
_ck_tmp=$(mktemp -d "${TMPDIR:-/tmp}/ckptfs-test.XXXXXX")
ck_tmpdir() {
	echo "$_ck_tmp"
}

is_mounted() { grep -q " $1 fuse" /proc/mounts; }
unmounted() { ! is_mounted "$1"; }

# ck_gone PID: true once the process has ended (a zombie counts: nobody may
# reap it here).
ck_gone() {
	! kill -0 "$1" 2>/dev/null || [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

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
	ck_until 5 unmounted "$1" || fail "$1 still mounted"
}

# ck_save_small MNT SERIES STEP AGE: a small checkpoint (config.json and
# trainer_state.json) whose files are AGE seconds old, written into the
# writable mount MNT as SERIES/tmp-checkpoint-STEP and committed by its
# rename to checkpoint-STEP; fails unless it is committed.
ck_save_small() {
	_cs_d=$1/$2/tmp-checkpoint-$3
	mkdir -p "$_cs_d"
	echo "{\"step\": $3}" >"$_cs_d/config.json"
	echo "{\"global_step\": $3}" >"$_cs_d/trainer_state.json"
	touch -d "@$(($(date +%s) - $4))" "$_cs_d/config.json" "$_cs_d/trainer_state.json"
	mv "$_cs_d" "$1/$2/checkpoint-$3"
	getfattr -n user.ckptfs.step "$1/$2/checkpoint-$3" >/dev/null 2>&1 || fail "$2/checkpoint-$3 is not committed"
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

# ck_atexit FUNCTION: runs FUNCTION on exit, after every mount is gone
# (to stop a service the test started).
ck_atexit() {
	_ck_atexit="$_ck_atexit $1"
}

# ck_tmpfs DIR SIZE: a tmpfs of SIZE (e.g. 24m) mounted on DIR, unmounted on
# exit; skips (77) where mounting is not allowed (not root).
ck_tmpfs() {
	mkdir -p "$1"
	mount -t tmpfs -o size="$2" tmpfs "$1" 2>/dev/null || skip "cannot mount a tmpfs on $1 (not root?)"
	_ck_fs_mounts="$_ck_fs_mounts $1"
}

# The environment for a process a test kills at a random moment
# (env "$CK_KILLABLE" CMD... &, so that $! is CMD's pid): the sanitizers'
# leak check at exit off, since a kill that lands while that check has the
# process's threads stopped leaves a report of the check's own failure
# ("Unable to get registers from thread"), not of a leak.
CK_KILLABLE="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"

# Whether a daemon run by this user can let FUSE files be read by
# passthrough: root (CAP_SYS_ADMIN) on Linux 6.9+ built with FUSE_PASSTHROUGH.
can_passthrough() {
	[ "$(id -u)" = 0 ] || return 1
	_v=$(uname -r)
	_major=${_v%%.*}
	_rest=${_v#*.}
	_minor=${_rest%%[!0-9]*}
	[ "$_major" -gt 6 ] || { [ "$_major" -eq 6 ] && [ "$_minor" -ge 9 ]; } || return 1
	[ -r /proc/config.gz ] || return 0
	zcat /proc/config.gz | grep -q '^CONFIG_FUSE_PASSTHROUGH=y'
}
