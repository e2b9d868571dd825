"""A trainer killed with SIGKILL in the middle of torch.save, over and over
(tests/integration/crash_writer.sh).

  crash_writer.py MNT STORE DAEMON_PID SEED

MNT/run is an (empty) series directory of a writable mount of STORE.  An
HF-Trainer-like save (model.pt by torch.save, then trainer_state.json, the
completion marker) commits checkpoint-10.  Then the same save of
checkpoint-20 is killed with SIGKILL, each round at another point:

- "delay": after a random delay within about how long one save takes;
- "bytes": once the staged model.pt (in STORE/staging) has passed a random
  fraction of its final size, as polled from here;
- "exact": the writer kills itself right after a random number of bytes
  has gone into write(2) (torch.save into a file object that counts).

Writers are forked from this process (torch is imported once) and never
reach the marker in these rounds: one whose save ended before the kill
waits for a go-ahead that never comes, a trainer busy with its next step.
After each kill: checkpoint-20 is not committed and the mount shows it in
progress, checkpoint-10 loads bit-exactly through the mount, the daemon is
alive; then the torn directory is removed through the mount (rm -r).  At
the end one uninterrupted save commits checkpoint-20, which loads exactly.
Every failed check raises (exit 1).
"""

import os
import random
import shutil
import signal
import sys
import time
import traceback

import torch

from crash_common import (assert_same_bytes, assert_same_obj, committed, daemon_alive, hf_marker,
                          in_progress, model_state, wait_committed)

MIB = 48
ROUNDS = [("delay", 8), ("bytes", 8), ("exact", 6)]


class KillAfter:
    """A file object for torch.save that sends the process SIGKILL once
    limit bytes have been written (the last write cut at the limit)."""

    def __init__(self, path, limit):
        self.f = open(path, "wb", buffering=0)
        self.limit, self.done = limit, 0

    def write(self, b):
        b = memoryview(b).cast("B")
        if self.done + len(b) >= self.limit:
            self.f.write(b[:self.limit - self.done])
            os.kill(os.getpid(), signal.SIGKILL)
        n = self.f.write(b)
        self.done += n
        return n

    def flush(self):
        pass


def writer(d, state, step, mode, limit, gate):
    """The forked trainer: torch.save, then (when gate allows) the marker."""
    code = 1
    try:
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.pt")
        if mode == "exact":
            torch.save(state, KillAfter(path, limit))
        else:
            torch.save(state, path)
        if gate is not None:
            os.read(gate, 1)    # the kill lands here if the save beat it
            sys.exit("writer: a kill round went on to its marker")
        with open(os.path.join(d, "trainer_state.json"), "wb") as f:
            f.write(hf_marker(step))
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def run_writer(d, state, step, mode="full", limit=0):
    """Forks a writer; returns (pid, write end of its gate or None)."""
    gate_r, gate_w = os.pipe() if mode != "full" else (None, None)
    pid = os.fork()
    if pid == 0:
        if gate_w is not None:
            os.close(gate_w)
        writer(d, state, step, mode, limit, gate_r)
    if gate_r is not None:
        os.close(gate_r)
    return pid, gate_w


def wait_exit(pid):
    _, status = os.waitpid(pid, 0)
    return status


def main(mnt, store, daemon_pid, seed):
    torch.set_num_threads(1)
    rng = random.Random(int(seed))
    run = os.path.join(mnt, "run")
    staged = os.path.join(store, "staging", "run", "checkpoint-20", "model.pt")

    # checkpoint-10, committed by its marker; how long a save takes here.
    state10 = model_state(10, MIB)
    t0 = time.monotonic()
    pid, _ = run_writer(os.path.join(run, "checkpoint-10"), state10, 10)
    if wait_exit(pid) != 0:
        sys.exit("the save of checkpoint-10 failed")
    window = time.monotonic() - t0
    wait_committed(store, "run", "checkpoint-10")
    ck10 = os.path.join(run, "checkpoint-10")
    final_size = os.path.getsize(os.path.join(ck10, "model.pt"))
    assert_same_obj(os.path.join(ck10, "model.pt"), state10, "checkpoint-10/model.pt")
    print("checkpoint-10 committed; a save of %d bytes took %.3f s" % (final_size, window))

    state20 = model_state(20, MIB)
    d20 = os.path.join(run, "checkpoint-20")
    kills, mid_file = 0, 0
    for mode, count in ROUNDS:
        for i in range(count):
            limit = 0
            if mode == "exact":
                limit = rng.randrange(1, final_size)
            pid, gate = run_writer(d20, state20, 20, mode, limit)
            if mode == "delay":
                time.sleep(rng.uniform(0, 1.2 * window))
            elif mode == "bytes":
                want = int(rng.uniform(0.02, 0.98) * final_size)
                end = time.monotonic() + 60
                while time.monotonic() < end and os.waitpid(pid, os.WNOHANG) == (0, 0):
                    try:
                        if os.stat(staged).st_size >= want:
                            break
                    except FileNotFoundError:
                        pass
            if mode != "exact":
                os.kill(pid, signal.SIGKILL)
            status = wait_exit(pid)
            os.close(gate)
            if not os.WIFSIGNALED(status) or os.WTERMSIG(status) != signal.SIGKILL:
                sys.exit("round %s %d: the writer was not killed (status %#x)" % (mode, i, status))
            kills += 1
            size = os.path.getsize(staged) if os.path.exists(staged) else 0
            if size < final_size:
                mid_file += 1
            if mode == "exact" and size > limit:
                sys.exit("round exact %d: %d bytes staged, the writer died at %d" % (i, size, limit))
            print("kill %2d (%s): model.pt had %d of %d bytes" % (kills, mode, size, final_size))

            if "checkpoint-20" in committed(store, "run"):
                sys.exit("a killed save of checkpoint-20 was committed")
            if "checkpoint-20" in os.listdir(run) and not in_progress(d20):
                sys.exit("checkpoint-20 is served as committed")
            assert_same_obj(os.path.join(ck10, "model.pt"), state10, "checkpoint-10/model.pt")
            if not daemon_alive(daemon_pid):
                sys.exit("the daemon died")
            if os.path.exists(d20):     # a kill before the makedirs leaves none
                shutil.rmtree(d20)
            if "checkpoint-20" in os.listdir(run):
                sys.exit("rm -r left checkpoint-20 in the listing")

    exact_kills = dict(ROUNDS)["exact"]
    if mid_file < exact_kills:
        sys.exit("only %d kills landed inside model.pt" % mid_file)
    print("%d writers killed, %d of them inside model.pt" % (kills, mid_file))

    # One save that is not interrupted commits and loads exactly.
    pid, _ = run_writer(d20, state20, 20)
    if wait_exit(pid) != 0:
        sys.exit("the last save of checkpoint-20 failed")
    wait_committed(store, "run", "checkpoint-20")
    assert_same_obj(os.path.join(d20, "model.pt"), state20, "checkpoint-20/model.pt")
    assert_same_bytes(os.path.join(d20, "trainer_state.json"), hf_marker(20), "checkpoint-20/trainer_state.json")
    assert_same_obj(os.path.join(ck10, "model.pt"), state10, "checkpoint-10/model.pt")
    if committed(store, "run") != ["checkpoint-10", "checkpoint-20"]:
        sys.exit("committed: %s" % committed(store, "run"))
    print("checkpoint-20 committed after %d kills and loads exactly" % kills)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
