#!/bin/sh
# Many users on a writable mount (-o allow_other), as on a local
# filesystem: an owner makes series whose directories are 0700, 0750, 0755
# and 1777, in-progress directories and files of 0600, 0640 and 0644, and
# commits checkpoints; then the owner, a member of the group, another user
# and nobody each stat, list, read, write, create, chmod, chown, utime,
# mkdir, commit by rename and by `ckptctl commit MOUNTPOINT`, and delete by
# rm -r and `ckptctl rm MOUNTPOINT`.  The same operations run on a local
# directory as the same users; every answer, and at the end every name,
# owner, group and mode of the two trees, must be the same.  The store
# itself is refused to them.
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

G=ckw$$g O=ckw$$o M=ckw$$m X=ckw$$x
ck_group "$G"
ck_user "$O" "$G"
ck_user "$M" "" "$G"
ck_user "$X"
users="$O $M $X nobody"
gid=$(getent group "$G" | cut -d: -f3)

store=$tmp/store
"$CKPTCTL" init "$store" >/dev/null
chmod 1777 "$store/data"
mp=$tmp/mnt
ck_mount "$store" "$mp" -o allow_other,compact=0
base=$tmp/local
mkdir "$base"
chmod 1777 "$base"

op() { printf '%s\n' "$(printf '%s\t' "$@" | sed 's/\t$//')" >>"$ops"; }

# runs OPS as USER on both trees and compares (extra args go to perm_ops.py).
both() {
	_b_user=$1 _b_ops=$2
	shift 2
	ck_as "$_b_user" "$PY" "$ops_py" "$base" "$_b_ops" --ckptctl "$CKPTCTL" "$@" >"$_b_ops.local" ||
		fail "$_b_user: operations on the files failed"
	ck_as "$_b_user" "$PY" "$ops_py" "$mp" "$_b_ops" --ckptctl "$CKPTCTL" --mount "$@" >"$_b_ops.mount" ||
		fail "$_b_user: operations on the mount failed"
	diff "$_b_ops.local" "$_b_ops.mount" || fail "$_b_user: the mount answers differently from the files (< files, > mount)"
}

# The owner's tree: per series, per user k, a committed checkpoint for rm -r
# (checkpoint-k), one for ckptctl rm (checkpoint-(4+k)), and in-progress
# directories to commit by rename (tmp-c-k, as checkpoint-k1) and by ckptctl
# (tmp-x-k, as checkpoint-k2).  Steps only grow: a commit below the newest
# step reloads its series, which is another test's matter.
ops=$tmp/prep
: >"$ops"
for d in 0700 0750 0755 1777; do
	s=s_$d
	op mkdir "$s" "$d"
	k=0
	for u in $users; do
		k=$((k + 1))
		for t in rm ctl c x; do
			op mkdir "$s/tmp-$t-$k" "$d"
			op create "$s/tmp-$t-$k/data.txt" 0644
		done
		op rename "$s/tmp-rm-$k" "$s/checkpoint-$k"
	done
	k=0
	for u in $users; do
		k=$((k + 1))
		op rename "$s/tmp-ctl-$k" "$s/checkpoint-$((4 + k))"
	done
	op mkdir "$s/work" "$d"
	for f in 600 640 644; do
		op create "$s/work/f$f" "0$f"
	done
	op list "$s"
	op stat "$s/checkpoint-1"
done
both "$O" "$ops" --umask 0
grep -v "	OK" "$ops.local" && fail "the owner could not make the tree"
[ -d "$store/data/s_0750/checkpoint-1" ] || fail "renaming tmp-rm-1 did not commit it"

k=0
for u in $users; do
	k=$((k + 1))
	ops=$tmp/ops.$u
	: >"$ops"
	op mkdir "series-$k" 0777
	op list .
	for d in 0700 0750 0755 1777; do
		s=s_$d w=s_$d/work
		op stat "$s"
		op list "$s"
		op list "$w"
		for f in 600 640 644; do
			op stat "$w/f$f"
			op read "$w/f$f"
			op getxattr "$w/f$f" user.ckptfs.state
			op write "$w/f$f"
		done
		op create "$w/new-$k" 0666
		op stat "$w/new-$k"
		op chmod "$w/new-$k" 0640
		op chmod "$w/f644" 0666
		op chown "$w/new-$k" -1 "$gid"
		op chown "$w/new-$k" 0 -1
		op utime "$w/f644"
		op utime "$w/new-$k"
		op mkdir "$s/tmp-new-$k" 0777
		op stat "$s/tmp-new-$k"
		op read "$s/checkpoint-$k/data.txt"
		op rename "$s/tmp-c-$k" "$s/checkpoint-${k}1"
		op rmtree "$s/checkpoint-$k"
		op ckptctl_rm "$s/checkpoint-$((4 + k))"
		op ckptctl_commit "$s/tmp-x-$k" "checkpoint-${k}2"
		op list "$s"
	done
	both "$u" "$ops" --umask 022
	case $u in
	"$O") grep -v "^chown	.*	0	-1	EPERM" "$ops.local" | grep "	EACCES\|	EPERM\|FAILED" &&
		fail "the owner was refused something but giving a file away" ;;
	*) grep -q "	EACCES" "$ops.local" || fail "$u was refused nothing: not a test" ;;
	esac
done
grep -q "checkpoint-21	OK" "$tmp/ops.$M.local" && fail "a group member committed in a directory without group write"

# Everything, as the owners and modes it ended with.
tree() {
	(cd "$1" && find . -mindepth 1 -printf '%p %y %u:%g %m\n' | LC_ALL=C sort)
}
tree "$base" >"$tmp/tree.local"
tree "$mp" >"$tmp/tree.mount"
diff "$tmp/tree.local" "$tmp/tree.mount" || fail "the trees differ (< files, > mount)"
grep -q "s_0755/checkpoint-12 d $O:$G 755" "$tmp/tree.mount" || fail "the owner's ckptctl commit is not there"
grep -q "series-2 d $M:$M 755" "$tmp/tree.mount" || fail "a series made by $M is not $M's"
# Committed through the mount, in the store: files keep their owners.
[ "$(stat -c %U:%G:%a "$store/data/s_0750/checkpoint-11/data.txt")" = "$O:$G:644" ] ||
	fail "committed file: $(stat -c %U:%G:%a "$store/data/s_0750/checkpoint-11/data.txt")"
[ "$(stat -c %U:%G:%a "$store/data/s_0750")" = "$O:$G:750" ] ||
	fail "the series directory in the store: $(stat -c %U:%G:%a "$store/data/s_0750")"

# A torn checkpoint is set aside as it was: its owner's, and so is its REASON.
ck_as "$M" sh -c "mkdir -m 750 '$mp/series-2/tmp-q' && printf 'PK\003\004 torn' >'$mp/series-2/tmp-q/model.pt'" ||
	fail "$M cannot write into its own series"
ck_as "$M" mv "$mp/series-2/tmp-q" "$mp/series-2/checkpoint-5" 2>/dev/null && fail "a torn checkpoint was committed"
q=$(echo "$store/quarantine/series-2/tmp-q."*)
[ "$(stat -c %U:%G:%a "$q" "$q/model.pt" "$q/REASON" | tr '\n' ' ')" = "$M:$M:750 $M:$M:644 $M:$M:640 " ] ||
	fail "quarantined: $(stat -c %U:%G:%a "$q" "$q/model.pt" "$q/REASON" | tr '\n' ' ')"

# The store is its owner's: users get nothing from it directly.
for u in $M $X nobody; do
	ck_as "$u" "$CKPTCTL" ls "$store" >/dev/null 2>&1 && fail "$u lists the store"
	ck_as "$u" "$CKPTCTL" rm "$store" s_0755/checkpoint-6 >/dev/null 2>&1 && fail "$u deleted through the store"
	ck_as "$u" ls "$store/data" >/dev/null 2>&1 && fail "$u lists STORE/data"
done
[ -d "$mp/s_0755/checkpoint-6" ] || fail "checkpoint-6 deleted by a user through the store"

# Committed checkpoints never change, whoever may write their files.
ck_as "$O" sh -c "echo x >>'$mp/s_0755/checkpoint-11/data.txt'" 2>/dev/null &&
	fail "the owner wrote into a committed checkpoint"
ck_as "$O" chmod 600 "$mp/s_0755/checkpoint-11/data.txt" 2>/dev/null &&
	fail "the owner changed the mode of a committed file"

ck_umount "$mp"
echo PASS
