"""Checks of tests/integration/example_resume.sh on examples/llmtailor_train.py.

  composite SERIES_DIR DATA_DIR MERGED_DIR
      the newest committed checkpoint in SERIES_DIR (a series directory of
      a ckptfs mount) must load bit-exactly what the offline merge of the
      physical saves behind it (DATA_DIR/checkpoint-N, STORE/data/SERIES)
      gives: file by file, and as the state the example restores from it
      (model, optimizer, scheduler, RNG, step).  The merge is left in
      MERGED_DIR, for a resume from it.
  committed SERIES_DIR STEP...
      exactly checkpoint-STEP... are in SERIES_DIR, all committed (waits for
      commits that follow a closed marker).
  same CKPT_A CKPT_B [CKPT_A CKPT_B...]
      for each pair: the same file names; torch files load bit-exactly the
      same, every other file is byte-identical.
"""

import json
import os
import random
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import llmtailor_train as example  # noqa: E402
import offline_merge  # noqa: E402
from deepcompare import assert_loads_same, differences  # noqa: E402

TORCH_FILES = (".pt", ".pth", ".bin")


def same(a_dir, b_dir, *more):
    if more:
        same(*more)
    names = sorted(os.listdir(b_dir))
    if sorted(os.listdir(a_dir)) != names:
        sys.exit("%s has %s, %s has %s" % (a_dir, sorted(os.listdir(a_dir)), b_dir, names))
    for n in names:
        a, b = os.path.join(a_dir, n), os.path.join(b_dir, n)
        if n.endswith(TORCH_FILES):
            assert_loads_same(a, b, n)
        else:
            with open(a, "rb") as fa, open(b, "rb") as fb:
                if fa.read() != fb.read():
                    sys.exit("%s: bytes differ from %s" % (a, b))
    print("%s = %s: %d files" % (a_dir, b_dir, len(names)))


def restored_state(ckpt_dir, total_steps):
    """Everything the example restores from ckpt_dir, as plain objects."""
    run = example.Run(total_steps, seed=0)
    example.load_checkpoint(ckpt_dir, run)
    return {"model": run.model.state_dict(), "optimizer": run.opt.state_dict(),
            "scheduler": run.sched.state_dict(), "step": run.step, "losses": run.losses,
            "rng": {"python": random.getstate(), "numpy": np.random.get_state(),
                    "torch": torch.get_rng_state()}}


def composite(series_dir, data_dir, merged_dir):
    newest = example.newest_committed(series_dir)
    if newest is None:
        sys.exit("no committed checkpoint in %s" % series_dir)
    newest_step = int(os.path.basename(newest).split("-")[1])
    names = [os.path.basename(p) for s, p in example.checkpoints(series_dir)
             if s <= newest_step and example.is_committed(p, True)]
    physical = [os.path.join(data_dir, n) for n in names]
    with open(os.path.join(physical[-1], "trainer_state.json")) as f:
        saved = json.load(f)["saved_parts"]
    print("%s: composite of %s; the newest save holds %s"
          % (os.path.basename(newest), " ".join(names), ", ".join(saved)))
    if len(names) < 2:
        sys.exit("the test needs a composite of several saves")
    offline_merge.merge_checkpoints(physical, merged_dir)
    same(newest, merged_dir)
    with open(os.path.join(newest, "trainer_state.json")) as f:
        total = json.load(f)["max_steps"]
    diffs = differences(restored_state(newest, total), restored_state(merged_dir, total))
    if diffs:
        sys.exit("restored from the mount != restored from the merge:\n  " + "\n  ".join(diffs[:10]))
    print("restored state (model, optimizer, scheduler, RNG, step) bit-identical to the offline merge")


def committed(series_dir, *steps):
    want = ["checkpoint-%s" % s for s in steps]
    found = [os.path.basename(p) for _, p in example.checkpoints(series_dir)]
    if found != want:
        sys.exit("%s holds %s, expected %s" % (series_dir, found, want))
    example.newest_committed(series_dir)   # waits for pending marker commits
    pending = [p for _, p in example.checkpoints(series_dir) if not example.is_committed(p, True)]
    if pending:
        sys.exit("not committed: %s" % pending)
    print("%s: %s, all committed" % (series_dir, " ".join(found)))


if __name__ == "__main__":
    cmds = {"composite": composite, "committed": committed, "same": same}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](*sys.argv[2:])
