#!/bin/sh
# The ckptfs daemon on real mounts.  The store is built by `ckptctl init`
# and `ckptctl import` from a run directory holding real files (fixtures
# written by torch 2.x and by the Rust safetensors writer) and a model
# saved in full at step 10 and in part at step 20, so checkpoint-20 shows
# a composite.  Checks: help/version, errors before mounting, that ckptfs
# returns only once the mount answers, whole-tree reads and copies, the
# composite's bytes, xattrs, EROFS for every kind of write (with and
# without the kernel's ro), readahead tuning, -d, and a clean exit 0 on
# unmount and on SIGTERM.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
command -v "$TORCH_PYTHON" >/dev/null 2>&1 || skip "no Python at $TORCH_PYTHON"
ck_tmpdir >/dev/null	# in this shell, so that the exit trap removes it
tmp=$(ck_tmpdir)
fix=$CKPT_FIXTURES
[ -f "$fix/safetensors/burn_mnist.safetensors" ] || skip "no fixtures in $fix"
store=$tmp/store
mnt=$tmp/mnt
run=$tmp/run1
mkdir -p "$mnt" "$run/checkpoint-10" "$run/checkpoint-20"
ck_track "$mnt"

# expect_exit WANT CMD...: CMD exits WANT and leaves nothing mounted.
expect_exit() {
	_ee_want=$1
	shift
	_ee_rc=0
	"$@" >"$tmp/out" 2>"$tmp/err" || _ee_rc=$?
	[ "$_ee_rc" = "$_ee_want" ] || fail "$* exited $_ee_rc, expected $_ee_want: $(cat "$tmp/err")"
	! is_mounted "$mnt" || fail "$* left $mnt mounted"
}

# expect_erofs CMD...: CMD fails with "Read-only file system".
expect_erofs() {
	if "$@" 2>"$tmp/err"; then
		fail "$* succeeded on a read-only mount"
	fi
	grep -q "Read-only file system" "$tmp/err" || fail "$*: expected EROFS, got: $(cat "$tmp/err")"
}

# wait_mounted PID: polls until a foreground ckptfs has mounted.
wait_mounted() {
	_wm_i=0
	until is_mounted "$mnt"; do
		kill -0 "$1" 2>/dev/null || fail "ckptfs -f exited before mounting"
		[ $_wm_i -lt 300 ] || fail "ckptfs -f did not mount"
		sleep 0.1
		_wm_i=$((_wm_i + 1))
	done
}

# --- the run directory and the store ----------------------------------------
cat >"$tmp/st.py" <<'EOF'
"""Writes and checks safetensors files with the standard library only."""
import json, random, struct, sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = (t["dtype"], t["shape"], body[a:b])
    return out


def write(path, tensors, seed):
    rnd = random.Random(seed)
    header, blobs, off = {}, [], 0
    for name, shape in tensors:
        count = 1
        for d in shape:
            count *= d
        raw = rnd.randbytes(4 * count)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if sys.argv[1] == "write-full":
    write(sys.argv[2], [("embed.weight", [1024, 1024]), ("layers.0.weight", [256, 256]),
                        ("layers.1.weight", [256, 256]), ("norm.weight", [256])], 10)
elif sys.argv[1] == "write-partial":
    write(sys.argv[2], [("layers.1.weight", [256, 256]), ("norm.weight", [256])], 20)
elif sys.argv[1] == "check-composite":
    # argv: composite, then sources newest first: every tensor of the
    # union, with the bytes of the newest source that has it.
    got = read(sys.argv[2])
    sources = [read(p) for p in sys.argv[3:]]
    want = {}
    for src in reversed(sources):
        want.update(src)
    if sorted(got) != sorted(want):
        sys.exit("tensors %s, expected %s" % (sorted(got), sorted(want)))
    for name in want:
        if got[name] != want[name]:
            sys.exit("tensor %s differs from its newest source" % name)
elif sys.argv[1] == "check-sources":
    # argv: JSON text file, then physical paths it must name
    with open(sys.argv[2]) as f:
        text = f.read()
    doc = json.loads(text)
    for path in sys.argv[3:]:
        if path not in text:
            sys.exit("sources JSON does not name %s: %s" % (path, text))
    print(type(doc).__name__)
EOF
py() { PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$tmp/st.py" "$@"; }

py write-full "$run/checkpoint-10/model.safetensors"
py write-partial "$run/checkpoint-20/model.safetensors"
cp "$fix/torch2x/burn_reader_checkpoint.pt" "$run/checkpoint-10/optimizer.pt"
cp "$fix/safetensors/burn_mnist.safetensors" "$run/checkpoint-10/extra.safetensors"
echo '{"hidden_size": 256}' >"$run/checkpoint-10/config.json"
echo '{"global_step": 20}' >"$run/checkpoint-20/trainer_state.json"
"$CKPTCTL" init "$store" >/dev/null || fail "ckptctl init"
ck_import "$store" "$run" 0

# --- command line ------------------------------------------------------------
for h in -h --help; do
	expect_exit 0 "$CKPTFS" "$h"
	grep -q "usage: .*STORE MOUNTPOINT" "$tmp/out" || fail "$h prints no usage"
	grep -q "verify=none|first" "$tmp/out" || fail "$h does not list the -o options"
done
for v in -V --version; do
	expect_exit 0 "$CKPTFS" "$v"
	grep -q "^ckptfs [0-9]" "$tmp/out" || fail "$v prints no version"
	grep -q "FUSE library version" "$tmp/out" || fail "$v does not name the FUSE version"
done

# Errors are reported before anything is mounted (64: usage, 1: failure;
# include/ckptfs/exitcodes.h).
expect_exit 64 "$CKPTFS" "$store" "$mnt" -o frobnicate
grep -q "unknown option -o frobnicate" "$tmp/err" || fail "unknown option not named: $(cat "$tmp/err")"
expect_exit 64 "$CKPTFS" "$store" "$mnt" -o verify=sometimes
expect_exit 64 "$CKPTFS" "$store" "$mnt" -o max_threads=0
expect_exit 64 "$CKPTFS" "$store" "$mnt" -o attr_timeout=-1
expect_exit 64 "$CKPTFS" "$store" "$mnt" -o pidfile
expect_exit 64 "$CKPTFS" "$store" "$mnt" -o materialize_dir=relative/dir
expect_exit 64 "$CKPTFS" "$store" "$mnt" -x
expect_exit 64 "$CKPTFS" "$store"
expect_exit 64 "$CKPTFS" "$store" "$mnt" "$tmp"
expect_exit 1 "$CKPTFS" "$tmp/no-such-store" "$mnt"
grep -q "no-such-store" "$tmp/err" || fail "bad store path not named: $(cat "$tmp/err")"
expect_exit 1 "$CKPTFS" "$run" "$mnt"	# a directory, not a store
expect_exit 1 "$CKPTFS" "$store" "$tmp/no-such-dir"
expect_exit 1 "$CKPTFS" "$store" "$run/checkpoint-10/config.json"
expect_exit 1 "$CKPTFS" -f "$tmp/no-such-store" "$mnt"

# --- a read-only mount --------------------------------------------------------
# Generic mount options, as fstab and mount.fuse3 pass them, are accepted.
ck_mount "$store" "$mnt" -o ro,pidfile="$tmp/pid" -o nosuid,nodev,suid,dev,noauto,_netdev,x-systemd.automount
pid=$(cat "$tmp/pid") || fail "no pidfile"
kill -0 "$pid" || fail "pidfile names no live process"
grep -q " $mnt fuse.ckptfs ro," /proc/mounts || fail "-o ro: kernel mount not ro: $(grep " $mnt " /proc/mounts)"
grep -q "^$store $mnt " /proc/mounts || fail "fsname is not the store path"

# Live as soon as ckptfs returned: no waiting here.
ls "$mnt/run1" >"$tmp/ls" || fail "ls of the fresh mount failed"
(cd "$mnt" && find . | LC_ALL=C sort) >"$tmp/tree"
cat >"$tmp/tree.want" <<'EOF'
.
./run1
./run1/checkpoint-10
./run1/checkpoint-10/config.json
./run1/checkpoint-10/extra.safetensors
./run1/checkpoint-10/model.safetensors
./run1/checkpoint-10/optimizer.pt
./run1/checkpoint-20
./run1/checkpoint-20/config.json
./run1/checkpoint-20/extra.safetensors
./run1/checkpoint-20/model.safetensors
./run1/checkpoint-20/optimizer.pt
./run1/checkpoint-20/trainer_state.json
EOF
diff "$tmp/tree.want" "$tmp/tree" || fail "namespace differs from the imported run"
ls -lR "$mnt" >/dev/null || fail "ls -lR"

# Every file: stat size = bytes read.
(cd "$mnt" && find . -type f) | while read -r f; do
	size=$(stat -c %s "$mnt/$f") || fail "stat $f"
	read=$(cat "$mnt/$f" | wc -c) || fail "cat $f"
	[ "$size" = "$read" ] || fail "$f: stat says $size bytes, reading gives $read"
	# 128 KiB, not a whole request: torch.load reads one buffer at each
	# storage's header (ckptfs(1), PERFORMANCE).
	[ "$(stat -c %o "$mnt/$f")" = 131072 ] || fail "$f: st_blksize $(stat -c %o "$mnt/$f")"
done
# Owners and modes are those of what each node is made of (perms_*.sh test
# them for other users).
for p in run1:. run1/checkpoint-10:checkpoint-10 run1/checkpoint-10/config.json:checkpoint-10/config.json; do
	[ "$(stat -c %U:%G:%a "$mnt/${p%%:*}")" = "$(stat -c %U:%G:%a "$run/${p#*:}")" ] ||
		fail "${p%%:*}: $(stat -c %U:%G:%a "$mnt/${p%%:*}"), made of $(stat -c %U:%G:%a "$run/${p#*:}")"
done

# Files with a single source are served as they are; checkpoint-20
# inherits what it did not save from checkpoint-10.
for f in config.json extra.safetensors model.safetensors optimizer.pt; do
	cmp "$run/checkpoint-10/$f" "$mnt/run1/checkpoint-10/$f" || fail "checkpoint-10/$f"
done
for f in config.json extra.safetensors optimizer.pt; do
	cmp "$run/checkpoint-10/$f" "$mnt/run1/checkpoint-20/$f" || fail "checkpoint-20/$f (inherited)"
done
cmp "$run/checkpoint-20/trainer_state.json" "$mnt/run1/checkpoint-20/trainer_state.json" ||
	fail "checkpoint-20/trainer_state.json"
comp=$mnt/run1/checkpoint-20/model.safetensors
py check-composite "$comp" "$run/checkpoint-20/model.safetensors" \
	"$run/checkpoint-10/model.safetensors" || fail "composite model.safetensors"

# Concurrent readers of the composite see the same bytes.
sum=$(cksum <"$comp")
for i in 1 2 3 4; do
	(cksum <"$comp" >"$tmp/sum.$i") &
done
wait
for i in 1 2 3 4; do
	[ "$(cat "$tmp/sum.$i")" = "$sum" ] || fail "concurrent read $i differs"
done

# cp -r of the whole mount equals what reading through the mount gives.
cp -r "$mnt" "$tmp/copy" || fail "cp -r of the mount"
diff -r "$mnt" "$tmp/copy" || fail "copy differs from the mount"

# Provenance as JSON in an xattr, naming the physical files.
if command -v getfattr >/dev/null 2>&1; then
	getfattr --only-values -n user.ckptfs.sources "$comp" >"$tmp/sources.json" ||
		fail "getfattr user.ckptfs.sources"
	getfattr -n user.ckptfs.sources "$comp" | grep -q "^user.ckptfs.sources=" ||
		fail "getfattr -n user.ckptfs.sources prints no value"
else
	PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" -c '
import os, sys
sys.stdout.write(os.getxattr(sys.argv[1], "user.ckptfs.sources").decode())' "$comp" >"$tmp/sources.json" ||
		fail "getxattr user.ckptfs.sources"
fi
py check-sources "$tmp/sources.json" "$run/checkpoint-20/model.safetensors" \
	"$run/checkpoint-10/model.safetensors" >/dev/null || fail "user.ckptfs.sources"
PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" -c '
import errno, os, sys
names = os.listxattr(sys.argv[1])
assert "user.ckptfs.sources" in names, names
try:
    os.getxattr(sys.argv[1], "user.no.such.attribute")
    sys.exit("missing attribute read")
except OSError as e:
    assert e.errno == errno.ENODATA, e
' "$comp" || fail "listxattr / missing xattr"

stat -f "$mnt" >/dev/null || fail "statfs"

# Readahead raised for this mount (root only: the bdi knob needs it).
if [ "$(id -u)" = 0 ]; then
	bdi=/sys/class/bdi/$(stat -c '%Hd:%Ld' "$mnt")/read_ahead_kb
	[ "$(cat "$bdi")" = 4096 ] || fail "$bdi is $(cat "$bdi"), expected 4096"
	[ "$(cat /proc/sys/fs/pipe-max-size)" -ge 2097152 ] || fail "pipe-max-size not raised"
fi

# Kernel ro: writes of every kind fail with EROFS.
f=$mnt/run1/checkpoint-20/config.json
d=$mnt/run1/checkpoint-20
expect_erofs touch "$f"
expect_erofs touch "$d/new"
expect_erofs mkdir "$d/newdir"
expect_erofs rm -f "$f"
expect_erofs sh -c "echo x >'$f'"
expect_erofs sh -c "echo x >>'$f'"
expect_erofs mv "$f" "$d/renamed"
expect_erofs ln -s config.json "$d/link"
cmp "$run/checkpoint-10/config.json" "$f" || fail "a refused write changed $f"

ck_umount "$mnt"
i=0
while kill -0 "$pid" 2>/dev/null; do
	[ $i -lt 100 ] || fail "daemon $pid still running after unmount"
	sleep 0.1
	i=$((i + 1))
done
[ ! -e "$tmp/pid" ] || fail "pidfile left behind"

# --- kernel read-write: the daemon itself refuses changes; other settings -----
ck_mount "$store" "$mnt" -o readahead_kb=2048,verify=none,attr_timeout=1,entry_timeout=1,always_synthesize
grep -q " $mnt fuse.ckptfs rw," /proc/mounts || fail "mount without -o ro is not rw in the kernel"
expect_erofs touch "$f"
expect_erofs touch "$d/new"
expect_erofs mkdir "$d/newdir"
# rm of a committed file hides it in this mount (rm -r of a checkpoint,
# delete_ckpt.sh); rmdir of a checkpoint that still shows files is refused.
rmdir "$d" 2>"$tmp/err" && fail "rmdir of a checkpoint with files succeeded"
grep -q "Directory not empty" "$tmp/err" || fail "rmdir $d: expected ENOTEMPTY, got: $(cat "$tmp/err")"
expect_erofs sh -c "echo x >'$f'"
expect_erofs sh -c "echo x >>'$f'"
expect_erofs mv "$f" "$d/renamed"
expect_erofs ln -s config.json "$d/link"
expect_erofs ln "$f" "$d/hardlink"
expect_erofs chmod 600 "$f"
PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" -c '
import errno, os, sys
def erofs(what, fn):
    try:
        fn()
    except OSError as e:
        if e.errno != errno.EROFS:
            sys.exit("%s: %s, expected EROFS" % (what, e))
    else:
        sys.exit("%s succeeded" % what)
f = sys.argv[1]
erofs("open r+", lambda: open(f, "r+b"))
erofs("setxattr", lambda: os.setxattr(f, "user.x", b"1"))
erofs("removexattr", lambda: os.removexattr(f, "user.ckptfs.sources"))
erofs("truncate", lambda: os.truncate(f, 0))
' "$f" || fail "write-type calls on a rw mount"
cmp "$run/checkpoint-10/config.json" "$f" || fail "a refused write changed $f"
if [ "$(id -u)" = 0 ]; then
	bdi=/sys/class/bdi/$(stat -c '%Hd:%Ld' "$mnt")/read_ahead_kb
	[ "$(cat "$bdi")" = 2048 ] || fail "-o readahead_kb=2048: $bdi is $(cat "$bdi")"
fi
py check-composite "$comp" "$run/checkpoint-20/model.safetensors" \
	"$run/checkpoint-10/model.safetensors" || fail "composite with verify=none"
# always_synthesize: a single-source file is regenerated, with the same tensors.
py check-composite "$mnt/run1/checkpoint-10/model.safetensors" \
	"$run/checkpoint-10/model.safetensors" || fail "synthesized checkpoint-10/model.safetensors"
ck_umount "$mnt"

# --- a daemon stops cleanly on SIGINT (even though this shell may ignore it) ------
ck_mount "$store" "$mnt" -o pidfile="$tmp/pid"
pid=$(cat "$tmp/pid") || fail "no pidfile"
kill -INT "$pid"
i=0
while kill -0 "$pid" 2>/dev/null || is_mounted "$mnt"; do
	[ $i -lt 100 ] || fail "SIGINT did not stop daemon $pid and unmount"
	sleep 0.1
	i=$((i + 1))
done
[ ! -e "$tmp/pid" ] || fail "pidfile left behind after SIGINT"

# --- foreground: exit 0 on unmount and on SIGTERM ------------------------------
"$CKPTFS" "$store" "$mnt" -f -s 2>"$tmp/fg.err" &
fg=$!
wait_mounted "$fg"
cmp "$run/checkpoint-10/optimizer.pt" "$mnt/run1/checkpoint-20/optimizer.pt" || fail "-f -s read"
fusermount3 -u "$mnt" || fail "fusermount3 -u"
rc=0
wait "$fg" || rc=$?
[ $rc = 0 ] || fail "ckptfs -f exited $rc after unmount: $(cat "$tmp/fg.err")"

"$CKPTFS" "$store" "$mnt" -f -o max_threads=2,max_idle_threads=1,noclone_fd 2>"$tmp/fg.err" &
fg=$!
wait_mounted "$fg"
ls "$mnt/run1/checkpoint-20" >/dev/null || fail "ls on the -f mount"
kill -TERM "$fg"
rc=0
wait "$fg" || rc=$?
[ $rc = 0 ] || fail "ckptfs -f exited $rc on SIGTERM: $(cat "$tmp/fg.err")"
! is_mounted "$mnt" || fail "SIGTERM left $mnt mounted"

# -d: foreground, with libfuse's request trace and our debug log.
"$CKPTFS" "$store" "$mnt" -d 2>"$tmp/debug.err" &
fg=$!
wait_mounted "$fg"
cat "$comp" >/dev/null || fail "read with -d"
fusermount3 -u "$mnt" || fail "fusermount3 -u (-d)"
rc=0
wait "$fg" || rc=$?
[ $rc = 0 ] || fail "ckptfs -d exited $rc after unmount"
grep -q "opcode: INIT" "$tmp/debug.err" || fail "-d shows no libfuse trace"
grep -q "ckptfs: debug: " "$tmp/debug.err" || fail "-d shows no debug log"

# --- warm-up: the newest checkpoint's composites are built once mounted --------
# Without a single request: the debug log counts the files built, which
# must be every file of each series' newest checkpoint; -o nowarmup builds none.
newest_files=$(find "$run/checkpoint-20" "$run/checkpoint-10" -type f -printf '%P\n' | sort -u | wc -l)
for opt in warmup nowarmup; do
	"$CKPTFS" "$store" "$mnt" -f -o "log_level=debug,$opt" 2>"$tmp/warm.err" &
	fg=$!
	wait_mounted "$fg"
	i=0 limit=50
	[ "$opt" = warmup ] || limit=10
	while ! grep -q "warm-up: " "$tmp/warm.err" && [ $i -lt $limit ]; do sleep 0.1; i=$((i + 1)); done
	fusermount3 -u "$mnt" || fail "fusermount3 -u ($opt)"
	wait "$fg" || fail "ckptfs -o $opt exited non-zero"
	built=$(sed -n 's/.*warm-up: \([0-9]*\) files.*/\1/p' "$tmp/warm.err")
	if [ "$opt" = warmup ]; then
		[ "$built" = "$newest_files" ] || fail "warm-up built '$built' files, the newest checkpoint has $newest_files"
	else
		[ -z "$built" ] || fail "-o nowarmup built $built files"
	fi
done
echo "PASS"
