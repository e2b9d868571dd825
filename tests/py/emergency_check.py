"""Checks of tests/integration/emergency_resume.sh.  Several run in one
process when joined by "+" (torch loads once): state A B + emergency C 0.25.

  state CKPT_A CKPT_B
      what examples/llmtailor_train.py restores from the two checkpoints
      (model, optimizer, scheduler, RNG states, step, loss history) is
      bit-exactly the same.
  emergency CKPT SCORE
      CKPT is an emergency save: its trainer_state.json carries the
      reason ckptfs gave, with that score and the errors factor at 1.
  partial SERIES_DIR STEP STRAIGHT_DIR
      SERIES_DIR/checkpoint-STEP is a partial emergency save: it holds the
      top half of the layers of the ranking it records (most changed
      first, every model layer ranked), and through the mount its model
      reads back complete: the saved layers as the trainer had them at
      STEP (STRAIGHT_DIR/checkpoint-STEP, a run that saved every step),
      the others from the newest committed save before it.
  same DIR_A DIR_B
      tests/py/example_check.py's: the two checkpoints are bit-identical.
"""

import json
import os
import re
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import llmtailor_train as example  # noqa: E402
from deepcompare import differences  # noqa: E402
from example_check import restored_state, same  # noqa: E402


def trainer_state(ckpt):
    with open(os.path.join(ckpt, "trainer_state.json")) as f:
        return json.load(f)


def state(a, b):
    total = trainer_state(b)["max_steps"]
    diffs = differences(restored_state(a, total), restored_state(b, total))
    if diffs:
        sys.exit("%s and %s restore differently:\n  %s" % (a, b, "\n  ".join(diffs[:20])))
    print("%s restores bit-exactly what %s does" % (a, b))


def emergency(ckpt, score):
    reason = trainer_state(ckpt).get("emergency")
    if not reason:
        sys.exit("%s is not an emergency save" % ckpt)
    if abs(reason["score"] - float(score)) > 1e-12 or reason["factors"]["errors"] != 1:
        sys.exit("%s: unexpected reason %s" % (ckpt, reason))
    print("%s: emergency save, %s" % (ckpt, reason))


def partial(series_dir, step, straight):
    step = int(step)
    ckpt = os.path.join(series_dir, "checkpoint-%d" % step)
    st = trainer_state(ckpt)
    ranking = st.get("changed_most")
    model_layers = {"embed", "norm", "head"} | {"layers.%d" % i for i in range(example.CONFIG["num_hidden_layers"])}
    if not ranking or {layer for layer, _ in ranking} != model_layers:
        sys.exit("%s: the ranking does not cover the model's layers: %s" % (ckpt, ranking))
    scores = [s for _, s in ranking]
    if scores != sorted(scores, reverse=True):
        sys.exit("%s: the ranking is not most changed first: %s" % (ckpt, ranking))
    top = {layer for layer, _ in ranking[:round(len(ranking) * 0.5)]}
    if set(st["saved_parts"]) != top:
        sys.exit("%s: saved %s, the top half of the ranking is %s" % (ckpt, st["saved_parts"], sorted(top)))
    earlier = sorted(int(m.group(1)) for m in (re.fullmatch(r"checkpoint-(\d+)", n) for n in os.listdir(series_dir))
                     if m and int(m.group(1)) < step)
    prev = os.path.join(series_dir, "checkpoint-%d" % earlier[-1])
    served = torch.load(os.path.join(ckpt, "pytorch_model.bin"))
    at_step = torch.load(os.path.join(straight, "checkpoint-%d" % step, "pytorch_model.bin"))
    before = torch.load(os.path.join(prev, "pytorch_model.bin"))
    if list(served) != list(at_step):
        sys.exit("%s: the composite's model has %s, expected %s" % (ckpt, list(served), list(at_step)))
    for name, t in served.items():
        want = at_step[name] if example.part_of(name) in top else before[name]
        if not torch.equal(t, want) or t.dtype != want.dtype:
            sys.exit("%s: %s is not the %s value" % (ckpt, name, "saved" if example.part_of(name) in top else
                                                       "earlier"))
    print("%s: saved %s; the rest from %s" % (ckpt, sorted(top), prev))


if __name__ == "__main__":
    cmds = {"state": state, "emergency": emergency, "partial": partial, "same": same}
    runs = [[]]
    for arg in sys.argv[1:]:
        if arg == "+":
            runs.append([])
        else:
            runs[-1].append(arg)
    for run in runs:
        if not run or run[0] not in cmds:
            sys.exit(__doc__)
        cmds[run[0]](*run[1:])
