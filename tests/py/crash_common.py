"""Helpers shared by the crash-safety tests of the writable mount
(tests/integration/crash_*.sh, enospc.sh, concurrent_ranks.sh).

- model_state(seed, mib): a deterministic state dict of float32 tensors.
- hf_marker(step): the bytes of an HF Trainer trainer_state.json.
- committed(store, series): the checkpoint names `ckptctl ls` lists.
- wait_committed(store, series, name): waits until ckptctl lists it.
- served_load(path): torch.load through the mount after dropping the
  file's page cache, so that the daemon serves the bytes again.
- assert_same_obj(served_path, want, what): bit-exact (deepcompare).
- in_progress(path): True when the mount shows path as an in-progress
  directory (a committed one has the xattr user.ckptfs.step).
- daemon_alive(pid): kill -0.

$CKPTCTL names ckptctl (lib.sh exports it).
"""

import errno
import json
import os
import subprocess
import time

import torch

import deepcompare

CKPTCTL = os.environ.get("CKPTCTL", "ckptctl")


def model_state(seed, mib, layers=8):
    """layers float32 tensors of mib MiB in all, seeded by seed."""
    g = torch.Generator().manual_seed(int(seed))
    n = max(1, int(mib * (1 << 20)) // 4 // layers)
    return {"model.layers.%d.weight" % i: torch.randn(n, generator=g) for i in range(layers)}


def hf_marker(step):
    return json.dumps({"global_step": int(step), "log_history": []}).encode()


def committed(store, series):
    """Names of the committed checkpoints of series (empty when the series
    has none yet: ckptctl then says there is no such series)."""
    r = subprocess.run([CKPTCTL, "ls", store, series, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        if "no series" in r.stderr:
            return []
        raise AssertionError("ckptctl ls %s %s: %s" % (store, series, r.stderr.strip()))
    return [c["name"] for c in json.loads(r.stdout)["checkpoints"]]


def wait_committed(store, series, name, timeout=30.0):
    """Commits by marker run after the last release, which the kernel
    sends after close() returns: wait for the checkpoint to be listed."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if name in committed(store, series):
            return
        time.sleep(0.05)
    raise AssertionError("%s/%s was not committed within %gs" % (series, name, timeout))


def drop_cache(path):
    """Drops path's clean pages, so the next read goes to the daemon again
    (committed files are served with keep_cache)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def served_load(path):
    drop_cache(path)
    return torch.load(path, map_location="cpu")


def assert_same_obj(served_path, want, what):
    deepcompare.assert_same(served_load(served_path), want, what)


def assert_same_bytes(served_path, want, what):
    drop_cache(served_path)
    with open(served_path, "rb") as f:
        got = f.read()
    if got != want:
        raise AssertionError("%s: %d bytes served, %d written, or other bytes" % (what, len(got), len(want)))


def in_progress(path):
    """An in-progress directory has no user.ckptfs.step (ENODATA); a
    committed checkpoint has its step there."""
    try:
        os.getxattr(path, "user.ckptfs.step")
    except OSError as e:
        if e.errno == errno.ENODATA:
            return True
        raise
    return False


def daemon_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    return True
