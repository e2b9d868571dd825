#!/usr/bin/python3
"""The tensor/pipeline/data parallel plan for the GPUs left after a failure.

The recovery rule of "Proactive Fault Tolerance System for Megatron-LM
Training" (Ashfaq et al., section III-E), for resuming a Megatron-LM
checkpoint on fewer GPUs (Megatron-Core loads a checkpoint into another
TP/PP layout):

  1. TP x PP x DP = N, the GPUs available;
  2. tensor parallelism first, as large as divides the attention heads
     (heads % TP == 0), and N;
  3. then pipeline parallelism, as large as divides what is left (N / TP);
  4. data parallelism takes the rest: DP = N / (TP x PP).

Two optional limits the paper does not name but a real job has:
--max-tp (tensor parallelism is usually kept inside one node: GPUs per
node) and --layers (Megatron needs the layer count divisible by PP).
Without them the plan is the paper's, and DP is 1.

  parallel_plan.py --gpus 3 --heads 32             TP=1 PP=3 DP=1
  parallel_plan.py --gpus 6 --heads 32 --layers 4  TP=2 PP=1 DP=3
  parallel_plan.py --gpus 8 --heads 32 --megatron  --tensor-model-parallel-size 8 ...
  parallel_plan.py --gpus 8 --heads 32 --json      {"gpus": 8, "tp": 8, "pp": 1, "dp": 1}

The authors' code picks instead the divisor pair closest to the layout the
job had; this helper follows the rule as the paper states it.
"""

import argparse
import json
import sys


def plan(gpus, heads, max_tp=None, layers=None):
    """(tp, pp, dp) for `gpus` GPUs and a model with `heads` attention heads."""
    if gpus < 1 or heads < 1:
        raise ValueError("gpus and heads must be at least 1")
    tp = max(t for t in range(1, gpus + 1)
             if heads % t == 0 and gpus % t == 0 and (max_tp is None or t <= max_tp))
    rest = gpus // tp
    pp = max(p for p in range(1, rest + 1)
             if rest % p == 0 and (layers is None or layers % p == 0))
    return tp, pp, gpus // (tp * pp)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--gpus", type=int, required=True, help="GPUs available now")
    p.add_argument("--heads", type=int, required=True, help="attention heads of the model")
    p.add_argument("--max-tp", type=int, help="largest tensor parallelism (e.g. GPUs per node)")
    p.add_argument("--layers", type=int, help="transformer layers: PP must divide them")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.add_argument("--megatron", action="store_true", help="print Megatron-LM arguments")
    a = p.parse_args(argv)
    try:
        tp, pp, dp = plan(a.gpus, a.heads, a.max_tp, a.layers)
    except ValueError as e:
        p.error(str(e))
    if a.json:
        print(json.dumps({"gpus": a.gpus, "tp": tp, "pp": pp, "dp": dp}))
    elif a.megatron:
        print("--tensor-model-parallel-size %d --pipeline-model-parallel-size %d" % (tp, pp))
    else:
        print("TP=%d PP=%d DP=%d" % (tp, pp, dp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
