"""Read-path benchmark of ckptfs composites (run by bench/composite_read.sh).

Builds a series of two torch.save checkpoints of a Llama-shaped fp32 state
dict: step 1 full, step 2 only the odd layers.  Its composite at step 2
(even layers from step 1, odd from step 2) is read through the mount and
compared, in the same run, with the same data read without FUSE:

  torch.load     mount vs a plain local copy of the merged checkpoint
  sequential     dd bs=1M of the composite file vs pread of the same byte
                 ranges from the backing files (from `ckptctl show --json`)
                 -- first (cold: page cache dropped when root) and repeat
  served as saved  checkpoint-1 (every layer: its composite is its own
                 file, read by passthrough where allowed): dd and torch.load
                 through the mount vs the same file read directly
  start-up       ckptfs start until the composite is listed and stat()ed,
                 for this checkpoint and for one of 10,000 small tensors
  memory         the daemon's peak RSS (VmHWM) after reading composites of
                 --gib and of each --rss-gib size

With --resume it measures what a trainer resuming after a mount does
instead (see docs/bench.md, "first load after a mount"): for each of
--trials trials a fresh mount with default options, then at once one fresh
/usr/bin/python3 process loading the newest composite and one loading the
plain merged file, the backing files' page cache warm; then a second fresh
process of each on the same mount (warm); each pair's order alternating
between trials, and one uncounted trial first.  Cases: a torch.save
composite of a partial save, the same after compaction (its older layers
read from packs), a safetensors composite and a DCP one (2 ranks, loaded
by torch 1.13's reader through the tests' dcp_series shim).

Prints one line per measurement and a results table (markdown) at the end.
Numbers are medians of --runs runs.  Needs ckptfs/ckptctl built, FUSE, and
Debian's torch (python3-torch).  Not a test: nothing here asserts speed.
"""

import argparse
import ctypes
import json
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

import offline_merge  # noqa: E402

MIB = 1 << 20
CKPTFS = os.environ.get("CKPTFS", os.path.join(TOP, "ckptfs"))
CKPTCTL = os.environ.get("CKPTCTL", os.path.join(TOP, "ckptctl"))
MOUNT_OPTS = ""  # --mount-opts


def log(msg):
    print(msg, flush=True)


# --- data -------------------------------------------------------------------

def layer_shapes(d=1024, ffn=2816):
    return {
        "input_layernorm.weight": (d,), "post_attention_layernorm.weight": (d,),
        "self_attn.q_proj.weight": (d, d), "self_attn.k_proj.weight": (d, d),
        "self_attn.v_proj.weight": (d, d), "self_attn.o_proj.weight": (d, d),
        "mlp.gate_proj.weight": (ffn, d), "mlp.up_proj.weight": (ffn, d),
        "mlp.down_proj.weight": (d, ffn),
    }


def layer_state(i, step, shapes):
    g = torch.Generator().manual_seed(i * 1000 + step)
    return {"model.layers.%d.%s" % (i, k): torch.randn(s, generator=g) for k, s in shapes.items()}


def make_series(run, gib, shapes=None, nlayers=None):
    """run/checkpoint-1 (all layers) and run/checkpoint-2 (odd layers only).
    Returns the size in bytes of the composite's tensor data."""
    shapes = shapes or layer_shapes()
    per_layer = sum(4 * torch.Size(s).numel() for s in shapes.values())
    nlayers = nlayers or max(2, round(gib * (1 << 30) / per_layer))
    for step in (1, 2):
        sd = {}
        for i in range(nlayers):
            if step == 1 or i % 2:
                sd.update(layer_state(i, step, shapes))
        path = os.path.join(run, "checkpoint-%d" % step, "model.pt")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        torch.save(sd, path)
        del sd
    return nlayers * per_layer, nlayers * len(shapes)


# --- system -----------------------------------------------------------------

def drop_caches():
    """True if the page cache could be dropped (root), so a read is cold."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def timed(fn, *args):
    t = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t


def dd(path):
    subprocess.run(["dd", "if=" + path, "of=/dev/null", "bs=1M"], check=True,
                   stderr=subprocess.DEVNULL)


def pread_ranges(ranges):
    fds = {}
    try:
        for path, off, n in ranges:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
            end = off + n
            while off < end:
                got = len(os.pread(fd, min(MIB, end - off), off))
                if not got:
                    raise IOError("short read in %s" % path)
                off += got
    finally:
        for fd in fds.values():
            os.close(fd)


def torch_load(path):
    torch.load(path, map_location="cpu")


def vm_hwm_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


class Mount:
    """ckptfs STORE MNT -o ro,pidfile=...; measures the time to a listed composite."""

    def __init__(self, store, mnt, probe):
        os.makedirs(mnt, exist_ok=True)
        self.mnt, self.pidfile = mnt, mnt + ".pid"
        t = time.perf_counter()
        opts = "ro,pidfile=" + self.pidfile + ("," + MOUNT_OPTS if MOUNT_OPTS else "")
        subprocess.run([CKPTFS, store, mnt, "-o", opts], check=True)
        os.listdir(os.path.dirname(os.path.join(mnt, probe)))
        os.stat(os.path.join(mnt, probe))
        self.startup = time.perf_counter() - t
        with open(self.pidfile) as f:
            self.pid = int(f.read().split()[0])

    def hwm_mib(self):
        return vm_hwm_kib(self.pid) / 1024

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mnt], check=True)
        for _ in range(100):
            if not os.path.exists("/proc/%d" % self.pid):
                break
            time.sleep(0.05)


def import_store(store, run):
    shutil.rmtree(store, ignore_errors=True)
    subprocess.run([CKPTCTL, "init", store], check=True)
    t = time.perf_counter()
    subprocess.run([CKPTCTL, "import", store, run], check=True)
    return time.perf_counter() - t


def backing_ranges(store, series, ckpt, name):
    """(path, offset, nbytes) of every tensor of a composite, per `ckptctl show --json`."""
    out = subprocess.run([CKPTCTL, "show", store, "%s/%s" % (series, ckpt), name, "--json"],
                         check=True, capture_output=True, text=True).stdout
    ranges, seen = [], set()
    for r in json.loads(out)["tensors"]:
        key = (r["src_path"], r["src_offset"], r["nbytes"])
        if key not in seen:     # tensors sharing a storage share its bytes
            seen.add(key)
            ranges.append(key)
    return ranges


# --- the benchmark ----------------------------------------------------------

def median_of(runs, fn, *args, cold=False):
    times = []
    for _ in range(runs):
        if cold:
            drop_caches()
        times.append(timed(fn, *args))
    return statistics.median(times)


def medians_in_turn(runs, fn, a, b, cold=False):
    """Medians of fn(a) and fn(b) timed alternately: torch.load's speed in
    a long-lived process depends on what its allocator has freed before
    (fresh pages or reused heap), so runs of one after the other would
    favour whichever comes second."""
    ta, tb = [], []
    for _ in range(runs):
        for x, t in ((a, ta), (b, tb)):
            if cold:
                drop_caches()
            t.append(timed(fn, x))
    return statistics.median(ta), statistics.median(tb)


def bench_read(work, gib, runs, results):
    run, store, mnt = (os.path.join(work, n) for n in ("big", "store-big", "mnt-big"))
    log("building a %.1f GiB composite (two checkpoints, alternating layers)..." % gib)
    nbytes, ntensors = make_series(run, gib)
    plain = os.path.join(work, "plain", "model.pt")
    offline_merge.merge_checkpoints([os.path.join(run, "checkpoint-1"),
                                     os.path.join(run, "checkpoint-2")], os.path.dirname(plain))
    log("  %d tensors, %.0f MiB of tensor data" % (ntensors, nbytes / MIB))
    t_import = import_store(store, run)
    results.append(("import %.1f GiB series (2 checkpoints)" % gib, "%.2f s" % t_import, ""))

    cold = drop_caches()
    m = Mount(store, mnt, "big/checkpoint-2/model.pt")
    composite = os.path.join(mnt, "big", "checkpoint-2", "model.pt")
    try:
        size = os.stat(composite).st_size
        results.append(("ckptfs start -> composite listed (%d tensors)" % ntensors,
                        "%.0f ms" % (m.startup * 1000), "cold" if cold else "warm cache"))
        ranges = backing_ranges(store, "big", "checkpoint-2", "model.pt")

        for label, is_cold in (("first (cold)", True), ("repeat (warm)", False)):
            if is_cold and not cold:
                label = "first (page cache NOT dropped: not root)"
            speed_mnt = size / median_of(runs, dd, composite, cold=is_cold)
            speed_raw = nbytes / median_of(runs, pread_ranges, ranges, cold=is_cold)
            row = [("sequential read %s, mount" % label, "%.0f MB/s" % (speed_mnt / 1e6), ""),
                   ("sequential read %s, backing files" % label, "%.0f MB/s" % (speed_raw / 1e6),
                    "mount = %.0f %% of backing" % (100 * speed_mnt / speed_raw))]
            results.extend(row)
            for r in row:
                log("  %-60s %s %s" % r)

        for label, is_cold in (("cold", True), ("warm", False)):
            t_mnt, t_plain = medians_in_turn(runs, torch_load, composite, plain, cold=is_cold)
            rows = [("torch.load %s, mount" % label, "%.2f s" % t_mnt, ""),
                    ("torch.load %s, plain local copy" % label, "%.2f s" % t_plain,
                     "mount = %.0f %% of plain speed" % (100 * t_plain / t_mnt))]
            results.extend(rows)
            for r in rows:
                log("  %-60s %s %s" % r)
        results.append(("daemon peak RSS after reading a %.1f GiB composite" % gib,
                        "%.0f MiB" % m.hwm_mib(), ""))
        bench_served_as_saved(run, mnt, runs, cold, results)
    finally:
        m.close()
    for d in (run, store, os.path.dirname(plain)):
        shutil.rmtree(d)


def bench_served_as_saved(run, mnt, runs, cold, results):
    """checkpoint-1 holds every layer: its composite is its own file, served
    as saved (by passthrough where the kernel and root allow), against the
    same file read directly."""
    served = os.path.join(mnt, "big", "checkpoint-1", "model.pt")
    own = os.path.join(run, "checkpoint-1", "model.pt")
    size = os.stat(served).st_size
    how = "?"
    for label, is_cold in (("cold", True), ("warm", False)):
        if is_cold and not cold:
            label = "first (page cache NOT dropped: not root)"
        speed_mnt = size / median_of(runs, dd, served, cold=is_cold)
        speed_own = size / median_of(runs, dd, own, cold=is_cold)
        t_mnt, t_own = medians_in_turn(runs, torch_load, served, own, cold=is_cold)
        how = os.getxattr(served, "user.ckptfs.io").decode()
        rows = [("checkpoint-1 (served as saved, %s): read %s, mount / the file" % (how, label),
                 "%.0f / %.0f MB/s" % (speed_mnt / 1e6, speed_own / 1e6),
                 "mount = %.0f %%" % (100 * speed_mnt / speed_own)),
                ("checkpoint-1 (served as saved, %s): torch.load %s, mount / the file" % (how, label),
                 "%.2f / %.2f s" % (t_mnt, t_own), "mount = %.0f %% of its speed" % (100 * t_own / t_mnt))]
        results.extend(rows)
        for r in rows:
            log("  %-60s %s %s" % r)


def bench_many_tensors(work, ntensors, results):
    run, store, mnt = (os.path.join(work, n) for n in ("many", "store-many", "mnt-many"))
    log("building a series of %d small tensors..." % ntensors)
    shapes = {"t%d.weight" % k: (64,) for k in range(10)}
    make_series(run, 0, shapes=shapes, nlayers=ntensors // len(shapes))
    t_import = import_store(store, run)
    drop_caches()
    m = Mount(store, mnt, "many/checkpoint-2/model.pt")
    try:
        t_load = timed(torch_load, os.path.join(mnt, "many", "checkpoint-2", "model.pt"))
        results.extend([
            ("import %d-tensor series" % ntensors, "%.2f s" % t_import, ""),
            ("ckptfs start -> composite listed (%d tensors)" % ntensors,
             "%.0f ms" % (m.startup * 1000), ""),
            ("torch.load of the %d-tensor composite" % ntensors, "%.2f s" % t_load, ""),
            ("daemon peak RSS, %d-tensor composite" % ntensors, "%.0f MiB" % m.hwm_mib(), ""),
        ])
    finally:
        m.close()
    shutil.rmtree(run)
    shutil.rmtree(store)


def bench_rss(work, gib, results):
    run, store, mnt = (os.path.join(work, n) for n in ("rss", "store-rss", "mnt-rss"))
    log("building a %.1f GiB composite for the memory measurement..." % gib)
    make_series(run, gib)
    import_store(store, run)
    m = Mount(store, mnt, "rss/checkpoint-2/model.pt")
    try:
        start = m.hwm_mib()
        dd(os.path.join(mnt, "rss", "checkpoint-2", "model.pt"))
        results.append(("daemon peak RSS, %.1f GiB composite read through" % gib,
                        "%.0f MiB" % m.hwm_mib(), "%.0f MiB after start-up" % start))
    finally:
        m.close()
    shutil.rmtree(run)
    shutil.rmtree(store)


# --- first load after a mount (--resume) ------------------------------------

# One fresh process per load, as a resuming trainer is: the time of the
# load alone (imports excluded), and how often the loader blocked meanwhile
# (voluntary context switches: waits for the daemon, on a FUSE file), which
# a busy machine does not blur the way it blurs times.
LOADER = r"""
import mmap, os, resource, sys, time, warnings
import torch
path = sys.argv[1]
sys.path.insert(0, sys.argv[2])
import dcp_series
waits = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
t = time.perf_counter()
if os.path.isdir(path):
    # A DCP save, read by torch 1.13's reader through the tests' shim
    # (dcp_series), its .metadata included.
    md = dcp_series.read_metadata(path)
    dcp_series.load(path, dcp_series.template_of(md))
elif path.endswith(".safetensors"):
    # What safetensors.torch.load_file does (no safetensors package here):
    # map the file, copy each tensor out of the mapping.
    import json, struct
    warnings.simplefilter("ignore")
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    (n,) = struct.unpack("<Q", mm[:8])
    hdr = json.loads(mm[8:8 + n])
    hdr.pop("__metadata__", None)
    out = {}
    for name, e in hdr.items():
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(mm, dtype=torch.float32, count=(end - b) // 4,
                                     offset=8 + n + b).reshape(e["shape"]).clone()
else:
    torch.load(path, map_location="cpu")
t = time.perf_counter() - t
print("%.6f %d" % (t, resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - waits))
"""

WAITS = {}   # path -> the loader's blocking waits, per load


def load_in_new_process(path):
    out = subprocess.run([sys.executable, "-B", "-c", LOADER, path, os.path.join(TOP, "tests", "py")],
                         check=True,
                         capture_output=True, text=True).stdout.split()
    WAITS.setdefault(path, []).append(int(out[-1]))
    return float(out[-2])


def make_st_series(run, gib, shapes=None):
    """The series of make_series as safetensors files (model.safetensors)."""
    import safetensors_ref
    shapes = shapes or layer_shapes()
    per_layer = sum(4 * torch.Size(s).numel() for s in shapes.values())
    nlayers = max(2, round(gib * (1 << 30) / per_layer))
    for step in (1, 2):
        sd = {}
        for i in range(nlayers):
            if step == 1 or i % 2:
                sd.update(layer_state(i, step, shapes))
        path = os.path.join(run, "checkpoint-%d" % step, "model.safetensors")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        safetensors_ref.save(sd, path)
        del sd


def make_dcp_series(run, plain, gib, shapes=None):
    """The series of make_series in DCP's layout (2 ranks): run/step-10
    every layer, run/step-20 the odd layers; plain/step-20 the offline
    merge of step 20, as one save."""
    import dcp_series
    shapes = shapes or layer_shapes()
    per_layer = sum(4 * torch.Size(s).numel() for s in shapes.values())
    nlayers = max(2, round(gib * (1 << 30) / per_layer))
    merged = {}
    for step in (10, 20):
        flat = {}
        for i in range(nlayers):
            if step == 10 or i % 2:
                flat.update(layer_state(i, step, shapes))
        dcp_series.write_layout(os.path.join(run, "step-%d" % step), flat,
                                {k: ("model", k[6:]) for k in flat}, "2.4", 2)
        merged.update(flat)
        del flat
    dcp_series.write_layout(os.path.join(plain, "step-20"), merged,
                            {k: ("model", k[6:]) for k in merged}, "2.4", 2)


def files_under(*dirs):
    return [os.path.join(r, n) for d in dirs for r, _, names in os.walk(d) for n in names]


def cat(paths):
    for p in paths:
        if os.path.isdir(p):
            continue
        with open(p, "rb") as f:
            while f.read(8 * MIB):
                pass


def resume_trials(store, mnt, rel, plain, backing, trials, opt_sets):
    """Per trial and per mount option set (in turn, the order alternating
    between trials): a fresh mount, then at once the first load through it
    and a plain load, then a second (warm) load through the mount and the
    plain file again, each pair's order alternating between trials.
    Returns, per option set, the lists (first mount, first plain, warm
    mount, warm plain) and the loader's blocking waits (first, warm,
    plain).  One more trial runs first and is not counted: the first
    loads of a case, mount and plain alike, pay for the case's new files
    and processes (several times a steady load on VM A), which a
    trainer's machine has long settled."""
    out = [([], [], [], []) for _ in opt_sets]
    waits = [([], [], []) for _ in opt_sets]
    path = os.path.join(mnt, rel)
    for i in range(-1, trials):
        order = list(range(len(opt_sets)))
        if i % 2:
            order.reverse()
        for k in order:
            first_m, first_p, warm_m, warm_p = out[k]
            cat(backing + [plain])   # page caches of the backing files warm
            os.makedirs(mnt, exist_ok=True)
            pidfile = mnt + ".pid"
            subprocess.run([CKPTFS, store, mnt, "-o", "pidfile=" + pidfile +
                            ("," + opt_sets[k] if opt_sets[k] else "")], check=True)
            with open(pidfile) as f:
                pid = int(f.read().split()[0])
            WAITS.clear()
            try:
                # Both pairs take turns: on VM A one of two loads in new
                # processes back to back is often the slower, whichever
                # file it reads, so a fixed order tilts the ratio.
                if i % 2 == 0:
                    first_m.append(load_in_new_process(path))
                    first_p.append(load_in_new_process(plain))
                    warm_p.append(load_in_new_process(plain))
                    warm_m.append(load_in_new_process(path))
                else:
                    first_p.append(load_in_new_process(plain))
                    first_m.append(load_in_new_process(path))
                    warm_m.append(load_in_new_process(path))
                    warm_p.append(load_in_new_process(plain))
            finally:
                subprocess.run(["fusermount3", "-u", mnt], check=True)
                for _ in range(200):
                    if not os.path.exists("/proc/%d" % pid):
                        break
                    time.sleep(0.05)
            waits[k][0].append(WAITS[path][0])
            waits[k][1].append(WAITS[path][1])
            waits[k][2].extend(WAITS[plain])
            if i < 0:
                for lst in out[k] + waits[k]:
                    lst.clear()
    return out, waits


def bench_resume(work, gib, trials, results, versus=None):
    run, store, mnt = (os.path.join(work, n) for n in ("resume", "store-resume", "mnt-resume"))
    srun, sstore = os.path.join(work, "resume-st"), os.path.join(work, "store-resume-st")
    plain_dir, splain_dir = os.path.join(work, "plain-resume"), os.path.join(work, "plain-resume-st")
    log("first load after a mount: %.2f GiB series (checkpoint-2 a partial save)..." % gib)
    make_series(run, gib)
    offline_merge.merge_checkpoints([os.path.join(run, "checkpoint-1"),
                                     os.path.join(run, "checkpoint-2")], plain_dir)
    make_st_series(srun, gib)
    offline_merge.merge_checkpoints([os.path.join(srun, "checkpoint-1"),
                                     os.path.join(srun, "checkpoint-2")], splain_dir)
    import_store(store, run)
    import_store(sstore, srun)
    drun, dstore, dplain = (os.path.join(work, n) for n in ("resume-dcp", "store-resume-dcp", "plain-resume-dcp"))
    make_dcp_series(drun, dplain, gib)
    shutil.rmtree(dstore, ignore_errors=True)
    subprocess.run([CKPTCTL, "init", dstore], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([CKPTCTL, "import", dstore, drun, "--series", "run"], check=True, stdout=subprocess.DEVNULL)
    packed = store + "-packed"
    shutil.rmtree(packed, ignore_errors=True)
    shutil.copytree(store, packed, symlinks=True)
    subprocess.run([CKPTCTL, "compact", packed, "--keep-raw", "1", "-q"], check=True)

    raw = [os.path.join(run, c, "model.pt") for c in ("checkpoint-1", "checkpoint-2")]
    packs = [os.path.join(root, n) for root, _, names in os.walk(os.path.join(packed, "packs"))
             for n in names]
    cases = [
        ("torch.save composite, partial save", store, "resume/checkpoint-2/model.pt",
         os.path.join(plain_dir, "model.pt"), raw),
        ("the same, compacted (older layers from packs)", packed, "resume/checkpoint-2/model.pt",
         os.path.join(plain_dir, "model.pt"), raw + packs),
        ("safetensors composite, partial save", sstore, "resume-st/checkpoint-2/model.safetensors",
         os.path.join(splain_dir, "model.safetensors"),
         [os.path.join(srun, c, "model.safetensors") for c in ("checkpoint-1", "checkpoint-2")]),
        ("DCP composite, partial save (2 ranks)", dstore, "run/step-20", os.path.join(dplain, "step-20"),
         files_under(drun, dplain)),
    ]
    opt_sets = [MOUNT_OPTS] + ([versus] if versus is not None else [])
    # The set-up's gigabytes written back, and the heap it grew given back,
    # before any trial rather than during them.
    os.sync()
    ctypes.CDLL(None).malloc_trim(0)
    for label, st, rel, plain, backing in cases:
        sets, waits = resume_trials(st, mnt, rel, plain, backing, trials, opt_sets)
        for opts, (fm, fp, wm, wp), (w_first, w_warm, w_plain) in zip(opt_sets, sets, waits):
            name = label + (" (-o %s)" % (opts or "default options") if len(opt_sets) > 1 else "")
            first = statistics.median(p / m for p, m in zip(fp, fm))
            warm = statistics.median(p / m for p, m in zip(wp, wm))
            log("  %s: first load %s s, plain %s s" % (name, " ".join("%.3f" % x for x in fm),
                                                       " ".join("%.3f" % x for x in fp)))
            log("  %s: warm load %s s, plain %s s" % (name, " ".join("%.3f" % x for x in wm),
                                                      " ".join("%.3f" % x for x in wp)))
            results.append(("%s: first load after a fresh mount, mount / plain" % name,
                            "%.3f / %.3f s" % (statistics.median(fm), statistics.median(fp)),
                            "**%.2fx** (median of %d per-trial ratios)" % (first, trials)))
            results.append(("%s: again (warm), mount / plain" % name,
                            "%.3f / %.3f s" % (statistics.median(wm), statistics.median(wp)),
                            "**%.2fx**" % warm))
            results.append(("%s: loader's blocking waits, first / warm / plain (median)" % name,
                            "%d / %d / %d" % (statistics.median(w_first), statistics.median(w_warm),
                                              statistics.median(w_plain)), ""))
    with open("/proc/loadavg") as f:
        results.append(("load average at the end", f.read().split()[0], ""))
    for d in (run, srun, store, sstore, packed, plain_dir, splain_dir, drun, dstore, dplain):
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="scratch directory (needs ~3x --gib free)")
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--rss-gib", default="4", help="comma-separated composite sizes")
    ap.add_argument("--tensors", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mount-opts", default="", help="extra ckptfs -o options, e.g. verify=none")
    ap.add_argument("--resume", action="store_true",
                    help="only the first load after a fresh mount, as a resuming trainer does it")
    ap.add_argument("--trials", type=int, default=7, help="fresh mounts per case with --resume")
    ap.add_argument("--versus", default=None, metavar="OPTS",
                    help="with --resume: each trial also mounts with -o OPTS (e.g. nomaterialize), "
                         "against the same plain loads")
    a = ap.parse_args()
    global MOUNT_OPTS
    MOUNT_OPTS = a.mount_opts
    torch.set_num_threads(1)
    os.makedirs(a.dir, exist_ok=True)
    results = []
    if a.resume:
        bench_resume(a.dir, a.gib, a.trials, results, a.versus)
        a.tensors, a.rss_gib = 0, ""
    else:
        bench_read(a.dir, a.gib, a.runs, results)
    if a.tensors:
        bench_many_tensors(a.dir, a.tensors, results)
    for g in (float(x) for x in a.rss_gib.split(",") if x):
        bench_rss(a.dir, g, results)

    print("\n| measurement | result | note |\n|---|---|---|")
    for r in results:
        print("| %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
