"""ckptfs for trainers: where to resume, and emergency checkpoints.

    import ckptfs
    info = ckptfs.resume_info("/data/store", "run")    # ckptctl resume-info --json, or None
    if info:
        load(info["path"])                              # the checkpoint in the mount, served whole
    watch = ckptfs.EmergencyWatch("/mnt/ckpt/run")     # -o health=nvml's flag
    for step in ...:
        train_step()
        reason = watch.check()
        if reason:
            save(step)
            watch.answered(reason, "/mnt/ckpt/run/checkpoint-%d" % step)

Hugging Face Trainer: `callbacks=[ckptfs.hf.EmergencyCallback()]`
(ckptfs.hf; needs transformers, imported only there).

The functions run the ckptctl program and read its --json output (ckptctl:
$CKPTCTL, the source tree the package is imported from, or PATH); nothing
of the store is read here.

Modules:
  ckptfs.ctl        ckptctl's answers: resume_info, settled_resume_info, changed_most
  ckptfs.emergency  the emergency flag: emergency_flag_up, EmergencyWatch,
                    is_committed, wait_committed, in_mount
  ckptfs.hf         EmergencyCallback, a transformers TrainerCallback
  ckptfs._native    libckptfs-py.so (ctypes) for modules with a C core
  ckptfs._locate    where programs and libraries are found
"""

from .ctl import CkptctlError, changed_most, ckptctl_path, resume_info, settled_resume_info
from .emergency import (FLAG, EmergencyWatch, emergency_flag_up, in_mount, is_committed,
                        wait_committed)
from . import hf   # transformers is imported only when hf.EmergencyCallback is used

__version__ = "0.1.0"

__all__ = [
    "CkptctlError", "EmergencyWatch", "FLAG", "changed_most", "ckptctl_path", "emergency_flag_up",
    "hf", "in_mount", "is_committed", "resume_info", "settled_resume_info", "wait_committed",
]

