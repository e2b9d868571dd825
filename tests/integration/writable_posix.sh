#!/bin/sh
# Inside an in-progress directory the mount is a plain filesystem backed by
# STORE/staging: random pwrites (up to 3 MiB) read back identical while in
# progress, truncate / ftruncate / utime / chmod work, and so do mkdir,
# rmdir, unlink and rename (also over an existing name); renaming to a name
# without a step does not commit.  A committed name cannot be taken again.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt"
d="$tmp/mnt/run/tmp-checkpoint-1"
mkdir "$tmp/mnt/run" "$d"
ck_py writable_check.py pwrite "$d"
[ -f "$tmp/store/staging/run/tmp-checkpoint-1/random.bin" ] || fail "bytes are not in STORE/staging"

mkdir "$d/sub"
echo one >"$d/sub/a.txt"
echo two >"$d/b.txt"
mv "$d/b.txt" "$d/sub/a.txt" || fail "rename over an existing file"
[ "$(cat "$d/sub/a.txt")" = two ] || fail "rename over: $(cat "$d/sub/a.txt")"
[ ! -e "$d/b.txt" ] || fail "b.txt still there after the rename"
mv "$d/sub" "$d/sub2" && [ "$(cat "$d/sub2/a.txt")" = two ] || fail "directory rename"
rm "$d/sub2/a.txt" && rmdir "$d/sub2" || fail "unlink/rmdir"
[ "$(ls "$d")" = "random.bin" ] || fail "listing: $(ls "$d")"

# No step in the new name: a plain rename, nothing committed.
mv "$d" "$tmp/mnt/run/scratch"
[ "$(ls "$tmp/mnt/run")" = "scratch" ] || fail "after a plain rename: $(ls "$tmp/mnt/run")"
[ ! -d "$tmp/store/data/run" ] || fail "a rename without a step committed"
rm -r "$tmp/mnt/run/scratch" || fail "rm -r of an in-progress directory"
[ -z "$(ls "$tmp/mnt/run")" ] || fail "not removed: $(ls "$tmp/mnt/run")"

# A name that is committed cannot be created or renamed onto.
mkdir "$tmp/mnt/run/tmp-a"
"$TORCH_PYTHON" -c 'import sys, torch; torch.save({"w": torch.ones(3)}, sys.argv[1])' "$tmp/mnt/run/tmp-a/w.pt"
mv "$tmp/mnt/run/tmp-a" "$tmp/mnt/run/step_5" || fail "commit as step_5"
mkdir "$tmp/mnt/run/step_5" 2>/dev/null && fail "mkdir over a committed checkpoint succeeded"
mkdir "$tmp/mnt/run/tmp-b"
mv -T "$tmp/mnt/run/tmp-b" "$tmp/mnt/run/step_5" 2>/dev/null && fail "rename onto a committed checkpoint succeeded"
[ "$(ls "$tmp/mnt/run" | tr '\n' ' ')" = "step_5 tmp-b " ] || fail "listing: $(ls "$tmp/mnt/run")"
df "$tmp/mnt" >/dev/null || fail "statfs"
# A series directory takes only completion markers (writable_rules.sh) as files.
touch "$tmp/mnt/run/notes.txt" 2>/dev/null && fail "a file directly in a series directory was created"
ck_umount "$tmp/mnt"
