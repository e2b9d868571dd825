"""The demo's trainer: a tiny Llama-like model (tests/py/tinyllama.py) on CPU.

  tiny_train.py train RUN          10 steps, full save to RUN/checkpoint-10;
                                   10 more, save only decoder blocks 1 and 3
                                   to RUN/checkpoint-20 (a partial save)
  tiny_train.py resume CKPT [REF]  load model.pt, optimizer.pt, scheduler.pt
                                   from CKPT, train 5 more steps; with REF (a
                                   plain merged copy), check that resuming
                                   from it gives bit-identical results
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))

import deepcompare  # noqa: E402
import tinyllama  # noqa: E402

SEED = 1234


def train(run):
    t = tinyllama.Trainer(SEED)
    losses = t.train(10)
    t.save(os.path.join(run, "checkpoint-10"))
    print("  steps  1-10  loss %.3f -> %.3f   saved checkpoint-10 (everything)"
          % (losses[0], losses[-1]))
    losses = t.train(10)
    t.save(os.path.join(run, "checkpoint-20"), blocks={1, 3})
    print("  steps 11-20  loss %.3f -> %.3f   saved checkpoint-20 (blocks 1 and 3 only)"
          % (losses[0], losses[-1]))


def resume(ckpt, ref=None):
    t = tinyllama.Trainer(SEED)
    t.load(ckpt)
    start = t.step
    losses = t.train(5)
    print("  resumed at step %d from %s" % (start, ckpt))
    print("  steps %d-%d  loss %s" % (start + 1, t.step, " ".join("%.3f" % l for l in losses)))
    if ref:
        r = tinyllama.Trainer(SEED)
        r.load(ref)
        r.train(5)
        diffs = deepcompare.differences(t.snapshot(), r.snapshot())
        print("  same weights, optimizer and scheduler state as resuming from the merged copy: %s"
              % ("yes, bit for bit" if not diffs else "NO: " + diffs[0]))
        if diffs:
            sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "train":
        train(sys.argv[2])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "resume":
        resume(*sys.argv[2:])
    else:
        sys.exit(__doc__)
