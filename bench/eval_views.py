#!/usr/bin/env python3
"""An eval box over a compacted store: MNT/.ckptfs/weights/ against plain
safetensors copies, and listing layers/ of a 10,000-tensor checkpoint.

1. Eval loop.  bench/train_gpt.py trains its small GPT (6 blocks, d=256,
   AdamW) with torch 1.13 on CPU and saves model.pt + optimizer.pt every 10
   steps: 20 checkpoints.  They are imported into a store and compacted
   (anchor interval 4: every checkpoint but the newest is packed, most of
   them deltas at the end of chains up to 4 long).  One process then loads
   the weights of all 20, one after the other, with the reference
   safetensors reader (tests/py/safetensors_ref.py: the whole file read,
   then every tensor made), from
     - MNT/.ckptfs/weights/full/step-N/model.safetensors, a fresh read-only
       mount, and
     - plain safetensors copies of the same weights on the same disk,
   twice each: a first pass with nothing of either in the page cache (the
   store's files and the copies dropped with posix_fadvise(DONTNEED), a
   fresh mount), and a second pass right after (the mount's page cache and
   the copies' warm).  Ratios are plain time / mount time (1.0: as fast).
2. Listing.  A checkpoint of 10,000 tensors (1,000 blocks of 10), saved as
   safetensors and, in a second series, as torch.save: the time of
   os.listdir(MNT/.ckptfs/layers/SERIES/CKPT) on a fresh mount (the first
   listing builds the checkpoint's catalog: its composite parsed and every
   tensor classified) and of a second listing.

Run through bench/eval_views.sh; prints Markdown tables for docs/bench.md.
"""
import argparse
import json
import mmap
import os
import struct
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "py"))
import safetensors_ref  # noqa: E402

CKPTFS = os.environ.get("CKPTFS", "ckptfs")
CKPTCTL = os.environ.get("CKPTCTL", "ckptctl")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


MOUNT_OPTS = ()  # --mount-opts


def mount(store, mnt, *opts):
    os.makedirs(mnt, exist_ok=True)
    run(CKPTFS, store, mnt, "-o", ",".join(("ro",) + opts + MOUNT_OPTS))


def umount(mnt):
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    for _ in range(100):
        with open("/proc/mounts") as f:
            if (" %s fuse" % mnt) not in f.read():
                return
        time.sleep(0.1)


def evict(root):
    """Drops the files under root from the page cache (this process's reads
    then come from the disk; nothing else on the machine is touched)."""
    for dirpath, _, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def load_mmap(path):
    """The safetensors package's way: map the file, a tensor per entry
    copied out of the mapping."""
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    view = memoryview(m)
    n = struct.unpack("<Q", view[:8])[0]
    out = {}
    for name, info in json.loads(bytes(view[8:8 + n])).items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        t = torch.frombuffer(view[8 + n + a:8 + n + b], dtype=safetensors_ref.TORCH_OF[info["dtype"]])
        out[name] = t.reshape(info["shape"]).clone()
    return out   # the mapping goes with its last view


def load_read(path):
    return safetensors_ref.load(path)[1]


LOADERS = {"mmap": load_mmap, "read": load_read}


def daemon_usage(pid):
    """The daemon's bytes read from the disk and seconds of CPU so far."""
    with open("/proc/%d/io" % pid) as f:
        disk = next(int(l.split()[1]) for l in f if l.startswith("read_bytes:"))
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return disk, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def eval_loop(paths, loader):
    """Loads every checkpoint's weights as an eval harness would: seconds."""
    t = time.perf_counter()
    total = 0
    for p in paths:
        total += len(loader(p))
    return time.perf_counter() - t, total


def prepare_series(work):
    full = os.path.join(work, "train", "full")
    if not os.path.isdir(full) or len(os.listdir(full)) < 20:
        log("training bench/train_gpt.py: 200 steps, a checkpoint every 10 ...")
        subprocess.run([sys.executable, os.path.join(HERE, "train_gpt.py"), os.path.join(work, "train"),
                        "--steps", "200", "--every", "10", "--finetune-steps", "0"], check=True,
                       stdout=subprocess.DEVNULL)
    ckpts = sorted(os.listdir(full))[:20]
    store = os.path.join(work, "store")
    if not os.path.isdir(store):
        run(CKPTCTL, "init", store)
        run(CKPTCTL, "import", store, full, "--series", "full")
        t = time.perf_counter()
        run(CKPTCTL, "compact", store, "-q")
        log("compacted in %.1f s" % (time.perf_counter() - t))
    plain = os.path.join(work, "plain")
    if not os.path.isdir(plain):
        os.makedirs(plain)
        for ck in ckpts:
            sd = torch.load(os.path.join(full, ck, "model.pt"))
            safetensors_ref.save(sd, os.path.join(plain, ck + ".safetensors"), {"format": "pt"})
    return store, plain, ckpts


def bench_loop(work, runs):
    store, plain, ckpts = prepare_series(work)
    mnt = os.path.join(work, "mnt")
    view = [os.path.join(mnt, ".ckptfs", "weights", "full", ck, "model.safetensors") for ck in ckpts]
    copies = [os.path.join(plain, ck + ".safetensors") for ck in ckpts]
    size = sum(os.path.getsize(p) for p in copies)
    res = {(l, k): [] for l in LOADERS for k in ("plain1", "plain2", "mnt1", "mnt2", "disk", "cpu")}
    pidfile = mnt + ".pid"
    for r in range(runs):
        for name, loader in LOADERS.items():
            # The copies' passes and the mount's take turns going first:
            # what one leaves behind (freed memory, a daemon just gone)
            # must not land on the same side every run.
            for side in ("plain", "mnt") if r % 2 == 0 else ("mnt", "plain"):
                if side == "plain":
                    evict(plain)
                    res[name, "plain1"].append(eval_loop(copies, loader)[0])
                    res[name, "plain2"].append(eval_loop(copies, loader)[0])
                    continue
                evict(store)
                evict(os.path.join(work, "train"))
                mount(store, mnt, "pidfile=" + pidfile)
                try:
                    with open(pidfile) as f:
                        pid = int(f.read().split()[0])
                    before = daemon_usage(pid)
                    t1, n1 = eval_loop(view, loader)
                    after = daemon_usage(pid)
                    res[name, "disk"].append((after[0] - before[0]) / 1e6)
                    res[name, "cpu"].append(after[1] - before[1])
                    t2, _ = eval_loop(view, loader)
                finally:
                    umount(mnt)
                res[name, "mnt1"].append(t1)
                res[name, "mnt2"].append(t2)
            log("run %d, %s: plain %.2f / %.2f s, mount %.2f / %.2f s" % (
                r + 1, name, res[name, "plain1"][-1], res[name, "plain2"][-1], t1, t2))
    m = {k: statistics.median(v) for k, v in res.items()}
    print("\n20 checkpoints, %.1f MB of weights (%d tensors each), median of %d runs (load average %.1f):\n" % (
        size / 1e6, n1 // len(ckpts), runs, os.getloadavg()[0]))
    print("| loader | pass | plain safetensors | .ckptfs/weights/ | ratio (plain / mount) |")
    print("|---|---|---|---|---|")
    for name in LOADERS:
        for p in ("1", "2"):
            print("| %s | %s | %.2f s (%.0f MB/s) | %.2f s (%.0f MB/s) | %.2fx |" % (
                name, "first (cold)" if p == "1" else "second (warm)", m[name, "plain" + p],
                size / 1e6 / m[name, "plain" + p], m[name, "mnt" + p], size / 1e6 / m[name, "mnt" + p],
                m[name, "plain" + p] / m[name, "mnt" + p]))
    print("\nThe daemon over a first pass (median): " + "; ".join(
        "%s loader %.0f MB read from the disk, %.2f s of CPU" % (name, m[name, "disk"], m[name, "cpu"])
        for name in LOADERS) + ".")


def make_wide(work):
    """Series wide_st (safetensors) and wide_pt (torch.save): one
    checkpoint of 10,000 tensors each."""
    src = os.path.join(work, "wide")
    if os.path.isdir(src):
        return src
    sd = {}
    for b in range(1000):
        for t in ("q", "k", "v", "o", "gate", "up", "down", "ln1", "ln2", "bias"):
            sd["model.layers.%d.%s.weight" % (b, t)] = torch.full((16,), float(b))
    for series, name in (("wide_st", "model.safetensors"), ("wide_pt", "model.pt")):
        d = os.path.join(src, series, "checkpoint-1")
        os.makedirs(d)
        if name.endswith(".safetensors"):
            safetensors_ref.save(sd, os.path.join(d, name), {"format": "pt"})
        else:
            torch.save(sd, os.path.join(d, name))
    return src


def bench_listing(work, runs):
    src = make_wide(work)
    store = os.path.join(work, "store-wide")
    if not os.path.isdir(store):
        run(CKPTCTL, "init", store)
        for series in ("wide_st", "wide_pt"):
            run(CKPTCTL, "import", store, os.path.join(src, series))
    mnt = os.path.join(work, "mnt-wide")
    res = {}
    for series in ("wide_st", "wide_pt"):
        first, again = [], []
        for _ in range(runs):
            mount(store, mnt, "nowarmup")
            try:
                d = os.path.join(mnt, ".ckptfs", "layers", series, "checkpoint-1")
                t = time.perf_counter()
                n = len(os.listdir(d))
                first.append(time.perf_counter() - t)
                t = time.perf_counter()
                os.listdir(d)
                again.append(time.perf_counter() - t)
            finally:
                umount(mnt)
        res[series] = (statistics.median(first), statistics.median(again), n)
    print("\nListing layers/ of a 10,000-tensor checkpoint (1,000 layers: %d entries), median of %d fresh mounts:\n"
          % (res["wide_st"][2], runs))
    print("| model file | first listing | second listing |")
    print("|---|---|---|")
    for series, label in (("wide_st", "model.safetensors"), ("wide_pt", "model.pt (torch.save)")):
        print("| %s | %.1f ms | %.1f ms |" % (label, res[series][0] * 1e3, res[series][1] * 1e3))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--listing-only", action="store_true")
    ap.add_argument("--mount-opts", default="", help="extra ckptfs -o options, e.g. io_uring")
    a = ap.parse_args()
    global MOUNT_OPTS
    MOUNT_OPTS = tuple(o for o in a.mount_opts.split(",") if o)
    torch.set_num_threads(1)
    import warnings
    warnings.filterwarnings("ignore", message="The given buffer is not writable")
    if not a.listing_only:
        bench_loop(a.work, a.runs)
    bench_listing(a.work, a.runs)


if __name__ == "__main__":
    main()
