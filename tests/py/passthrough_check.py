"""Real-client checks of FUSE passthrough (tests/integration/passthrough.sh).

  passthrough_check.py serve RUN MNT_SERIES WANT
      RUN is composite_check.py's run (checkpoint-10 full, checkpoint-20 the
      odd blocks only).  Files served as they were saved must load equal to
      the originals (torch.load, a shared mapping of model.safetensors, plain
      reads) and be served by WANT ("passthrough" or "daemon") once opened,
      as user.ckptfs.io says; synthesized composites always by the daemon.
  passthrough_check.py flip FILE [last]
      XORs one byte in the middle of FILE's first (last) tensor record,
      keeping its size and mtime (only the content hash can tell); twice
      restores.
  passthrough_check.py make_big FILE
      a 32 MiB model.pt of eight 4 MiB tensors (hashed on several threads).
  passthrough_check.py big ORIG MNT_FILE WANT [flipped]
      it loads equal and goes by WANT; flipped: it is served by the daemon,
      which refuses the flipped range.
  passthrough_check.py damaged RUN MNT_SERIES WANT
      after `flip` of checkpoint-10/optimizer.pt (first tensor) and
      checkpoint-10/model.pt (last tensor): that file is never given to the
      kernel (served by the daemon, which refuses the flipped range with
      EIO while the rest of it reads), nor is checkpoint-20's composite
      model.pt, whose sequential reader gets EIO at the flipped range; the
      intact files still are.
  passthrough_check.py count DIR...
      opens (and reads a byte of) every file in the DIRs of a mount and
      prints how many of them are then served by passthrough.
  passthrough_check.py save_load MNT WANT
      a writable mount: torch.save of a new checkpoint into a new series of
      the mount, the commit by rename, and torch.load of what was saved,
      served by WANT.

Every check failure raises (exit 1) with what differed.
"""

import errno
import os
import sys
import zipfile

import torch

import deepcompare
import mountcheck

IO_XATTR = "user.ckptfs.io"
WHOLE_IN_10 = ("model.pt", "optimizer.pt", "model.safetensors", "scheduler.pt",
               "trainer_state.json", "config.json", "tokenizer_config.json")


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def io_of(path):
    return os.getxattr(path, IO_XATTR).decode()


def load_same(mounted, original):
    if mounted.endswith(".pt"):
        deepcompare.assert_loads_same(mounted, original, mounted)
    elif mounted.endswith(".safetensors"):
        expect(mountcheck.read_mmapped(mounted) == mountcheck.read_all(original),
               "%s: the shared mapping differs from the original" % mounted)
    else:
        expect(mountcheck.read_all(mounted) == mountcheck.read_all(original),
               "%s differs from the original" % mounted)


def expect_unreadable(path, what):
    try:
        mountcheck.read_all(path)
    except OSError as e:
        expect(e.errno == errno.EIO, "%s: %s, expected EIO" % (what, e))
    else:
        raise AssertionError("%s: the flipped range was served" % what)


def big(orig, mnt_file, want, flipped):
    """The 32 MiB file: loads equal and goes by WANT, or, with a byte of its
    last tensor flipped, is served by the daemon and refused there."""
    if flipped:
        expect_unreadable(mnt_file, mnt_file)
        got = io_of(mnt_file)
        expect(got == "daemon", "the damaged %s is served by %s" % (mnt_file, got))
        return
    load_same(mnt_file, orig)
    got = io_of(mnt_file)
    expect(got == want, "%s is served by %s, expected %s" % (mnt_file, got, want))


def serve(run, mnt, want):
    ck10, ck20 = os.path.join(mnt, "checkpoint-10"), os.path.join(mnt, "checkpoint-20")
    expect(IO_XATTR in os.listxattr(os.path.join(ck10, "model.pt")), "%s not listed" % IO_XATTR)
    expect(IO_XATTR not in os.listxattr(ck10), "%s listed for a directory" % IO_XATTR)
    before = io_of(os.path.join(ck10, "model.pt"))
    expect(before == ("unopened" if want == "passthrough" else "daemon") or before == "daemon",
           "before any open: %s" % before)
    for name in WHOLE_IN_10:
        path = os.path.join(ck10, name)
        load_same(path, os.path.join(run, "checkpoint-10", name))
        got = io_of(path)
        expect(got == want, "checkpoint-10/%s is served by %s, expected %s" % (name, got, want))
        # Opened again, the same way (the kernel wants every open alike).
        load_same(path, os.path.join(run, "checkpoint-10", name))
    # checkpoint-20's composites are synthesized: only the daemon can serve them.
    for name in ("model.pt", "optimizer.pt", "model.safetensors"):
        path = os.path.join(ck20, name)
        with open(path, "rb") as f:
            f.read(1 << 20)
        got = io_of(path)
        expect(got == "daemon", "synthesized checkpoint-20/%s is served by %s" % (name, got))
    # Files it saved as they are, and one only checkpoint-10 has.
    for name, src in (("trainer_state.json", "checkpoint-20"), ("tokenizer_config.json", "checkpoint-10")):
        path = os.path.join(ck20, name)
        load_same(path, os.path.join(run, src, name))
        got = io_of(path)
        expect(got == want, "checkpoint-20/%s is served by %s, expected %s" % (name, got, want))


def make_big(path):
    """A 32 MiB model.pt of eight 4 MiB tensors: large enough that its
    ranges are hashed on several threads at its first open."""
    g = torch.Generator().manual_seed(8)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save({"w%d" % i: torch.randn(1 << 20, generator=g) for i in range(8)}, path)


def tensor_offset(path, last=False):
    """Offset of the middle byte of the first (or last) non-empty storage record."""
    with zipfile.ZipFile(path) as z:
        infos = z.infolist()
        for info in reversed(infos) if last else infos:
            if "/data/" in info.filename and info.file_size > 0:
                with open(path, "rb") as f:
                    f.seek(info.header_offset)
                    hdr = f.read(30)
                name_len = int.from_bytes(hdr[26:28], "little")
                extra_len = int.from_bytes(hdr[28:30], "little")
                return info.header_offset + 30 + name_len + extra_len + info.file_size // 2
    raise AssertionError("%s has no tensor record" % path)


def flip(path, last=False):
    mountcheck.flip_byte(path, tensor_offset(path, last))


def damaged(run, mnt, want):
    ck10 = os.path.join(mnt, "checkpoint-10")
    victim = os.path.join(ck10, "optimizer.pt")
    at = tensor_offset(os.path.join(run, "checkpoint-10", "optimizer.pt"))
    with open(victim, "rb") as f:
        head = f.read(at - (at % 4096))   # the pages before the flipped byte still read
        try:
            f.read()
        except OSError as e:
            expect(e.errno == errno.EIO, "reading the flipped range: %s, expected EIO" % e)
        else:
            raise AssertionError("the flipped range of %s was served" % victim)
    expect(head == mountcheck.read_all(os.path.join(run, "checkpoint-10", "optimizer.pt"))[:len(head)],
           "the bytes before the flipped range differ")
    got = io_of(victim)
    expect(got == "daemon", "a damaged file is served by %s" % got)
    try:
        torch.load(victim)
    except Exception:
        pass
    else:
        raise AssertionError("torch.load of the damaged %s succeeded" % victim)
    # checkpoint-10/model.pt's last tensor (not a decoder block's: the
    # composite of checkpoint-20 takes it from checkpoint-10) is flipped
    # too: a sequential reader of that composite gets its first bytes, then
    # EIO where the flipped range is (checked ahead of the reader, by the
    # daemon's verification thread, or by the reader itself).
    composite = os.path.join(mnt, "checkpoint-20", "model.pt")
    got = 0
    with open(composite, "rb", buffering=0) as f:
        try:
            while True:
                b = f.read(64 << 10)
                if not b:
                    break
                got += len(b)
        except OSError as e:
            expect(e.errno == errno.EIO, "reading %s: %s, expected EIO" % (composite, e))
        else:
            raise AssertionError("%s: the flipped range was served" % composite)
    expect(got > 0, "%s: nothing read before the flipped range" % composite)
    expect(io_of(composite) == "daemon", "synthesized %s is served by %s" % (composite, io_of(composite)))
    path = os.path.join(ck10, "model.safetensors")
    load_same(path, os.path.join(run, "checkpoint-10", "model.safetensors"))
    expect(io_of(path) == want, "an intact file beside a damaged one is served by %s" % io_of(path))


def save_load(mnt, want):
    g = torch.Generator().manual_seed(30)
    sd = {"layers.%d.weight" % i: torch.randn(256, 256, generator=g) for i in range(4)}
    series = os.path.join(mnt, "fresh")   # a series of its own: nothing older merges in
    os.mkdir(series)
    tmp, final = os.path.join(series, "tmp-checkpoint-30"), os.path.join(series, "checkpoint-30")
    os.mkdir(tmp)
    torch.save(sd, os.path.join(tmp, "model.pt"))
    os.rename(tmp, final)
    path = os.path.join(final, "model.pt")
    back = torch.load(path)
    expect(deepcompare.differences(back, sd) == [], "checkpoint-30 loads different from what was saved")
    got = io_of(path)
    expect(got == want, "the committed checkpoint-30/model.pt is served by %s, expected %s" % (got, want))


def count(dirs):
    n = 0
    for d in dirs:
        for name in sorted(os.listdir(d)):
            p = os.path.join(d, name)
            if not os.path.isfile(p):
                continue
            with open(p, "rb") as f:
                f.read(1)
            n += io_of(p) == "passthrough"
    print(n)


def main(argv):
    cmd = argv[1]
    if cmd == "serve":
        serve(argv[2], argv[3], argv[4])
    elif cmd == "flip":
        flip(argv[2], len(argv) > 3 and argv[3] == "last")
    elif cmd == "make_big":
        make_big(argv[2])
    elif cmd == "big":
        big(argv[2], argv[3], argv[4], len(argv) > 5 and argv[5] == "flipped")
    elif cmd == "damaged":
        damaged(argv[2], argv[3], argv[4])
    elif cmd == "save_load":
        save_load(argv[2], argv[3])
    elif cmd == "count":
        count(argv[2:])
        return
    else:
        raise SystemExit("usage: see the docstring")
    print("ok: %s" % " ".join(argv[1:]))


if __name__ == "__main__":
    main(sys.argv)
