#!/bin/sh
# Files written through the mount are parsed at their last close, and the
# commit reuses that parse only while the file is unchanged:
#   - user.ckptfs.state tells what the parse found (parsed with its tensor
#     count, or why it does not parse), and is listed by listxattr;
#   - a file rewritten in place after its parse (same size, new bytes) is
#     parsed again: the committed checkpoint serves the new bytes, and
#     `ckptctl verify` agrees with every hash in the index (stale hashes
#     would fail both: EIO on first read, damage in verify);
#   - a directory parsed under a temporary name and committed by rename
#     (the parse follows the inode) loads bit-exactly and verifies.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
command -v getfattr >/dev/null 2>&1 || skip "no getfattr (package attr)"

"$CKPTCTL" init "$tmp/store"
ck_mount "$tmp/store" "$tmp/mnt"
mkdir -p "$tmp/mnt/run/tmp-checkpoint-10"
dir=$tmp/mnt/run/tmp-checkpoint-10

# state FILE PATTERN: waits (up to 20 s) until user.ckptfs.state matches.
state() {
	i=0
	while :; do
		s=$(getfattr --only-values -n user.ckptfs.state "$1" 2>/dev/null || true)
		case $s in $2) echo "  $1: $s"; return 0 ;; esac
		[ $i -lt 200 ] || fail "$1: state '$s', expected '$2'"
		sleep 0.1
		i=$((i + 1))
	done
}

"$TORCH_PYTHON" - "$dir" "$tmp/plain" <<'PY' || fail "saving through the mount"
import os, sys, torch
d, plain = sys.argv[1:]
os.makedirs(plain)
torch.manual_seed(0)
sd = {"model.layers.%d.weight" % i: torch.randn(64, 64) for i in range(4)}
for where in (d, plain):
    torch.save(sd, where + "/model.pt")
    torch.save({"step": 10}, where + "/extra.pt")
with open(d + "/model.pt", "rb") as f:
    blob = f.read()
with open(d + "/torn.pt", "wb") as f:
    f.write(blob[: len(blob) // 2])
PY
state "$dir/model.pt" "in progress: parsed: torch, 4 tensors"
state "$dir/torn.pt" "in progress: does not parse: *"
getfattr -d "$dir/model.pt" | grep -q '^user.ckptfs.state=' || fail "listxattr does not list user.ckptfs.state"
rm "$dir/torn.pt"

# Rewrite one tensor's bytes in place, after the parse: same size.
"$TORCH_PYTHON" - "$dir/model.pt" "$tmp/plain/model.pt" <<'PY' || fail "rewriting model.pt"
import sys, torch
for path in sys.argv[1:]:
    sd = torch.load(path)
    sd["model.layers.2.weight"].mul_(-1)
    torch.save(sd, path)  # truncates and rewrites: same size, new bytes
PY
state "$dir/model.pt" "in progress: parsed: torch, 4 tensors"

mv "$dir" "$tmp/mnt/run/checkpoint-10" || fail "commit by rename failed"
"$TORCH_PYTHON" - "$tmp/mnt/run/checkpoint-10" "$tmp/plain" <<'PY' || fail "checkpoint-10 differs from what was saved"
import sys, torch
got, want = sys.argv[1:]
for name in ("model.pt", "extra.pt"):
    a, b = torch.load(got + "/" + name), torch.load(want + "/" + name)
    assert a.keys() == b.keys(), name
    for k in a:
        assert torch.equal(a[k], b[k]) if torch.is_tensor(a[k]) else a[k] == b[k], (name, k)
with open(got + "/model.pt", "rb") as f, open(want + "/model.pt", "rb") as g:
    assert f.read() == g.read(), "model.pt bytes"
PY
"$CKPTCTL" verify "$tmp/store" || fail "ckptctl verify found damage after a commit that reused parses"

ck_umount "$tmp/mnt"
echo "ok"
