"""ckptctl from Python: the same answers, read from its --json output.

Every function here runs the ckptctl program (see ckptctl(1)) and parses
what it prints; nothing of the store is read or reimplemented in Python.
Which ckptctl: the `ckptctl` argument, else $CKPTCTL, else the source tree
the package is imported from (built in place), else PATH.  `index_dir` is
ckptctl's --index-dir (a store on a network filesystem).
"""

import json
import subprocess
import time

from . import _locate

# include/ckptfs/exitcodes.h
EXIT_OK = 0
EXIT_PARTIAL = 2     # done, some inputs set aside (stats: files that cannot be served)
EXIT_NONE = 4        # resume-info: no checkpoint the mount can serve whole


class CkptctlError(RuntimeError):
    """ckptctl exited with a status the caller did not expect."""

    def __init__(self, cmd, returncode, stderr):
        self.cmd = cmd
        self.returncode = returncode
        self.stderr = stderr
        super().__init__("%s exited %d: %s" % (" ".join(cmd[:3]), returncode, stderr.strip()))


def ckptctl_path():
    """The ckptctl this package runs: $CKPTCTL, the source tree's build, or
    PATH.  Raises FileNotFoundError when there is none."""
    return _locate.program("ckptctl", "CKPTCTL")


def run(args, ckptctl=None, index_dir=None, ok=(EXIT_OK,)):
    """Runs `ckptctl [--index-dir DIR] ARGS...`; its CompletedProcess, with
    stdout and stderr as text (bytes that are not UTF-8 as surrogates, as
    os.fsdecode gives them).  Raises CkptctlError when the exit status is
    not in `ok`."""
    cmd = [ckptctl or ckptctl_path()] + (["--index-dir", index_dir] if index_dir else []) + list(args)
    r = subprocess.run(cmd, capture_output=True)
    r.stdout = r.stdout.decode("utf-8", "surrogateescape")
    r.stderr = r.stderr.decode("utf-8", "surrogateescape")
    if r.returncode not in ok:
        raise CkptctlError(cmd, r.returncode, r.stderr)
    return r


def resume_info(store, series, mount=None, ckptctl=None, index_dir=None):
    """Where a restarted trainer resumes: `ckptctl resume-info STORE SERIES
    --json` as a dict (checkpoint, step, path in the mount, files,
    in_progress, skipped: ckptctl(1)), or None when the series has no
    checkpoint the mount can serve whole.  `mount`: the mount to give paths
    in (default: the store's writable mount)."""
    r = run(["resume-info", store, series, "--json"] + (["--mount", mount] if mount else []),
            ckptctl, index_dir, ok=(EXIT_OK, EXIT_NONE))
    return None if r.returncode == EXIT_NONE else json.loads(r.stdout)


def settled_resume_info(store, series, settle=15.0, quiet=3.0, mount=None, ckptctl=None, index_dir=None,
                        poll=0.25):
    """resume_info() once the saves in progress stop changing, for a
    supervisor restarting a trainer that died: a save whose completion
    marker has landed commits within a second or two, and one a dead
    trainer left half-written never does, so this waits until the answer
    has held still for `quiet` seconds while saves are in progress (at
    most `settle` seconds in all)."""
    def key(info):
        return None if info is None else (info["checkpoint"], tuple(info["in_progress"]))

    deadline = time.monotonic() + settle
    info = resume_info(store, series, mount, ckptctl, index_dir)
    stable_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(poll)
        now = resume_info(store, series, mount, ckptctl, index_dir)
        if key(now) != key(info):
            info, stable_since = now, time.monotonic()
        elif not (info and info["in_progress"]) or time.monotonic() - stable_since >= quiet:
            break
    return info


MODEL_LAYERS = ("embed", "norm", "head")


def changed_most(store, series, ckptctl=None, index_dir=None, newest=4):
    """[(layer, change per step)] of the model's layers (embed, norm, head,
    layers.N), the most changed first, from `ckptctl stats STORE SERIES
    --json`: for each layer the largest relative L2 change per step over
    the `newest` checkpoints where it was measured.  [] without history
    (fewer than two checkpoints) or when ckptctl fails."""
    try:
        out = run(["stats", store, series, "--json"], ckptctl, index_dir, ok=(EXIT_OK, EXIT_PARTIAL)).stdout
    except (OSError, CkptctlError):
        return []
    series_stats = [s for s in json.loads(out).get("series", []) if s.get("name") == series]
    if not series_stats:
        return []
    ckpts = series_stats[0].get("checkpoints", [])
    by_step = {c.get("name"): c.get("step") for c in ckpts}
    score = {}
    for c in ckpts[-newest:]:
        prev_step = by_step.get(c.get("previous"))
        if prev_step is None or c.get("step") is None or c["step"] <= prev_step:
            continue
        for layer in c.get("layers", []):
            name, l2 = layer.get("layer"), layer.get("relative_l2")
            if l2 is None or not (name in MODEL_LAYERS or name.startswith("layers.")):
                continue
            score[name] = max(score.get(name, 0.0), l2 / (c["step"] - prev_step))
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))
