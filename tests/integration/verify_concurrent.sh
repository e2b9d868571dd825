#!/bin/sh
# First-read verification under concurrent readers: the kernel and several
# processes read one unverified tensor at once.  One reader hashes, the
# others wait for its verdict; all must get the right bytes, and when the
# bytes were changed behind the store's back (identity kept), all must get
# EIO and none a wrong byte.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
"$TORCH_PYTHON" - "$tmp" <<'PY'
import os, sys, torch
top = sys.argv[1]
torch.manual_seed(0)
for name in ("good", "bad"):
    os.makedirs(os.path.join(top, name, "checkpoint-1"))
    torch.save({"w": torch.randn(16, 1 << 20)}, os.path.join(top, name, "checkpoint-1", "model.pt"))
PY
"$CKPTCTL" init "$tmp/store"
"$CKPTCTL" import "$tmp/store" "$tmp/good"
"$CKPTCTL" import "$tmp/store" "$tmp/bad"
# Flip one byte in the middle of the tensor data, keeping size and mtime.
bad="$tmp/bad/checkpoint-1/model.pt"
"$TORCH_PYTHON" - "$bad" <<'PY'
import os, sys
path = sys.argv[1]
st = os.stat(path)
with open(path, "r+b") as f:
    f.seek(st.st_size // 2)
    b = f.read(1)
    f.seek(st.st_size // 2)
    f.write(bytes([b[0] ^ 0x40]))
os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
PY

ck_mount "$tmp/store" "$tmp/mnt" -o ro
pids=""
for i in 1 2 3 4; do
	cat "$tmp/mnt/good/checkpoint-1/model.pt" >"$tmp/good.$i" 2>"$tmp/good.$i.err" &
	pids="$pids $!"
	cat "$tmp/mnt/bad/checkpoint-1/model.pt" >"$tmp/bad.$i" 2>"$tmp/bad.$i.err" &
	pids="$pids $!"
done
for p in $pids; do wait "$p" || true; done
for i in 1 2 3 4; do
	cmp -s "$tmp/good.$i" "$tmp/good/checkpoint-1/model.pt" || fail "reader $i got wrong bytes of a good file"
	grep -q "Input/output error" "$tmp/bad.$i.err" || fail "reader $i of the changed file got no EIO"
	# Whatever a failed reader got before the error is the file's unchanged prefix.
	n=$(wc -c <"$tmp/bad.$i")
	[ "$n" -lt "$(($(wc -c <"$bad") / 2))" ] || fail "reader $i read past the damaged byte"
	cmp -s -n "$n" "$tmp/bad.$i" "$bad" || fail "reader $i got bytes that are not the file's"
done
echo "4 concurrent readers: good file served, damaged file refused with EIO"
ck_umount "$tmp/mnt"
