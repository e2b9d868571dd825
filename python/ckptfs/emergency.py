"""Emergency checkpoints on a ckptfs writable mount: the trainer's side.

A ckptfs daemon mounted with `-o health=nvml` watches the GPUs (ckptfs(1),
"GPU HEALTH").  When a GPU's risk score reaches the threshold it puts
`trigger_checkpoint.flag` in every series directory being written through
the mount, holding the reason as JSON, and removes it once a checkpoint of
that series commits.  A trainer checks for the flag every step - one
lookup of a name in its output directory, which the daemon answers from
memory - and saves at once.

Plain training loop:

    import ckptfs
    watch = ckptfs.EmergencyWatch("/mnt/ckpt/run", store="/data/store", partial=0.5)
    for step in ...:
        train_step()
        reason = watch.check()
        if reason:
            parts = watch.parts()            # None: everything
            save(step, parts)                # into /mnt/ckpt/run/checkpoint-STEP/
            watch.answered(reason, "/mnt/ckpt/run/checkpoint-%d" % step)

Partial saves (`partial=FRACTION`): the fraction of the model's layers that
changed most since the last save, by what the store measured between its
checkpoints (ckptfs.ctl.changed_most).  The mount reads a partial save back
complete, every other layer from the newest checkpoint that has it, so a
resume from it loses only the recent updates of the layers that move
least.  Without history in the store (fewer than two checkpoints) the save
is full.

Hugging Face Trainer: ckptfs.hf.EmergencyCallback, which asks for a save
through save_requested() below.
"""

import json
import os
import time

from . import ctl

FLAG = "trigger_checkpoint.flag"
STEP_XATTR = "user.ckptfs.step"      # carried by committed checkpoints only


def emergency_flag_up(series_dir, flag_name=FLAG):
    """The reason (a dict: gpu, score, factors, id, raised_ns ...; ckptfs(1))
    when ckptfs asks the trainer writing series_dir for a checkpoint now,
    else None.  One lookup when there is no flag."""
    try:
        with open(os.path.join(series_dir, flag_name)) as f:
            text = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None          # raced with its removal


def _flag_key(reason):
    return (reason.get("id"), reason.get("raised_ns"))


class EmergencyWatch:
    """The emergency flag of one series directory in a ckptfs mount, and
    which flags this process has answered."""

    def __init__(self, series_dir, flag_name=FLAG, store=None, partial=None, ckptctl=None,
                 wait_commit=60.0):
        self.series_dir = series_dir
        self.flag_name = flag_name
        self.store = store
        self.partial = partial
        self.ckptctl = ckptctl
        self.wait_commit = wait_commit
        self.seen = set()        # flags answered by this process
        self.ranking = None      # what the last parts() chose from: [(layer, change per step)]

    def check(self):
        """The reason (a dict) when a flag this process has not answered
        is up, else None."""
        reason = emergency_flag_up(self.series_dir, self.flag_name)
        return None if reason is None or _flag_key(reason) in self.seen else reason

    def parts(self):
        """Layers for a partial save (a set), or None for a full one."""
        self.ranking = None
        if not self.partial or not self.store:
            return None
        series = os.path.basename(os.path.normpath(self.series_dir))
        ranked = ctl.changed_most(self.store, series, self.ckptctl)
        if not ranked:
            return None
        self.ranking = ranked
        keep = max(1, round(len(ranked) * self.partial))
        return {layer for layer, _ in ranked[:keep]}

    def answered(self, reason, ckpt_dir=None):
        """Marks the flag answered; with ckpt_dir, waits (up to wait_commit
        seconds) until ckptfs has committed that save, so that it is safe
        on disk before training goes on.  True when committed."""
        self.seen.add(_flag_key(reason))
        return wait_committed(ckpt_dir, self.wait_commit) if ckpt_dir else False

    def save_requested(self, step, log=print):
        """For a loop whose save is taken care of elsewhere (the HF
        Trainer's, at the end of the step): the reason when a flag not
        answered yet is up - logged, and marked answered, since the save
        asked for now answers it - else None."""
        reason = self.check()
        if reason is None:
            return None
        if log:
            log("ckptfs: GPU %s risk %.3f: emergency save at step %d"
                % (reason.get("gpu"), reason.get("score", 0.0), step))
        self.answered(reason)
        return reason


def in_mount(path):
    """True if path lies in a ckptfs mount (the longest mount point above it)."""
    path, best, fstype = os.path.realpath(path), "", ""
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            mnt = fields[1].replace("\\040", " ")
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                best, fstype = mnt, fields[2]
    return fstype == "fuse.ckptfs"


def is_committed(ckpt_dir):
    """True once ckptfs has committed the checkpoint directory ckpt_dir of
    its mount (it then carries user.ckptfs.step; a directory in progress
    does not)."""
    try:
        os.getxattr(ckpt_dir, STEP_XATTR)
        return True
    except OSError:
        return False


def wait_committed(ckpt_dir, timeout):
    """Waits (at most timeout seconds) until ckptfs commits ckpt_dir; True
    when it did."""
    deadline = time.monotonic() + timeout
    while not is_committed(ckpt_dir):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True
