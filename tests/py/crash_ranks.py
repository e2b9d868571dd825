"""Four ranks write one DeepSpeed-like checkpoint while two readers load
older ones (tests/integration/concurrent_ranks.sh).

  crash_ranks.py SERIES_DIR STORE

SERIES_DIR is a series directory of a writable mount of STORE.  Each save
of global_stepN is DeepSpeed's layout: zero_pp_rank_R_mp_rank_00_optim_states.pt
from each rank R (0..3, its shard of the Adam moments) and
mp_rank_00_model_states.pt from rank 0; then, after every rank is done,
the tag goes into SERIES_DIR/latest, which commits the directory.

global_step10 and global_step20 are saved by one process.  Then 2 reader
processes load every file of both, over and over, through the mount (page
cache dropped first) and compare each to what was saved, bit for bit, while
4 writer processes save global_step30 at the same time (each makes the
directory itself, as every rank does).  global_step30 is not committed
before its marker; after it, every file loads exactly, and the readers
found only exact data.  Processes are forked from this one (torch is
imported once); a failure exits 1 with what differed.
"""

import os
import shutil
import sys
import tempfile
import time

import torch

import deepcompare
from crash_common import committed, in_progress, model_state, served_load, wait_committed

RANKS = 4
SHARD_MIB = 6


def rank_files(step):
    """{file name: object} of one save: the shards of every rank and rank 0's model states."""
    files = {"mp_rank_00_model_states.pt": {"module": model_state(step, 2), "global_steps": step,
                                            "dp_world_size": RANKS, "ds_version": "0.9.0"}}
    for r in range(RANKS):
        g = torch.Generator().manual_seed(step * 100 + r)
        n = SHARD_MIB * (1 << 20) // 4 // 3
        shard = {"exp_avg": torch.randn(n, generator=g), "exp_avg_sq": torch.rand(n, generator=g),
                 "fp32": torch.randn(n, generator=g)}
        files["zero_pp_rank_%d_mp_rank_00_optim_states.pt" % r] = {
            "optimizer_state_dict": {"state": {0: shard}, "param_groups": [{"lr": 1e-4, "params": [0]}]},
            "ds_config": {"zero_optimization": {"stage": 1}}, "ds_version": "0.9.0"}
    return files


def rank_names(r):
    names = ["zero_pp_rank_%d_mp_rank_00_optim_states.pt" % r]
    if r == 0:
        names.append("mp_rank_00_model_states.pt")
    return names


def write_latest(series_dir, tag):
    with open(os.path.join(series_dir, "latest"), "w") as f:
        f.write(tag)


def fork(fn, *args):
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = fn(*args) or 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            os._exit(code)
    return pid


def reader(k, series_dir, want, stop, progress):
    """Loads every committed file again and again until stop exists;
    writes the number of finished passes to progress after each."""
    passes = 0
    while not os.path.exists(stop):
        for step in sorted(want):
            for name, obj in want[step].items():
                path = os.path.join(series_dir, "global_step%d" % step, name)
                d = deepcompare.differences(served_load(path), obj)
                if d:
                    print("reader %d, pass %d: %s differs:\n  %s" % (k, passes, path, "\n  ".join(d[:10])))
                    return 1
        passes += 1
        with open(progress + ".tmp", "w") as f:
            f.write(str(passes))
        os.rename(progress + ".tmp", progress)
    print("reader %d: %d passes over %d files, all exact" % (k, passes, sum(len(w) for w in want.values())))
    return 0


def writer(r, series_dir, files, go):
    os.read(go, 1)      # every rank starts at once
    d = os.path.join(series_dir, "global_step30")
    os.makedirs(d, exist_ok=True)
    for name in rank_names(r):
        torch.save(files[name], os.path.join(d, name))
    return 0


def passes(progress):
    try:
        with open(progress) as f:
            return int(f.read())
    except FileNotFoundError:
        return 0


def main(series_dir, store):
    torch.set_num_threads(1)
    series = os.path.basename(series_dir.rstrip("/"))
    want = {}
    for step in (10, 20):
        want[step] = rank_files(step)
        d = os.path.join(series_dir, "global_step%d" % step)
        os.makedirs(d)
        for name, obj in want[step].items():
            torch.save(obj, os.path.join(d, name))
        write_latest(series_dir, "global_step%d" % step)
        wait_committed(store, series, "global_step%d" % step)
    print("global_step10 and global_step20 committed")

    scratch = tempfile.mkdtemp(prefix="ranks.")
    stop = os.path.join(scratch, "stop")
    try:
        readers = [fork(reader, k, series_dir, want, stop, os.path.join(scratch, "passes%d" % k))
                   for k in range(2)]
        files30 = rank_files(30)
        go_r, go_w = os.pipe()
        writers = [fork(writer, r, series_dir, files30, go_r) for r in range(RANKS)]
        os.close(go_r)
        os.write(go_w, b"x" * RANKS)
        os.close(go_w)
        failed = [r for r, pid in enumerate(writers) if os.waitpid(pid, 0)[1] != 0]
        if failed:
            sys.exit("ranks %s failed" % failed)
        d30 = os.path.join(series_dir, "global_step30")
        if sorted(os.listdir(d30)) != sorted(files30):
            sys.exit("global_step30 holds %s" % sorted(os.listdir(d30)))
        if "global_step30" in committed(store, series) or not in_progress(d30):
            sys.exit("global_step30 committed before its marker")
        write_latest(series_dir, "global_step30")
        wait_committed(store, series, "global_step30")
        print("4 ranks wrote global_step30; committed by latest")

        # Each reader goes on for two more passes, the last over a store
        # that holds global_step30, then stops.
        after = [passes(os.path.join(scratch, "passes%d" % k)) for k in range(2)]
        end = time.monotonic() + 120
        while any(passes(os.path.join(scratch, "passes%d" % k)) < after[k] + 2 for k in range(2)):
            if time.monotonic() > end:
                sys.exit("the readers stopped making progress")
            if any(os.waitpid(pid, os.WNOHANG) != (0, 0) for pid in readers):
                break   # one ended early: a mismatch, reported below
            time.sleep(0.05)
        open(stop, "w").close()
        bad = [k for k, pid in enumerate(readers) if os.waitpid(pid, 0)[1] != 0]
    finally:
        open(stop, "w").close()
        shutil.rmtree(scratch, ignore_errors=True)
    if bad:
        sys.exit("readers %s saw other data than was committed" % bad)

    for name, obj in files30.items():
        deepcompare.assert_same(served_load(os.path.join(d30, name)), obj, "global_step30/" + name)
    for step in (10, 20):
        for name, obj in want[step].items():
            deepcompare.assert_same(served_load(os.path.join(series_dir, "global_step%d" % step, name)), obj,
                                    "global_step%d/%s" % (step, name))
    with open(os.path.join(series_dir, "latest")) as f:
        if f.read() != "global_step30":
            sys.exit("latest does not read back as written")
    if committed(store, series) != ["global_step10", "global_step20", "global_step30"]:
        sys.exit("committed: %s" % committed(store, series))
    print("every file of global_step10/20/30 loads exactly")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
