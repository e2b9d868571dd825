"""Checks of -o preload (tests/integration/preload.sh).

  make RUN                  a series of two checkpoints: checkpoint-1 full,
                            checkpoint-2 the odd layers only, as model.pt and
                            model.safetensors (composites of both saves);
                            one tensor is longer than the daemon's 16 MiB
                            preload pieces
  resident FILE WANT        the share of FILE's pages in the mount's page cache
                            (mincore of a shared mapping: no read is made) is
                            all (at least 99 %: the kernel may drop a cached
                            page whenever it likes) / none
  stopped FILE PID REF      reads every page of FILE that is in the page cache
                            (locked there first: pin) while the daemon PID is
                            stopped (SIGSTOP), in a child killed after a
                            timeout: they must come from the page cache, and
                            equal REF's (the same composite read through a
                            mount that did not preload)
  flip RUN                  flips a byte in the middle of the first even
                            layer's largest tensor of checkpoint-1/model.pt
                            (size and mtime kept), prints its bytes' file
  io FILE WANT              how FILE is served (user.ckptfs.io): passthrough
                            (materialized) or daemon; the check opens it
  damaged FILE REF RAWFILE  after a preload with that byte flipped: the pages
                            of the composite that hold the flipped tensor are
                            not in the page cache, the others are, and
                            every page reads as REF's or fails with EIO, the
                            flipped one failing
"""

import ctypes
import errno
import mmap
import os
import signal
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import mountcheck  # noqa: E402
import safetensors_ref  # noqa: E402

PAGE = mmap.PAGESIZE
LAYERS = 6
SHAPES = {"w1": (256, 1024), "w2": (1024, 700), "b": (1024,)}   # 1 MiB, 2.7 MiB, 4 KiB
BIG = (4500, 1024)        # 17.6 MiB: longer than a preload piece


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def state(step):
    sd = {}
    g = torch.Generator().manual_seed(step)
    for i in range(LAYERS):
        if step == 1 or i % 2:
            for k, s in SHAPES.items():
                sd["layers.%d.%s" % (i, k)] = torch.randn(s, generator=g)
    if step == 1:
        sd["embed.weight"] = torch.randn(BIG, generator=g)
    return sd


def make(run):
    for step in (1, 2):
        d = os.path.join(run, "checkpoint-%d" % step)
        os.makedirs(d, exist_ok=True)
        sd = state(step)
        torch.save(sd, os.path.join(d, "model.pt"))
        safetensors_ref.save(sd, os.path.join(d, "model.safetensors"))


def residency(path):
    """([1 if page i is in the page cache else 0], pages) for path, from
    mincore of a shared mapping of it: nothing is read."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        with mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ):
            pages = (size + PAGE - 1) // PAGE
            vec = ctypes.create_string_buffer(pages)
            if libc.mincore(ctypes.c_void_p(mapping_address(path)), size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            return [b & 1 for b in vec.raw], pages


def mapping_address(path):
    real = os.path.realpath(path)
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(None, 5)
            if len(fields) == 6 and fields[5].strip() == real:
                return int(fields[0].split("-")[0], 16)
    raise AssertionError("no mapping of %s in /proc/self/maps" % real)


def resident(path, want):
    vec, pages = residency(path)
    n = sum(vec)
    print("%s: %d of %d pages in the page cache" % (path, n, pages))
    if want == "all":
        expect(n >= pages * 0.99, "%s: %d of %d pages preloaded" % (path, n, pages))
    else:
        expect(n == 0, "%s: %d pages in the page cache, expected none" % (path, n))


def pin(path, pages):
    """Locks the given pages of path in memory (mlock of a shared mapping,
    which reads only cached pages), so that the kernel cannot evict them
    while the daemon is stopped: a VM reclaiming cold pages (DAMON) would
    otherwise turn a cached page into a read that waits for the daemon.
    Returns the mapping (closing it unlocks them), or None when locking is
    not allowed (the check then runs unpinned)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mlock.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    addr = mapping_address(path)
    runs = []
    for p in pages:
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    for first, end in runs:
        if libc.mlock(ctypes.c_void_p(addr + first * PAGE), (end - first) * PAGE) != 0:
            m.close()
            return None
    return m


def stopped(path, pid, ref):
    want = mountcheck.read_all(ref)
    out = ref + ".stopped-read"   # not in the mount: the daemon is stopped
    fd = os.open(path, os.O_RDONLY)     # the open needs the daemon
    vec, pages = residency(path)
    cached = [p for p in range(pages) if vec[p]]
    pinned = pin(path, cached)
    os.kill(pid, signal.SIGSTOP)
    try:
        child = os.fork()
        if child == 0:
            try:
                with open(out, "wb") as w:
                    for p in cached:
                        w.write(os.pread(fd, PAGE, p * PAGE))
                os._exit(0)
            except BaseException:
                os._exit(1)
        for _ in range(300):
            done, status = os.waitpid(child, os.WNOHANG)
            if done:
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            raise AssertionError("%s: a read of a cached page waited for the stopped daemon" % path)
        expect(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "%s: read failed" % path)
    finally:
        os.kill(pid, signal.SIGCONT)
        if pinned:
            pinned.close()
        os.close(fd)
    got = mountcheck.read_all(out)
    os.unlink(out)
    expect(len(cached) > pages // 2, "%s: only %d of %d pages cached" % (path, len(cached), pages))
    expect(got == b"".join(want[p * PAGE:p * PAGE + PAGE] for p in cached),
           "%s: the cached bytes differ from the composite's" % path)
    print("%s: %d cached pages read with the daemon stopped, equal to the composite's"
          % (path, len(cached)))


def victim(run):
    """checkpoint-1/model.pt's record of layers.0.w2 (an even layer: the
    composite of checkpoint-2 takes it from checkpoint-1): (offset, size)."""
    path = os.path.join(run, "checkpoint-1", "model.pt")
    sd = torch.load(path)
    want = sd["layers.0.w2"].numpy().tobytes()
    raw = mountcheck.read_all(path)
    at = raw.find(want)
    expect(at > 0 and raw.find(want, at + 1) < 0, "cannot place layers.0.w2 in %s" % path)
    return path, at, len(want)


def flip(run):
    path, at, n = victim(run)
    mountcheck.flip_byte(path, at + n // 2)


def damaged(path, ref, run):
    raw_path, at, n = victim(run)
    want = mountcheck.read_all(ref)
    clean = bytearray(mountcheck.read_all(raw_path)[at:at + n])
    clean[n // 2] ^= 0x5a       # the bytes before the flip
    cat = want.find(bytes(clean))
    expect(cat > 0, "the flipped tensor is not in the composite")
    flipped_page = (cat + n // 2) // PAGE
    vec, pages = residency(path)
    print("%s: %d of %d pages in the page cache" % (path, sum(vec), pages))
    first, last = cat // PAGE, (cat + n - 1) // PAGE
    expect(not any(vec[first:last + 1]), "pages of the damaged tensor were pushed")
    others = vec[:first] + vec[last + 1:]
    expect(sum(others) >= len(others) * 0.99, "only %d of the %d pages around the damaged tensor were pushed"
           % (sum(others), len(others)))
    failed = []
    with open(path, "rb", buffering=0) as f:
        for p in range(pages):
            try:
                got = os.pread(f.fileno(), PAGE, p * PAGE)
            except OSError as e:
                expect(e.errno == errno.EIO, "page %d: %s" % (p, e))
                failed.append(p)
                continue
            expect(got == want[p * PAGE:p * PAGE + PAGE], "page %d was served with other bytes" % p)
    expect(flipped_page in failed, "the page holding the flipped byte was served")
    print("%s: pages %d-%d of the flipped tensor not pushed; %d pages refused (EIO), the rest equal"
          % (path, first, last, len(failed)))


def io(path, want):
    with open(path, "rb"):
        pass
    got = os.getxattr(path, "user.ckptfs.io").decode()
    expect(got == want, "%s is served by %s, expected %s" % (path, got, want))
    print("%s: served by %s" % (path, got))


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "make":
        make(args[0])
    elif cmd == "resident":
        resident(args[0], args[1])
    elif cmd == "stopped":
        stopped(args[0], int(args[1]), args[2])
    elif cmd == "io":
        io(args[0], args[1])
    elif cmd == "flip":
        flip(args[0])
    elif cmd == "damaged":
        damaged(args[0], args[1], args[2])
    else:
        raise SystemExit("unknown command %s" % cmd)


if __name__ == "__main__":
    main()
