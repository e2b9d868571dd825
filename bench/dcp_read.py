"""DCP benchmarks of ckptfs (run by bench/dcp_read.sh; docs/bench.md).

load   A 2-rank DCP series in torch 2.x's layout (tests/py/dcp_series.py's
       writer), Llama-shaped fp32 layers split by rows: step-10 every layer,
       step-20 the odd layers only.  torch's DCP reader (torch 1.13's,
       through the tests' import shim) loads step-20 whole into one process
       (2 ranks -> 1): through a read-only mount, where its .metadata is the
       merge and the even layers come from step-10's files under
       .ckptfs-from, and from a plain directory holding the offline merge
       written as one 2-rank save.  A fresh process per load, the two
       alternating, page cache dropped before each cold load (root).

list   A DCP checkpoint of --fqns tensors x --ranks ranks (each tensor one
       chunk per rank) alone in a store: ckptfs start until `ls` of it lists
       all its files, and until `ls -l`; the daemon's RSS.  Then a store that
       also has a second save with half of the FQNs, whose .metadata is the
       merge of both: ckptfs start until that save is listed, stat()ed and
       its .metadata read (the merge is built then, if the warm-up thread
       has not built it yet); RSS after, and after 5 more reads.

Prints one line per measurement and a markdown table at the end; medians
of --runs.  Not a test: nothing asserts speed.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(TOP, "tests", "py"))

import dcp_series  # noqa: E402

CKPTFS = os.environ.get("CKPTFS", os.path.join(TOP, "ckptfs"))
CKPTCTL = os.environ.get("CKPTCTL", os.path.join(TOP, "ckptctl"))
PY = os.environ.get("TORCH_PYTHON", "/usr/bin/python3")


def log(msg):
    print(msg, flush=True)


def drop_caches():
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def mount(store, mnt):
    """Mounts read-only; returns the start time and the daemon's pid."""
    os.makedirs(mnt, exist_ok=True)
    pidfile = mnt.rstrip("/") + ".pid"
    t = time.perf_counter()
    subprocess.run([CKPTFS, store, mnt, "-o", "ro,pidfile=" + pidfile], check=True)
    with open(pidfile) as f:
        return t, int(f.read().split()[0])


def umount(mnt):
    subprocess.run(["fusermount3", "-u", mnt], check=True)
    for _ in range(100):
        if not is_mounted(mnt):
            return
        time.sleep(0.05)


def is_mounted(mnt):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == mnt for line in f)


def rss_mib(pid, field="VmRSS"):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


# ---- load ------------------------------------------------------------------------

def layer_shapes(d=1024, ffn=2816):
    return {"self_attn.q_proj.weight": (d, d), "self_attn.k_proj.weight": (d, d),
            "self_attn.v_proj.weight": (d, d), "self_attn.o_proj.weight": (d, d),
            "mlp.gate_proj.weight": (ffn, d), "mlp.up_proj.weight": (ffn, d),
            "mlp.down_proj.weight": (d, ffn), "input_layernorm.weight": (d,)}


def layer_state(i, step, shapes):
    g = torch.Generator().manual_seed(i * 1000 + step)
    return {"model.layers.%d.%s" % (i, k): torch.randn(s, generator=g) for k, s in shapes.items()}


LOADER = r"""
import sys, time, torch
sys.path.insert(0, sys.argv[1])
import dcp_series
path = sys.argv[2]
md = dcp_series.read_metadata(path)
sd = dcp_series.template_of(md)
t = time.perf_counter()
dcp_series.load(path, sd)
print(time.perf_counter() - t, sum(v.numel() * v.element_size() for v in sd.values() if isinstance(v, torch.Tensor)))
"""


def one_load(path):
    out = subprocess.run([PY, "-B", "-c", LOADER, os.path.join(TOP, "tests", "py"), path], check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), int(out[1])


def bench_load(d, gib, runs):
    shapes = layer_shapes()
    per_layer = sum(4 * torch.Size(s).numel() for s in shapes.values())
    nlayers = max(2, round(gib * (1 << 30) / per_layer))
    run, plain, store, mnt = (os.path.join(d, x) for x in ("run", "plain", "store", "mnt"))
    merged = {}
    for step in (10, 20):
        flat = {}
        for i in range(nlayers):
            if step == 10 or i % 2:
                flat.update(layer_state(i, step, shapes))
        dcp_series.write_layout(os.path.join(run, "step-%d" % step), flat, {k: ("model", k[6:]) for k in flat},
                                "2.4", 2)
        merged.update(flat)
        del flat
    dcp_series.write_layout(os.path.join(plain, "step-20"), merged, {k: ("model", k[6:]) for k in merged}, "2.4", 2)
    size = sum(v.numel() * 4 for v in merged.values())
    del merged
    log("load: %d layers, %.2f GiB of tensors at step-20 (2 ranks), %d items" % (
        nlayers, size / (1 << 30), 8 * nlayers))
    subprocess.run([CKPTCTL, "init", store], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([CKPTCTL, "import", store, run, "--series", "run"], check=True, stdout=subprocess.DEVNULL)
    mount(store, mnt)
    served = os.path.join(mnt, "run", "step-20")
    res = {}
    try:
        os.listdir(os.path.join(served, ".ckptfs-from", "step-10"))
        for cold in (True, False):
            times = {"mount": [], "plain": []}
            for r in range(runs):
                for name, path in (("mount", served), ("plain", os.path.join(plain, "step-20"))):
                    if cold and not drop_caches():
                        break
                    if not cold and r == 0:
                        one_load(path)   # warm the page cache once
                    t, n = one_load(path)
                    assert n == size, (name, n, size)
                    times[name].append(t)
                    log("load %s %s: %.3f s (%.0f MB/s)" % ("cold" if cold else "warm", name, t, n / t / 1e6))
            if times["mount"]:
                m, p = statistics.median(times["mount"]), statistics.median(times["plain"])
                res["cold" if cold else "warm"] = (m, p, size)
    finally:
        umount(mnt)
    return res


# ---- list --------------------------------------------------------------------------

def bench_list(d, fqns, ranks, runs):
    run, mnt = os.path.join(d, "lrun"), os.path.join(d, "lmnt")
    flat = {"model.layers.%d.w%d" % (i % 100, i): torch.full((ranks, 4), float(i)) for i in range(fqns)}
    t = time.perf_counter()
    dcp_series.write_layout(os.path.join(run, "step-10"), flat, {k: (k,) for k in flat}, "2.4", ranks)
    half = {k: v + 1 for k, v in list(flat.items())[::2]}
    dcp_series.write_layout(os.path.join(run, "step-20"), half, {k: (k,) for k in half}, "2.4", ranks)
    log("list: wrote %d FQNs x %d ranks (+ a save of %d) in %.1f s" % (fqns, ranks, len(half),
                                                                       time.perf_counter() - t))
    stores = {}
    for name, steps in (("one", ("step-10",)), ("two", ("step-10", "step-20"))):
        store = stores[name] = os.path.join(d, "lstore-" + name)
        subprocess.run([CKPTCTL, "init", store], check=True, stdout=subprocess.DEVNULL)
        t = time.perf_counter()
        for st in steps:
            subprocess.run([CKPTCTL, "import", store, os.path.join(run, st), "--series", "run"], check=True,
                           stdout=subprocess.DEVNULL)
        log("list: import of %s: %.1f s" % (" and ".join(steps), time.perf_counter() - t))
    want = sorted(os.listdir(os.path.join(run, "step-10")))
    out = {"ls": [], "ls -l": [], "merged": [], "rss1": [], "rss2": []}
    for r in range(runs):
        # one save: mount until listed
        drop_caches()
        t0, pid = mount(stores["one"], mnt)
        got = sorted(os.listdir(os.path.join(mnt, "run", "step-10")))
        t_ls = time.perf_counter() - t0
        assert got == want, got[:5]
        for name in got:
            os.stat(os.path.join(mnt, "run", "step-10", name))
        t_l = time.perf_counter() - t0
        time.sleep(1)   # the warm-up thread
        rss1 = (rss_mib(pid), rss_mib(pid, "VmHWM"))
        umount(mnt)
        # two saves: mount until the newest is listed and its merged .metadata read
        drop_caches()
        t0, pid = mount(stores["two"], mnt)
        p = os.path.join(mnt, "run", "step-20")
        for name in os.listdir(p):
            os.stat(os.path.join(p, name))
        with open(os.path.join(p, ".metadata"), "rb") as f:
            nbytes = len(f.read())
        t_m = time.perf_counter() - t0
        after = rss_mib(pid)
        for _ in range(5):
            with open(os.path.join(p, ".metadata"), "rb") as f:
                f.read()
            os.listdir(os.path.join(p, ".ckptfs-from", "step-10"))
        rss2 = (after, rss_mib(pid), rss_mib(pid, "VmHWM"))
        umount(mnt)
        log("list run %d: one save: ls %.3f s, ls -l %.3f s, RSS %.1f MiB (peak %.1f); two saves: merged step-20 "
            "listed, stat()ed and its .metadata (%.1f MB) read %.3f s after mounting, RSS %.1f MiB, after 5 more "
            "reads %.1f (peak %.1f)" % (r, t_ls, t_l, rss1[0], rss1[1], nbytes / 1e6, t_m, *rss2))
        out["ls"].append(t_ls)
        out["ls -l"].append(t_l)
        out["merged"].append(t_m)
        out["rss1"].append(rss1)
        out["rss2"].append(rss2)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--fqns", type=int, default=10000)
    ap.add_argument("--ranks", type=int, default=8)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", choices=("load", "list"))
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    load = bench_load(a.dir, a.gib, a.runs) if a.only != "list" else {}
    lst = bench_list(a.dir, a.fqns, a.ranks, a.runs) if a.only != "load" else None
    print("\n| measurement | through the mount | baseline | ratio |\n|---|---|---|---|")
    for k, (m, p, size) in load.items():
        print("| DCP load of step-20 (%.2f GiB, 2 ranks -> 1), %s | %.2f s (%.0f MB/s) | %.2f s plain offline "
              "merge | %.2fx |" % (size / (1 << 30), k, m, size / m / 1e6, p, p / m))
    if lst:
        med = statistics.median
        print("| mount to `ls` of one save, %d FQNs x %d ranks | %.3f s | -- | -- |" % (a.fqns, a.ranks, med(lst["ls"])))
        print("| mount to `ls -l` of it | %.3f s | -- | -- |" % med(lst["ls -l"]))
        print("| daemon RSS after listing it (peak) | %.1f MiB (%.1f) | -- | -- |" % lst["rss1"][-1])
        print("| mount to a merged save (%d + %d FQNs) listed, stat()ed, .metadata read | %.3f s | -- | -- |" % (
            a.fqns, a.fqns // 2, med(lst["merged"])))
        print("| daemon RSS after it, after 5 more reads (peak) | %.1f, %.1f MiB (%.1f) | -- | -- |" % lst["rss2"][-1])

if __name__ == "__main__":
    main()
