"""Trainer-side steps of the writable mount tests (tests/integration/writable_*.sh).

  save SERIES_DIR NAME PLAIN_DIR full|odd
      torch.save a model state dict and its Adam optimizer state (all
      blocks, or only the odd ones with only their optimizer entries) into
      SERIES_DIR/NAME/ through the mount, and the same files into
      PLAIN_DIR/NAME/ on a plain filesystem (for the offline merge).
  same SERVED_DIR MERGED_DIR
      every file of MERGED_DIR loads bit-exactly the same from SERVED_DIR.
  pwrite DIR
      a file written with pwrite at random offsets (some writes over 1 MiB)
      reads back identical, also after a truncate and an ftruncate.
  truncated DIR
      writes a torch.save file cut in half into DIR.
  erofs PATH...
      each PATH refuses creation, writing, truncation and mkdir with EROFS,
      and removal too on a read-only mount (a writable one deletes
      checkpoints: rmdir of one that still shows files is ENOTEMPTY).
"""

import errno
import os
import random
import sys

import torch

from deepcompare import assert_loads_same

BLOCKS = 6


def _model():
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 16) for _ in range(BLOCKS)]
    return torch.nn.Sequential(*layers)


def save(series_dir, name, plain_dir, which):
    model = _model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(3 if which == "full" else 5):
        opt.zero_grad()
        model(torch.randn(4, 16)).square().sum().backward()
        opt.step()
    keep = range(BLOCKS) if which == "full" else range(1, BLOCKS, 2)
    prefixes = tuple("%d." % i for i in keep)
    sd = model.state_dict()
    sd = type(sd)((k, v) for k, v in sd.items() if k.startswith(prefixes))
    osd = opt.state_dict()
    ids = [i for i, (k, _) in enumerate(model.named_parameters()) if k.startswith(prefixes)]
    osd = {"state": {i: osd["state"][i] for i in ids},
           "param_groups": [dict(osd["param_groups"][0], params=ids)]}
    for top in (series_dir, plain_dir):
        d = os.path.join(top, name)
        os.makedirs(d, exist_ok=True)
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        torch.save(osd, os.path.join(d, "optimizer.pt"))
    print("saved %s (%s): %d tensors" % (name, which, len(sd)))


def same(served_dir, merged_dir):
    names = sorted(os.listdir(merged_dir))
    if sorted(os.listdir(served_dir)) != names:
        sys.exit("served files %s, merged %s" % (sorted(os.listdir(served_dir)), names))
    for n in names:
        assert_loads_same(os.path.join(served_dir, n), os.path.join(merged_dir, n), n)
    print("%s: %d files load bit-exactly as the offline merge" % (served_dir, len(names)))


def pwrite(d):
    rng = random.Random(7)
    path = os.path.join(d, "random.bin")
    size = 5 * 1024 * 1024
    want = bytearray(size)
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    end = 0
    for _ in range(60):
        n = rng.choice((1, 100, 4096, 65536, 1 << 20, 3 << 20 | 17))
        off = rng.randrange(0, size - n)
        data = rng.randbytes(n)
        assert os.pwrite(fd, data, off) == n
        want[off:off + n] = data
        end = max(end, off + n)
    os.fsync(fd)
    os.close(fd)
    with open(path, "rb") as f:
        got = f.read()
    assert got == bytes(want[:end]), "random pwrites read back differently"
    fd = os.open(path, os.O_RDWR)
    os.ftruncate(fd, 12345)
    assert os.pread(fd, 20000, 0) == bytes(want[:12345]), "ftruncate"
    os.close(fd)
    os.truncate(path, 100)
    assert os.stat(path).st_size == 100 and open(path, "rb").read() == bytes(want[:100])
    os.utime(path, (1000000000, 1000000000))
    assert os.stat(path).st_mtime == 1000000000
    os.chmod(path, 0o600)
    assert os.stat(path).st_mode & 0o777 == 0o600
    print("pwrite at %d random offsets, truncate, utime and chmod behave" % 60)


def truncated(d):
    path = os.path.join(d, "pytorch_model.bin")
    torch.save({"w": torch.randn(64, 64)}, path)
    size = os.path.getsize(path)
    os.truncate(path, size // 2)
    print("%s: cut from %d to %d bytes" % (path, size, size // 2))


def _expect_errno(what, fn, want):
    try:
        fn()
    except OSError as e:
        if e.errno != want:
            sys.exit("%s: %s, expected %s" % (what, e, errno.errorcode[want]))
        return
    sys.exit("%s: succeeded, expected %s" % (what, errno.errorcode[want]))


def _expect_erofs(what, fn):
    _expect_errno(what, fn, errno.EROFS)


def erofs(*paths):
    for p in paths:
        files = [os.path.join(p, f) for f in sorted(os.listdir(p)) if os.path.isfile(os.path.join(p, f))]
        # A writable mount deletes checkpoints (rm -r: unlink hides a name,
        # rmdir of an emptied checkpoint deletes it; delete_ckpt.sh tests it).
        ro = os.statvfs(p).f_flag & os.ST_RDONLY
        _expect_erofs("create in " + p, lambda: open(os.path.join(p, "new.pt"), "wb"))
        _expect_erofs("mkdir in " + p, lambda: os.mkdir(os.path.join(p, "sub")))
        if ro:
            _expect_erofs("rmdir " + p, lambda: os.rmdir(p))
        else:
            _expect_errno("rmdir " + p, lambda: os.rmdir(p), errno.ENOTEMPTY)
        for f in files[:2]:
            _expect_erofs("write " + f, lambda: open(f, "r+b"))
            _expect_erofs("truncate " + f, lambda: os.truncate(f, 0))
            if ro:
                _expect_erofs("unlink " + f, lambda: os.unlink(f))
            _expect_erofs("chmod " + f, lambda: os.chmod(f, 0o600))
    print("EROFS for every change in %d committed checkpoints" % len(paths))


def main(argv):
    cmds = {"save": save, "same": same, "pwrite": pwrite, "truncated": truncated, "erofs": erofs}
    if len(argv) < 3 or argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
