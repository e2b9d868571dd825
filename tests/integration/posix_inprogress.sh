#!/bin/sh
# An in-progress checkpoint behaves as a local directory: the same batch of
# operations (tests/py/posix_ops.py: opens, attributes, owners, times,
# truncation and fallocate, renames over files and directories, unlink and
# rmdir under open descriptors, symbolic and hard links, user.* extended
# attributes, paths longer than PATH_MAX) runs in a local directory and in
# MNT/run/checkpoint-1/, as root and as another user in a sticky
# directory, and every answer must be the same.  Fifos, device nodes and
# sockets are refused with EPERM, other attribute namespaces with ENOTSUP.
# A file created O_CREAT|O_RDONLY no longer keeps its checkpoint from
# committing.  A checkpoint with a symbolic link, hard links, an empty
# directory, changed owners, modes and times and user.* attributes commits
# on its marker and reads back the same way, also after a remount and a
# reindex from the manifests; committed checkpoints refuse every change
# (EROFS).
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_users
tmp=$(ck_tmpdir)
chmod 755 "$tmp"
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
cp "$CKPT_SRCDIR/tests/py/posix_ops.py" "$tmp/"
chmod 0755 "$tmp/posix_ops.py"
ops() { PYTHONDONTWRITEBYTECODE=1 "$PY" "$tmp/posix_ops.py" "$@"; }
U=ckpx$$u
ck_user "$U"

store=$tmp/store
"$CKPTCTL" init "$store" >/dev/null
mnt=$tmp/mnt
ck_mount "$store" "$mnt" -o allow_other
mkdir "$mnt/run" "$mnt/run/checkpoint-1" "$tmp/local"
ck_dir=$mnt/run/checkpoint-1

# 1. A file created with O_CREAT|O_RDONLY: its release gives up the writers
# lock, so the marker still commits.
mkdir "$mnt/run/checkpoint-4"
"$PY" -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o644))' "$mnt/run/checkpoint-4/x"
echo '{}' >"$mnt/run/checkpoint-4/config.json"
echo '{"global_step": 4}' >"$mnt/run/checkpoint-4/trainer_state.json"
ck_until 15 test -d "$store/data/run/checkpoint-4" || fail "a file created read-only kept checkpoint-4 from committing"

# 2. As root: everything, owners included.
ops "$tmp/local" root >"$tmp/local.out" || fail "posix_ops failed in a local directory"
ops "$ck_dir" root >"$tmp/mount.out" || fail "posix_ops failed in the checkpoint"
diff -u "$tmp/local.out" "$tmp/mount.out" || fail "an in-progress checkpoint answered unlike a local directory"
# The transcript holds what the three regressions are about.
grep -q '^pread after unlink: OK b.hello.$' "$tmp/mount.out" || fail "an unlinked open file is not read"
grep -q '^the open file still reads: OK b.old bytes.$' "$tmp/mount.out" || fail "a file renamed over is not read"
grep -q '^deep tree: OK 48[0-9][0-9] ' "$tmp/mount.out" || fail "no path longer than PATH_MAX"

# 3. As another user in a sticky directory of root's.
for d in "$tmp/local/u" "$ck_dir/u"; do
	mkdir -m 1777 "$d"
	echo r >"$d/roots" && chmod 644 "$d/roots"
	echo s >"$d/secret" && chmod 600 "$d/secret"
done
ck_as "$U" "$PY" "$tmp/posix_ops.py" "$tmp/local/u" user >"$tmp/local.user" || fail "posix_ops (user) failed locally"
ck_as "$U" "$PY" "$tmp/posix_ops.py" "$ck_dir/u" user >"$tmp/mount.user" || fail "posix_ops (user) failed in the checkpoint"
diff -u "$tmp/local.user" "$tmp/mount.user" || fail "another user got other answers in the checkpoint"

# 4. What a checkpoint cannot hold.
ops "$ck_dir" refused >"$tmp/refused.out"
cat >"$tmp/refused.want" <<'EOF'
mkfifo: EPERM
mknod char: EPERM
mknod block: EPERM
socket bind: EPERM
trusted xattr: ENOTSUP
security xattr: ENOTSUP
EOF
diff -u "$tmp/refused.want" "$tmp/refused.out" || fail "refusals differ from the documented ones"
rm "$ck_dir/x"

# The checkpoint commits on its marker after all that.
echo '{"global_step": 1}' >"$ck_dir/trainer_state.json"
ck_until 15 test -d "$store/data/run/checkpoint-1" || fail "checkpoint-1 did not commit on its marker"
"$CKPTCTL" verify "$store" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "verify after the batch"; }

# 5. What a trainer made reads back the same way once committed (a series
# of its own: composites show the union of their series' paths).
mkdir "$mnt/links"
c=$mnt/links/checkpoint-5
mkdir -p "$c/sub/empty" "$c/private"
echo '{"layers": 2}' >"$c/config.json"
ln "$c/config.json" "$c/config-copy.json"
ln -s config.json "$c/latest.json"
ln -s ../config.json "$c/sub/up"
chmod 700 "$c/private"
chown "$U" "$c/config.json"
chmod 640 "$c/config.json"
touch -h -d '2021-02-03 04:05:06' "$c/config.json" "$c/latest.json"
setfattr -n user.origin -v step-5 "$c/config.json"
echo '{"global_step": 5}' >"$c/trainer_state.json"
ck_until 15 test -d "$store/data/links/checkpoint-5" || fail "checkpoint-5 did not commit"
check_committed() {
	d=$1
	[ "$(readlink "$d/latest.json")" = config.json ] || fail "$d: latest.json is no link to config.json"
	[ "$(readlink "$d/sub/up")" = ../config.json ] || fail "$d: sub/up"
	[ "$(cat "$d/latest.json")" = '{"layers": 2}' ] || fail "$d: the link does not lead to config.json"
	[ "$(stat -c '%F %h %U %a %Y' "$d/config.json")" = "regular file 2 $U 640 1612325106" ] ||
		fail "$d: config.json is $(stat -c '%F %h %U %a %Y' "$d/config.json")"
	[ "$(stat -c %i "$d/config.json")" = "$(stat -c %i "$d/config-copy.json")" ] ||
		fail "$d: the two links are two files"
	[ "$(stat -c '%F %Y' "$d/latest.json")" = "symbolic link 1612325106" ] ||
		fail "$d: latest.json is $(stat -c '%F %Y' "$d/latest.json")"
	[ -d "$d/sub/empty" ] && [ -z "$(ls -A "$d/sub/empty")" ] || fail "$d: the empty directory is not there"
	[ "$(stat -c %a "$d/private")" = 700 ] || fail "$d: private is $(stat -c %a "$d/private")"
	[ "$(getfattr --only-values -n user.origin "$d/config.json")" = step-5 ] || fail "$d: user.origin lost"
	ls "$d" | tr '\n' ' ' | grep -qx 'config-copy.json config.json latest.json private sub trainer_state.json ' ||
		fail "$d lists $(ls "$d" | tr '\n' ' ')"
}
check_committed "$c"
grep -q 'kind=symlink .* target="config.json"' "$store/manifests/links/checkpoint-5.manifest" ||
	fail "no symlink in the manifest"
# A later checkpoint shows them too (its composite: the union of paths).
mkdir "$mnt/links/checkpoint-6"
echo '{"global_step": 6}' >"$mnt/links/checkpoint-6/trainer_state.json"
ck_until 15 test -d "$store/data/links/checkpoint-6" || fail "checkpoint-6 did not commit"
[ "$(readlink "$mnt/links/checkpoint-6/latest.json")" = config.json ] || fail "checkpoint-6 lost the link"
[ -d "$mnt/links/checkpoint-6/sub/empty" ] || fail "checkpoint-6 lost the empty directory"

# Committed checkpoints are read-only.
for what in "touch $c/new" "ln -s x $c/l2" "ln $c/config.json $c/h2" "mkdir $c/d2" \
	"setfattr -n user.k -v v $c/config.json" "setfattr -x user.origin $c/config.json" \
	"chmod 600 $c/config.json" "truncate -s 0 $c/config.json" "mv $c/config.json $c/moved"; do
	$what 2>"$tmp/ro.err" && fail "in a committed checkpoint: $what succeeded"
	grep -q 'Read-only file system' "$tmp/ro.err" || fail "$what: $(cat "$tmp/ro.err")"
done
# Files only inside checkpoints: a series directory takes none (EPERM).
touch "$mnt/links/loose" 2>"$tmp/loose.err" && fail "a file in a series directory"
grep -q 'Operation not permitted' "$tmp/loose.err" || fail "a loose file: $(cat "$tmp/loose.err")"

# A fresh mount of the same store, then of one reindexed from its manifests.
ck_umount "$mnt"
ck_mount "$store" "$mnt" -o ro
check_committed "$mnt/links/checkpoint-5"
ck_umount "$mnt"
"$CKPTCTL" reindex "$store" >/dev/null || fail "reindex"
ck_mount "$store" "$mnt" -o ro
check_committed "$mnt/links/checkpoint-5"
"$CKPTCTL" verify "$store" >"$tmp/verify.out" || { cat "$tmp/verify.out"; fail "verify at the end"; }
ck_umount "$mnt"
echo "posix_inprogress: OK"
