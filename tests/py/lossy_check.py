"""The lossy tier through a real mount and real torch (tests/integration/lossy*.sh).

    lossy_check.py train OUT STEPS EVERY
        trains tinyllama.py's model, widened so that its matrices are coded
        lossily (at least 4096 elements), with fp32 AdamW, and writes a full
        checkpoint every EVERY steps: OUT/checkpoint-N/ as tinyllama saves it,
        plus a DCP save of the model by torch's own writer (a data file of
        one torch.save blob per tensor, and its .metadata).
    lossy_check.py bound ORIG SERVED BOUND [either]
        every file of the checkpoint directory ORIG read through SERVED (a
        mount's checkpoint): float tensors of at least 4096 elements within
        BOUND x their largest |x| (not exact, unless --exact), everything else
        -- pickles, ints, step counters, small tensors, json -- bit for bit,
        same shapes and dtypes; torch.load, the safetensors reader, each DCP
        blob (zip CRCs checked too, as Python's zipfile does).  Prints the
        worst relative error per file.  Some tensor must be lossy, unless
        "either" (exact or lossy: what a crash may leave).
    lossy_check.py exact ORIG SERVED
        every file of SERVED is byte for byte the one in ORIG.
    lossy_check.py series ORIG SERVED BOUND [CKPT:MODE ...]
        bound, exact or either (bound, either) for each CKPT of the
        directories ORIG and SERVED, in one process.
    lossy_check.py resume CKPT STEPS
        resumes the trainer from CKPT (a mount's checkpoint directory), trains
        STEPS more steps and prints the mean loss of the last ten.
    lossy_check.py hold SERVED ORIG READY GO
        reads the first half of SERVED, creates READY, waits for GO to
        appear, reads the rest: the whole must be byte for byte ORIG (a file
        being read while it is coded lossily is not served half and half).
"""

import io
import os
import pickle
import sys
import zipfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dcp_series  # noqa: E402
import safetensors_ref  # noqa: E402
import tinyllama  # noqa: E402

MIN_ELEMS = 4096
WIDE = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128}


def trainer():
    tinyllama.CONFIG.update(WIDE)
    return tinyllama.Trainer(seed=3)


def write_dcp(d, sd):
    """A torch DCP save of the model into the checkpoint directory, by
    torch's own writer (dcp_series.py): one torch.save blob per tensor in a
    data file, and its .metadata."""
    dcp_series.save_real(d, {"model." + k: v.clone() for k, v in sd.items()}, 1)


def train(out, steps, every):
    t = trainer()
    for step in range(every, steps + 1, every):
        t.train(every)
        d = os.path.join(out, "checkpoint-%d" % step)
        t.save(d)
        write_dcp(d, t.model.state_dict())
        print("checkpoint-%d loss %.4f" % (step, t.losses[-1]))


class Check:
    def __init__(self, bound, exact):
        self.bound = bound
        self.exact = exact
        self.worst = 0.0
        self.lossy = 0      # tensors checked against the bound
        self.changed = 0    # of those, how many differ from the original

    def tensor(self, path, a, b):
        assert isinstance(b, torch.Tensor), "%s: not a tensor" % path
        assert (a.dtype, tuple(a.shape), a.stride(), a.storage_offset()) == \
            (b.dtype, tuple(b.shape), b.stride(), b.storage_offset()), "%s: layout differs" % path
        if self.exact or not a.dtype.is_floating_point or a.numel() < MIN_ELEMS or \
                a.dtype not in (torch.float32, torch.bfloat16, torch.float16):
            assert safetensors_ref.tensor_bytes(a) == safetensors_ref.tensor_bytes(b), "%s: not exact" % path
            return
        x, y = a.double(), b.double()
        finite = torch.isfinite(x)
        assert torch.equal(torch.isfinite(y), finite), "%s: non-finite elements changed" % path
        m = x[finite].abs().max().item() if finite.any() else 0.0
        err = (x[finite] - y[finite]).abs().max().item() if finite.any() else 0.0
        assert err <= self.bound * m, "%s: error %g over %g x %g" % (path, err, self.bound, m)
        if a.dtype.is_floating_point and (x[finite] >= 0).all():
            assert (y[finite] >= 0).all(), "%s: a non-negative tensor decoded negative" % path
        self.lossy += 1
        self.changed += err > 0
        if m:
            self.worst = max(self.worst, err / m)

    def walk(self, path, a, b):
        if isinstance(a, torch.Tensor):
            self.tensor(path, a, b)
        elif isinstance(a, dict):
            assert type(a) is type(b) and list(a) == list(b), "%s: keys differ" % path
            for k in a:
                self.walk("%s.%s" % (path, k), a[k], b[k])
            assert getattr(a, "__dict__", {}).keys() == getattr(b, "__dict__", {}).keys(), path
        elif isinstance(a, (list, tuple)):
            assert type(a) is type(b) and len(a) == len(b), "%s: length differs" % path
            for i, (u, v) in enumerate(zip(a, b)):
                self.walk("%s[%d]" % (path, i), u, v)
        else:
            assert type(a) is type(b) and (a == b or a != a), "%s: %r != %r" % (path, a, b)


def blobs(data):
    """A DCP data file's torch.save zips, found from the end: each ends with
    a zip64 end record whose central directory size and offset say where
    the zip begins (the end of the one before it)."""
    out, end = [], len(data)
    while end > 0:
        eocd64 = data.rfind(b"PK\x06\x06", 0, end)
        assert eocd64 >= 0, "no zip64 end record before %d" % end
        size = int.from_bytes(data[eocd64 + 40:eocd64 + 48], "little")
        offset = int.from_bytes(data[eocd64 + 48:eocd64 + 56], "little")
        start = eocd64 - size - offset
        assert 0 <= start < end, "a zip before %d does not add up" % end
        out.append(data[start:end])
        end = start
    return out[::-1]


def bound(orig, served, bound_, either=False):
    chk = Check(bound_, False)
    for name in sorted(os.listdir(orig)):
        a, b = os.path.join(orig, name), os.path.join(served, name)
        before = chk.lossy
        if name.endswith(".pt"):
            chk.walk(name, torch.load(a), torch.load(b))
        elif name.endswith(".safetensors"):
            ma, ta = safetensors_ref.load(a)
            mb, tb = safetensors_ref.load(b)
            assert ma == mb and list(ta) == list(tb), "%s: header differs" % name
            chk.walk(name, ta, tb)
        elif name.endswith(".distcp"):
            with open(a, "rb") as f:
                da = f.read()
            with open(b, "rb") as f:
                db = f.read()
            assert len(da) == len(db), "%s: size differs" % name
            ba, bb = blobs(da), blobs(db)
            assert [len(x) for x in ba] == [len(x) for x in bb], "%s: blobs differ" % name
            for i, (x, y) in enumerate(zip(ba, bb)):
                bad = zipfile.ZipFile(io.BytesIO(y)).testzip()
                assert bad is None, "%s blob %d: CRC of %s does not match" % (name, i, bad)
                chk.walk("%s[%d]" % (name, i), torch.load(io.BytesIO(x)), torch.load(io.BytesIO(y)))
        else:
            with open(a, "rb") as f, open(b, "rb") as g:
                assert f.read() == g.read(), "%s: not exact" % name
        if name.endswith(".pt"):
            bad = zipfile.ZipFile(b).testzip()
            assert bad is None, "%s: CRC of %s does not match" % (name, bad)
        print("  %-20s %3d tensors within the bound" % (name, chk.lossy - before))
    print("%s: %d tensors within the bound (%d of them not exact), worst %.5f x max|x| (bound %g)" %
          (served, chk.lossy, chk.changed, chk.worst, bound_))
    if chk.changed == 0 and not either:
        sys.exit("%s: nothing was coded lossily" % served)


def exact(orig, served):
    for name in sorted(os.listdir(orig)):
        with open(os.path.join(orig, name), "rb") as f, open(os.path.join(served, name), "rb") as g:
            assert f.read() == g.read(), "%s/%s: not byte for byte the original" % (served, name)
    print("%s: exact" % served)


def resume(ckpt, steps):
    t = trainer()
    t.load(ckpt)
    losses = t.train(steps)
    print("%.6f" % (sum(losses[-10:]) / 10))


def hold(served, orig, ready, go):
    import time
    with open(orig, "rb") as f:
        want = f.read()
    with open(served, "rb") as f:
        head = f.read(len(want) // 2)
        open(ready, "w").close()
        for _ in range(1200):
            if os.path.exists(go):
                break
            time.sleep(0.1)
        else:
            sys.exit("hold: %s never appeared" % go)
        got = head + f.read()
    assert got == want, "%s changed while it was read" % served
    print("%s: read whole and exact across the compaction" % served)


def main():
    cmd = sys.argv[1]
    if cmd == "train":
        train(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif cmd == "bound":
        bound(sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:6] == ["either"])
    elif cmd == "exact":
        exact(sys.argv[2], sys.argv[3])
    elif cmd == "resume":
        resume(sys.argv[2], int(sys.argv[3]))
    elif cmd == "series":
        for arg in sys.argv[5:]:
            ckpt, mode = arg.split(":")
            a, b = os.path.join(sys.argv[2], ckpt), os.path.join(sys.argv[3], ckpt)
            if mode == "exact":
                exact(a, b)
            else:
                bound(a, b, float(sys.argv[4]), mode == "either")
    elif cmd == "hold":
        hold(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
