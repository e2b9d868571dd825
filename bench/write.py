"""Write-path benchmark of the writable ckptfs mount (run by bench/write.sh).

Three measurements, side by side in one run:

  torch.save     a ~--gib GiB Llama-shaped fp32 state dict saved with
                 torch.save(sd, path) into an in-progress directory of the
                 mount vs into a plain directory on the same disk; both
                 followed by fsync(2) of the file (the time includes it), the
                 page cache dropped before each save when root; --runs each,
                 alternating, median MB/s and the ratio; also torch.save
                 alone, and how long after the close the daemon's own work
                 on the file (parse, hash, flush) goes on; CPU time and
                 run-queue waits of the writer and the daemon per save
  commit         a --gib checkpoint written into MNT/SERIES/checkpoint-N/ with
                 trainer_state.json last: time from the marker's close(2) to
                 the directory being committed in the mount (it carries
                 user.ckptfs.step) and to `ckptctl ls` listing it; and the
                 same checkpoint committed by rename(2) from tmp-checkpoint-N;
                 with the default -o marker_grace (1 s of quiet after the
                 marker) and again, remounted, with marker_grace=0, once
                 with the marker right after model.pt and once with the
                 marker written only when the daemon is done with model.pt
                 (what the commit itself costs)
  memory         the daemon's VmRSS while one --rss-gib file is written into
                 the mount in 1 MiB writes, at every GiB (sampled every 20 ms
                 in between, and until the daemon has hashed it), and VmHWM

Prints one line per measurement and a results table (markdown) at the end.
Needs ckptfs/ckptctl built, FUSE, and Debian's torch (python3-torch).  Not a
test: nothing here asserts speed.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import threading
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
MIB, GIB = 1 << 20, 1 << 30
CKPTFS = os.environ.get("CKPTFS", os.path.join(TOP, "ckptfs"))
CKPTCTL = os.environ.get("CKPTCTL", os.path.join(TOP, "ckptctl"))
SERIES = "bench"


def log(msg):
    print(msg, flush=True)


# --- data and system ---------------------------------------------------------------

def state_dict(gib, d=1024, ffn=2816):
    """Llama-shaped fp32 layers (nine tensors, 48 MiB per layer) adding up to ~gib."""
    shapes = {
        "input_layernorm.weight": (d,), "post_attention_layernorm.weight": (d,),
        "self_attn.q_proj.weight": (d, d), "self_attn.k_proj.weight": (d, d),
        "self_attn.v_proj.weight": (d, d), "self_attn.o_proj.weight": (d, d),
        "mlp.gate_proj.weight": (ffn, d), "mlp.up_proj.weight": (ffn, d),
        "mlp.down_proj.weight": (d, ffn),
    }
    per_layer = sum(4 * torch.Size(s).numel() for s in shapes.values())
    g = torch.Generator().manual_seed(0)
    return {"model.layers.%d.%s" % (i, k): torch.randn(s, generator=g)
            for i in range(max(1, round(gib * GIB / per_layer))) for k, s in shapes.items()}


def drop_caches():
    """True if the page cache could be dropped (root)."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def schedstat(pid, tid=None):
    """(seconds on a CPU, seconds waiting in the run queue) summed over the
    threads of pid (or just thread tid), from /proc/.../schedstat."""
    tasks = [str(tid)] if tid else os.listdir("/proc/%d/task" % pid)
    run = wait = 0
    for t in tasks:
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                a, b, _ = f.read().split()
        except OSError:     # a worker thread that just exited
            continue
        run, wait = run + int(a), wait + int(b)
    return run / 1e9, wait / 1e9


def proc_status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


class Mount:
    """A writable ckptfs mount of a fresh store, with the daemon's pid."""

    def __init__(self, work, opts, fresh=True):
        self.store, self.mnt = os.path.join(work, "store"), os.path.join(work, "mnt")
        self.pidfile = self.mnt + ".pid"
        self.opts = opts
        os.makedirs(self.mnt, exist_ok=True)
        if fresh:
            subprocess.run([CKPTCTL, "init", self.store], check=True, stdout=subprocess.DEVNULL)
        o = "pidfile=" + self.pidfile + ("," + opts if opts else "")
        subprocess.run([CKPTFS, self.store, self.mnt, "-o", o], check=True)
        with open(self.pidfile) as f:
            self.pid = int(f.read().split()[0])
        self.series = os.path.join(self.mnt, SERIES)
        if fresh:
            os.mkdir(self.series)

    def rss_mib(self, field="VmRSS"):
        return proc_status_kib(self.pid, field) / 1024

    def close(self):
        subprocess.run(["fusermount3", "-u", self.mnt], check=True)
        for _ in range(200):
            if not os.path.exists("/proc/%d" % self.pid):
                break
            time.sleep(0.05)


# --- torch.save: mount vs plain directory --------------------------------------

def parse_state(path):
    """user.ckptfs.state of an in-progress file in the mount."""
    return os.getxattr(path, "user.ckptfs.state").decode(errors="replace")


def wait_parsed(path, timeout=120):
    """Waits until the daemon's work on a closed file (parse, hash, flush to
    disk) is done; returns the seconds waited."""
    t = time.perf_counter()
    while True:
        state = parse_state(path)
        if state.startswith("in progress: parsed") or "does not parse" in state:
            return time.perf_counter() - t
        if time.perf_counter() - t > timeout:
            raise TimeoutError("%s: still '%s' after %d s" % (path, state, timeout))
        time.sleep(0.005)


def save_fsync(sd, path):
    """torch.save(sd, path) as a trainer calls it, then fsync(2) of the file;
    returns (seconds in torch.save, seconds in fsync)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    t0 = time.perf_counter()
    torch.save(sd, path)
    t1 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return t1 - t0, time.perf_counter() - t1


def bench_save(m, work, sd, runs, results):
    times = {"mount": [], "plain": []}
    cpu = {"mount": [], "plain": []}   # writer, daemon: (on a CPU, waiting for one)
    after_close = []
    size = 0
    cold = True
    for i in range(runs):
        # Alternate which goes first, so neither always meets a busier disk.
        order = ("plain", "mount") if i % 2 == 0 else ("mount", "plain")
        for where in order:
            top = os.path.join(m.series, "tmp-save-%d" % i) if where == "mount" else \
                os.path.join(work, "plain", "save-%d" % i)
            path = os.path.join(top, "model.pt")
            cold = drop_caches() and cold
            d0, w0 = schedstat(m.pid), schedstat(os.getpid(), threading.get_native_id())
            save, sync = save_fsync(sd, path)
            d1, w1 = schedstat(m.pid), schedstat(os.getpid(), threading.get_native_id())
            times[where].append((save, sync))
            cpu[where].append((w1[0] - w0[0], w1[1] - w0[1], d1[0] - d0[0], d1[1] - d0[1]))
            size = os.stat(path).st_size
            extra = ""
            if where == "mount":
                # The daemon parses, hashes and flushes the file after its
                # close, in the background; let it finish before the next run.
                after_close.append(sync + wait_parsed(path))
                extra = ", parsed+hashed+flushed %.2f s after close" % after_close[-1]
            log("  into %-5s run %d: torch.save %.2f s + fsync %.2f s = %.0f MB/s%s"
                % (where, i + 1, save, sync, size / (save + sync) / 1e6, extra))
            log("      writer on a CPU %.2f s, waiting for one %.2f s; daemon %.2f s, %.2f s"
                % cpu[where][-1])
            shutil.rmtree(top)

    def mbs(where, phases):
        return size / statistics.median(sum(t[k] for k in phases) for t in times[where]) / 1e6
    note = "page cache dropped before each" if cold else "page cache NOT dropped (not root)"
    gib = "%.2f GiB" % (size / GIB)
    plain, mount = mbs("plain", (0, 1)), mbs("mount", (0, 1))
    plain_save, mount_save = mbs("plain", (0,)), mbs("mount", (0,))
    results += [
        ("torch.save + fsync of %s, plain directory" % gib, "%.0f MB/s" % plain, note),
        ("torch.save + fsync of %s, mount (in-progress directory)" % gib, "%.0f MB/s" % mount,
         "mount = **%.2fx** plain" % (mount / plain)),
        ("torch.save alone (until it returns), plain / mount", "%.0f / %.0f MB/s" % (plain_save, mount_save),
         "mount = %.2fx plain" % (mount_save / plain_save)),
        ("mount: close -> file parsed, hashed and flushed by the daemon", "%.2f s"
         % statistics.median(after_close), "in the background, after torch.save returns"),
    ]
    for where in ("plain", "mount"):
        med = [statistics.median(c[k] for c in cpu[where]) for k in range(4)]
        results.append(("%s: writer on a CPU / waiting for one; daemon the same" % where,
                        "%.2f / %.2f s; %.2f / %.2f s" % tuple(med),
                        "per save, /proc/*/task/*/schedstat"))


# --- commit latency -------------------------------------------------------------------

def committed_in_mount(path):
    try:
        os.getxattr(path, "user.ckptfs.step")
        return True
    except OSError:
        return False


def listed_by_ckptctl(store, name):
    out = subprocess.run([CKPTCTL, "ls", store, SERIES], capture_output=True, text=True).stdout
    return any(line.split()[1:2] == [name] for line in out.splitlines())


def wait_commit(m, name, t0, timeout=120):
    """Seconds from t0 until the mount shows name committed, and until
    `ckptctl ls` lists it (polled in turn, every ~5 ms)."""
    path = os.path.join(m.series, name)
    in_mount = in_ls = None
    while in_mount is None or in_ls is None:
        now = time.perf_counter()
        if now - t0 > timeout:
            raise TimeoutError("%s not committed after %d s" % (name, timeout))
        if in_mount is None and committed_in_mount(path):
            in_mount = now - t0
        if in_ls is None and listed_by_ckptctl(m.store, name):
            in_ls = time.perf_counter() - t0
        time.sleep(0.005)
    return in_mount, in_ls


def write_hf_checkpoint(ckpt, sd, marker=True, parsed_first=False):
    """model.pt, then (unless marker=False) trainer_state.json; with
    parsed_first, the marker only once the daemon is done with model.pt.
    Returns the time of the last close."""
    os.makedirs(ckpt)
    torch.save(sd, os.path.join(ckpt, "model.pt"))
    if parsed_first:
        wait_parsed(os.path.join(ckpt, "model.pt"))
    if marker:
        with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
            f.write('{"global_step": %s}\n' % ckpt.rsplit("-", 1)[1])
    return time.perf_counter()


def bench_commit(m, sd, runs, first_step, results, parsed_first=False):
    """Marker and rename commits of --gib checkpoints; steps from first_step."""
    marker, listed, renamed = [], [], []
    how = ", marker once model.pt is parsed" if parsed_first else ""
    for i in range(runs):
        step = first_step + 10 * 2 * i
        t0 = write_hf_checkpoint(os.path.join(m.series, "checkpoint-%d" % step), sd,
                                 parsed_first=parsed_first)
        in_mount, in_ls = wait_commit(m, "checkpoint-%d" % step, t0)
        marker.append(in_mount)
        listed.append(in_ls)
        log("  marker commit%s, checkpoint-%d: committed in the mount %.0f ms, in ckptctl ls %.0f ms"
            % (how, step, in_mount * 1000, in_ls * 1000))
        if parsed_first:
            continue

        step += 10
        tmp = os.path.join(m.series, "tmp-checkpoint-%d" % step)
        write_hf_checkpoint(tmp, sd, marker=False)
        t = time.perf_counter()
        os.rename(tmp, os.path.join(m.series, "checkpoint-%d" % step))
        renamed.append(time.perf_counter() - t)
        if not committed_in_mount(os.path.join(m.series, "checkpoint-%d" % step)):
            raise RuntimeError("checkpoint-%d not committed when rename(2) returned" % step)
        log("  rename commit, checkpoint-%d: rename(2) right after the close took %.0f ms"
            % (step, renamed[-1] * 1000))

    def ms(xs):
        return "%.0f ms" % (statistics.median(xs) * 1000)
    size = os.stat(os.path.join(m.series, "checkpoint-%d" % first_step, "model.pt")).st_size / GIB
    opts = "-o " + m.opts if m.opts else "default options"
    what = "%.2f GiB, %s%s" % (size, opts, how)
    results += [
        ("marker close -> committed in the mount (user.ckptfs.step), %s" % what, ms(marker),
         "trainer_state.json written last"),
        ("marker close -> listed by `ckptctl ls`, %s" % what, ms(listed), "includes ckptctl's start"),
    ]
    if renamed:
        results.append(("rename(2) tmp-checkpoint-N -> checkpoint-N right after the last close, %s"
                        % what, ms(renamed), "returns once committed"))


# --- daemon memory while writing a large file ------------------------------------------

def bench_rss(m, gib, results):
    top = os.path.join(m.series, "tmp-rss")
    os.mkdir(top)
    path = os.path.join(top, "big.raw")
    chunk = os.urandom(MIB)
    peak, stop = [0.0], threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], m.rss_mib())
            time.sleep(0.02)
    start = m.rss_mib()
    sampler = threading.Thread(target=sample)
    sampler.start()
    rows = []
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for g in range(1, int(gib) + 1):
                for _ in range(GIB // MIB):
                    os.write(fd, chunk)
                rows.append((g, m.rss_mib(), peak[0]))
                log("  written %d GiB: daemon VmRSS %.1f MiB (highest sampled so far %.1f MiB)"
                    % rows[-1])
            os.fsync(fd)
        finally:
            os.close(fd)
        # After the close the daemon hashes the file: that counts too.
        closed = wait_parsed(path)
        log("  closed: parsed, hashed and flushed %.1f s later; daemon VmRSS %.1f MiB"
            % (closed, m.rss_mib()))
    finally:
        stop.set()
        sampler.join()
    hwm = m.rss_mib("VmHWM")
    shutil.rmtree(top)
    results.append(("daemon VmRSS while writing a %d GiB file (1 MiB writes), at %s GiB"
                    % (int(gib), ", ".join(str(g) for g, _, _ in rows)),
                    " / ".join("%.0f" % r for _, r, _ in rows) + " MiB",
                    "%.0f MiB before; highest sampled %.0f MiB" % (start, peak[0])))
    results.append(("daemon VmHWM at the end (whole run)", "%.0f MiB" % hwm, ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="scratch directory on a disk")
    ap.add_argument("--gib", type=float, default=1.0, help="state dict size (default 1)")
    ap.add_argument("--rss-gib", type=int, default=4, help="file size for the memory run (default 4)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mount-opts", default="", help="extra ckptfs -o options")
    a = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(a.dir, exist_ok=True)
    log("building a %.1f GiB state dict..." % a.gib)
    sd = state_dict(a.gib)
    results = []
    m = Mount(a.dir, a.mount_opts)
    try:
        log("torch.save into the mount and into a plain directory (%d runs each)" % a.runs)
        bench_save(m, a.dir, sd, a.runs, results)
        log("commit latency (%d runs), default marker_grace" % a.runs)
        bench_commit(m, sd, a.runs, 10, results)
        # The HF marker waits -o marker_grace (default 1 s) of quiet before
        # it commits; measured again without it, on the same store.
        m.close()
        m = None
        m = Mount(a.dir, ",".join(o for o in ("marker_grace=0", a.mount_opts) if o), fresh=False)
        log("commit latency (%d runs), -o %s" % (a.runs, m.opts))
        bench_commit(m, sd, a.runs, 1000, results)
        bench_commit(m, sd, a.runs, 2000, results, parsed_first=True)
        del sd
        log("daemon memory while writing a %d GiB file" % a.rss_gib)
        bench_rss(m, a.rss_gib, results)
    finally:
        if m:
            m.close()
    print("\n| measurement | result | note |\n|---|---|---|")
    for r in results:
        print("| %s | %s | %s |" % r)


if __name__ == "__main__":
    main()
