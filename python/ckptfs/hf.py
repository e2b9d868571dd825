"""The Hugging Face Trainer and ckptfs's emergency flag.

    from ckptfs.hf import EmergencyCallback
    trainer = Trainer(..., args=TrainingArguments(output_dir="/mnt/ckpt/run", ...),
                      callbacks=[EmergencyCallback()])

In the step the flag shows in the Trainer's output directory (a series
directory of a writable ckptfs mount with `-o health=nvml`), the callback
sets `control.should_save`, so the Trainer writes its own full
checkpoint-STEP at the end of that step; ckptfs commits it when
trainer_state.json lands, and the flag goes.  What it does each step is
EmergencyWatch.save_requested() (ckptfs.emergency), shared with plain
loops.

transformers is imported when EmergencyCallback is first used, not with
this module: `import ckptfs` works without it.
"""

from .emergency import FLAG, EmergencyWatch

_callback_class = None


def _build():
    from transformers import TrainerCallback

    class EmergencyCallback(TrainerCallback):
        """A TrainerCallback that asks for a save in the step the emergency
        flag is seen.  series_dir: where the flag shows (default: the
        Trainer's output_dir); log: called with one line per emergency
        save (None: silent)."""

        def __init__(self, series_dir=None, flag_name=FLAG, log=print):
            self.series_dir = series_dir
            self.flag_name = flag_name
            self.log = log
            self.watch = None

        def on_step_end(self, args, state, control, **kwargs):
            if self.watch is None:
                self.watch = EmergencyWatch(self.series_dir or args.output_dir, self.flag_name)
            if self.watch.save_requested(state.global_step, self.log):
                control.should_save = True
            return control

    return EmergencyCallback


def __getattr__(name):
    global _callback_class
    if name == "EmergencyCallback":
        if _callback_class is None:
            _callback_class = _build()
        return _callback_class
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
