"""Emergency checkpoints on a ckptfs writable mount: the trainer's side.

A ckptfs daemon mounted with `-o health=nvml` watches the GPUs (ckptfs(1),
"GPU HEALTH").  When a GPU's risk score reaches the threshold it puts
`trigger_checkpoint.flag` in every series directory being written through
the mount, holding the reason as JSON, and removes it once a checkpoint of
that series commits.  A trainer checks for the flag every step - one
stat() of a name in its output directory, which the daemon answers from
memory - and saves at once.

Plain training loop:

    from ckptfs_emergency import EmergencyWatch
    watch = EmergencyWatch("/mnt/ckpt/run", store="/data/store", partial=0.5)
    for step in ...:
        train_step()
        reason = watch.check()
        if reason:
            parts = watch.parts()            # None: everything
            save(step, parts)                # into /mnt/ckpt/run/checkpoint-STEP/
            watch.answered(reason, "/mnt/ckpt/run/checkpoint-%d" % step)

Hugging Face Trainer:

    from ckptfs_emergency import hf_callback
    trainer = Trainer(..., args=TrainingArguments(output_dir="/mnt/ckpt/run", ...),
                      callbacks=[hf_callback("/mnt/ckpt/run")])

The callback sets `control.should_save`, so the Trainer writes its own
full checkpoint-STEP at the end of the step; ckptfs commits it when
trainer_state.json lands.

Partial saves (`partial=FRACTION`): the fraction of the model's layers that
changed most since the last save, by what the store measured between its
checkpoints (`ckptctl stats STORE SERIES --json`: each layer's relative L2
change, per step).  The mount reads a partial save back complete, every
other layer from the newest checkpoint that has it, so a resume from it
loses only the recent updates of the layers that move least.  Without
history in the store (fewer than two checkpoints) the save is full.
"""

import json
import os
import subprocess
import time

FLAG = "trigger_checkpoint.flag"


class EmergencyWatch:
    """The emergency flag of one series directory in a ckptfs mount."""

    def __init__(self, series_dir, flag_name=FLAG, store=None, partial=None, ckptctl="ckptctl",
                 wait_commit=60.0):
        self.path = os.path.join(series_dir, flag_name)
        self.series_dir = series_dir
        self.store = store
        self.partial = partial
        self.ckptctl = ckptctl
        self.wait_commit = wait_commit
        self.seen = set()        # flag ids answered by this process
        self.ranking = None      # what the last parts() chose from: [(layer, change per step)]

    def check(self):
        """The reason (a dict) when a flag this process has not answered
        is up, else None.  One stat() when there is none."""
        try:
            with open(self.path) as f:
                text = f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            reason = json.loads(text)
        except ValueError:
            return None          # raced with its removal
        key = (reason.get("id"), reason.get("raised_ns"))
        return None if key in self.seen else reason

    def parts(self):
        """Layers for a partial save (a set), or None for a full one."""
        self.ranking = None
        if not self.partial or not self.store:
            return None
        ranked = changed_most(self.store, os.path.basename(os.path.normpath(self.series_dir)), self.ckptctl)
        if not ranked:
            return None
        self.ranking = ranked
        keep = max(1, round(len(ranked) * self.partial))
        return {layer for layer, _ in ranked[:keep]}

    def answered(self, reason, ckpt_dir=None):
        """Marks the flag answered; with ckpt_dir, waits (up to wait_commit
        seconds) until ckptfs has committed that save, so that it is safe
        on disk before training goes on.  True when committed."""
        self.seen.add((reason.get("id"), reason.get("raised_ns")))
        return wait_committed(ckpt_dir, self.wait_commit) if ckpt_dir else False


MODEL_LAYERS = ("embed", "norm", "head")


def changed_most(store, series, ckptctl="ckptctl"):
    """[(layer, change per step)] of the model's layers, the most changed
    first, from `ckptctl stats`: for each layer the largest relative L2
    change per step over the newest checkpoints where it was measured."""
    try:
        out = subprocess.run([ckptctl, "stats", store, series, "--json"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    series_stats = [s for s in json.loads(out).get("series", []) if s.get("name") == series]
    if not series_stats:
        return []
    ckpts = series_stats[0].get("checkpoints", [])
    by_step = {c.get("name"): c.get("step") for c in ckpts}
    score = {}
    for c in ckpts[-4:]:
        prev_step = by_step.get(c.get("previous"))
        if prev_step is None or c.get("step") is None or c["step"] <= prev_step:
            continue
        for layer in c.get("layers", []):
            name, l2 = layer.get("layer"), layer.get("relative_l2")
            if l2 is None or not (name in MODEL_LAYERS or name.startswith("layers.")):
                continue
            score[name] = max(score.get(name, 0.0), l2 / (c["step"] - prev_step))
    return sorted(score.items(), key=lambda kv: (-kv[1], kv[0]))


def wait_committed(ckpt_dir, timeout):
    """Waits until ckptfs commits ckpt_dir (it then carries user.ckptfs.step)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.getxattr(ckpt_dir, "user.ckptfs.step")
            return True
        except OSError:
            time.sleep(0.05)
    return False


def hf_callback(series_dir, flag_name=FLAG, log=print):
    """A transformers TrainerCallback that asks the Trainer for a save in
    the step the flag is seen (imports transformers when called)."""
    from transformers import TrainerCallback

    class CkptfsEmergencyCallback(TrainerCallback):
        def __init__(self):
            self.watch = EmergencyWatch(series_dir, flag_name)

        def on_step_end(self, args, state, control, **kwargs):
            reason = self.watch.check()
            if reason:
                log("ckptfs: GPU %s risk %.3f: emergency save at step %d"
                    % (reason.get("gpu"), reason.get("score", 0.0), state.global_step))
                control.should_save = True
                self.watch.answered(reason)
            return control

    return CkptfsEmergencyCallback()
