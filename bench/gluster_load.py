"""Helpers of bench/gluster.sh (docs/bench.md, "gluster").

  gluster_load.py save DIR MIB SEED
      torch.save of a Llama-shaped fp32 state dict of about MIB MiB into
      DIR/model.pt (seeded: the same bytes for the same SEED).
  gluster_load.py load PATH
      torch.load of PATH; prints the seconds it took.
"""

import os
import sys
import time

import torch


def save(d, mib, seed):
    g = torch.Generator().manual_seed(int(seed))
    hidden = 1024
    n = max(1, int(mib) * (1 << 20) // (4 * hidden * hidden * 4))
    sd = {}
    for i in range(n):
        for part in ("q", "k", "v", "o"):
            sd["model.layers.%d.attn.%s_proj.weight" % (i, part)] = torch.randn(hidden, hidden, generator=g)
        sd["model.layers.%d.input_layernorm.weight" % i] = torch.ones(hidden)
    os.makedirs(d, exist_ok=True)
    torch.save(sd, os.path.join(d, "model.pt"))


def load(path):
    t0 = time.monotonic()
    sd = torch.load(path, map_location="cpu")
    dt = time.monotonic() - t0
    if not sd:
        sys.exit("empty state dict")
    print("%.4f" % dt)


if __name__ == "__main__":
    if sys.argv[1] == "save":
        save(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "load":
        load(sys.argv[2])
    else:
        sys.exit("unknown command " + sys.argv[1])
