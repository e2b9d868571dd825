#!/bin/sh
# -o preload: the warm-up checks the newest checkpoints' daemon-served files
# (here a torch.save and a safetensors composite of a partial save, one
# tensor longer than a preload piece) and, so that a resume's first load
# reads cached pages, materializes them (a file of their own, which the
# kernel reads by passthrough) or, with -o nomaterialize or without
# passthrough, pushes them into the kernel's page cache of the mount:
#   - after a default mount, both composites go by passthrough when the
#     kernel and the user allow it (else by the daemon, pushed), every page
#     is cached (mincore, no read), and the whole files read with the daemon
#     stopped equal the composites read through a mount that preloads
#     nothing (-o preload=0, whose pages are not cached: the check can fail);
#   - the same with -o nomaterialize: pushed, served by the daemon;
#   - as root, with -o materialize_dir on a tmpfs: the composites' bytes are
#     there, and their space is given back once the files are deleted
#     through the mount (before the unmount), or once the checkpoint is
#     deleted by another process (ckptctl rm), a refresh hides it and a
#     reader that held a file open across the delete (and read it whole,
#     the same bytes, afterwards) closes it;
#   - a byte flipped in an older save's tensor (size and mtime kept) that
#     the composite takes: that composite is not materialized, none of that
#     tensor's pages is pushed, the rest are, and every page reads as the
#     clean composite's or fails with EIO, the flipped one failing: no
#     unchecked byte reaches a reader.  The intact composite beside it is
#     materialized.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

ck_py preload_check.py make "$tmp/run"
"$CKPTCTL" init "$tmp/store" >/dev/null
ck_import "$tmp/store" "$tmp/run" 0
files="model.pt model.safetensors"

# ckptfs in the foreground with the debug log, waiting for the warm-up's
# preload line; the daemon's pid in $fg.  mount_fg STORE MNT ,MORE_OPTS
mount_fg() {
	mkdir -p "$2"
	ck_track "$2"
	# Emptied here, not by the daemon's redirection: that happens in the
	# background child, and the wait below could otherwise read the last
	# mount's log (its preload line) before the child truncates it.
	: >"$tmp/fg.err"
	"$CKPTFS" "$1" "$2" -f -o "log_level=debug$3" 2>>"$tmp/fg.err" &
	fg=$!
	i=0
	# Up to 3 minutes: the warm-up takes 0.1 s alone, longer under ASan
	# with other tests beside it.
	until grep -q "preload: " "$tmp/fg.err" || [ $i -ge 1800 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	grep "preload: \|warm-up: " "$tmp/fg.err" || true
	grep -q "preload: " "$tmp/fg.err" || { tail -20 "$tmp/fg.err"; stuck "$fg" "$2"; fail "no preload line from ckptfs"; }
}
# stuck PID MNT: where a daemon without a preload line is (each thread's state
# and kernel wait channel, its kernel stacks as root, gdb's backtraces
# where gdb is installed) and whether MNT is mounted.
stuck() {
	echo "--- ckptfs $1, no preload line yet:"
	grep " $2 " /proc/mounts || echo "$2 is not mounted"
	if [ ! -d "/proc/$1" ]; then
		_st=0
		wait "$1" || _st=$?
		echo "ckptfs has exited with status $_st"
		return 0
	fi
	for t in /proc/"$1"/task/*; do
		echo "thread ${t##*/}: $(cut -d' ' -f3,14,15 "$t/stat" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null)" \
			"syscall $(cut -d' ' -f1-3 "$t/syscall" 2>/dev/null)"
		head -8 "$t/stack" 2>/dev/null || true
	done
	sleep 1
	for t in /proc/"$1"/task/*; do
		echo "thread ${t##*/} a second later: $(cut -d' ' -f3,14,15 "$t/stat" 2>/dev/null)"
	done
	if command -v gdb >/dev/null 2>&1; then
		gdb -p "$1" -batch -ex "thread apply all bt 12" 2>/dev/null | grep "^#\|^Thread" || true
	fi
}
umount_fg() {
	ck_umount "$1"
	wait "$fg" || fail "ckptfs -f exited non-zero"
}

# shm_holds FILE...: materialize_dir ($tmp/shm) holds those composites.
shm_holds() {
	kib=0
	for f in "$@"; do
		kib=$((kib + $(stat -c %s "$tmp/ref-$f") / 1024))
	done
	used=$(df --output=used -k "$tmp/shm" | tail -1)
	echo "composites $kib KiB, materialize_dir holds $used KiB"
	[ "$used" -ge $((kib * 99 / 100)) ] || fail "the composites were not written into materialize_dir"
}
# shm_freed WHAT: materialize_dir is given back (under 1 MiB) within 10 s
# of WHAT.
shm_freed() {
	i=0
	until [ "$(df --output=used -k "$tmp/shm" | tail -1)" -lt 1024 ] || [ $i -ge 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	used=$(df --output=used -k "$tmp/shm" | tail -1)
	echo "after $1: $used KiB"
	[ "$used" -lt 1024 ] || fail "materialized files still held after $1 ($used KiB)"
}

echo "--- reference: the composites through a mount that preloads nothing"
ck_mount "$tmp/store" "$tmp/ref" -o ro,preload=0
for f in $files; do
	ck_py preload_check.py resident "$tmp/ref/run/checkpoint-2/$f" none
	cp "$tmp/ref/run/checkpoint-2/$f" "$tmp/ref-$f"
done
ck_umount "$tmp/ref"

# Materialized composites go by passthrough where files served as saved do.
pt=daemon
if can_passthrough; then
	pt=passthrough
fi
echo "--- default mount: preloaded (materialized: $pt), read back with the daemon stopped"
mount_fg "$tmp/store" "$tmp/mnt" ""
want=0
[ "$pt" = daemon ] || want=2
grep -q "preload: $want files materialized" "$tmp/fg.err" || fail "expected $want files materialized"
for f in $files; do
	ck_py preload_check.py resident "$tmp/mnt/run/checkpoint-2/$f" all
	ck_py preload_check.py stopped "$tmp/mnt/run/checkpoint-2/$f" "$fg" "$tmp/ref-$f"
	ck_py preload_check.py io "$tmp/mnt/run/checkpoint-2/$f" "$pt"
done
umount_fg "$tmp/mnt"

echo "--- -o nomaterialize: pushed into the mount's page cache"
mount_fg "$tmp/store" "$tmp/mnt" ",nomaterialize"
for f in $files; do
	ck_py preload_check.py resident "$tmp/mnt/run/checkpoint-2/$f" all
	ck_py preload_check.py stopped "$tmp/mnt/run/checkpoint-2/$f" "$fg" "$tmp/ref-$f"
	ck_py preload_check.py io "$tmp/mnt/run/checkpoint-2/$f" daemon
done
umount_fg "$tmp/mnt"

if [ "$pt" = passthrough ]; then
	echo "--- -o materialize_dir: the unnamed files' space, given back once their files are deleted"
	ck_tmpfs "$tmp/shm" 256m
	mount_fg "$tmp/store" "$tmp/mnt" ",materialize_dir=$tmp/shm"
	shm_holds $files
	ck_py preload_check.py io "$tmp/mnt/run/checkpoint-2/model.pt" passthrough
	rm "$tmp/mnt/run/checkpoint-2/model.pt" "$tmp/mnt/run/checkpoint-2/model.safetensors"
	shm_freed "deleting both files"
	umount_fg "$tmp/mnt"
fi

echo "--- a flipped byte in a tensor the composite takes from checkpoint-1"
ck_py preload_check.py flip "$tmp/run"
mount_fg "$tmp/store" "$tmp/mnt" ",ro"
grep -q "content hash mismatch" "$tmp/fg.err" || fail "the preload did not find the flipped tensor"
ck_py preload_check.py damaged "$tmp/mnt/run/checkpoint-2/model.pt" "$tmp/ref-model.pt" "$tmp/run"
ck_py preload_check.py io "$tmp/mnt/run/checkpoint-2/model.pt" daemon
ck_py preload_check.py io "$tmp/mnt/run/checkpoint-2/model.safetensors" "$pt"
umount_fg "$tmp/mnt"

if [ "$pt" = passthrough ]; then
	echo "--- checkpoint-2 deleted by another process: its materialized file given back"
	mount_fg "$tmp/store" "$tmp/mnt" ",ro,refresh=1,materialize_dir=$tmp/shm"
	grep -q "preload: 1 files materialized" "$tmp/fg.err" || fail "expected the intact composite materialized"
	shm_holds model.safetensors
	# A reader holding the file open across the delete reads it whole
	# afterwards, and its space comes back when it closes the file.
	exec 9<"$tmp/mnt/run/checkpoint-2/model.safetensors"
	"$CKPTCTL" rm "$tmp/store" run/checkpoint-2 >/dev/null
	ck_until 10 test ! -e "$tmp/mnt/run/checkpoint-2" || fail "checkpoint-2 still shows after ckptctl rm"
	sleep 1	# a refresh more: the hidden checkpoint's files let go
	shm_holds model.safetensors
	cat <&9 >"$tmp/held.safetensors"
	cmp "$tmp/held.safetensors" "$tmp/ref-model.safetensors" || fail "the file held open read otherwise after the delete"
	exec 9<&-
	shm_freed "ckptctl rm, a refresh and the last close"
	umount_fg "$tmp/mnt"
fi
echo "ok"
