"""Checkpoint directories for the staged-commit tests (tests/integration/commit_*.sh).

  commit_check.py make DIR STEP MIB
      a full checkpoint dir: model.pt (~MIB MiB of float32 tensors seeded by
      STEP), optimizer.pt, config.json.
  commit_check.py hostile PATH MARKER
      a torch.save file whose pickle calls os.system("touch MARKER") on load.
  commit_check.py dcp_metadata PATH DATA_FILE
      a DCP .metadata (torch 2.x's layout, one tensor "w") naming DATA_FILE
      (12 bytes, as __0_0.distcp) as the file that holds it.
  commit_check.py same SERVED_DIR ORIGINAL_DIR [SERVED_DIR ORIGINAL_DIR...]
      every file of each ORIGINAL_DIR reads back the same from its
      SERVED_DIR: .pt files load bit-exactly the same, other files are
      byte-identical.

Every check failure raises (exit 1) with what differed.
"""

import json
import os
import sys

import torch

import deepcompare


def make(d, step, mib):
    step, mib = int(step), int(mib)
    os.makedirs(d, exist_ok=True)
    g = torch.Generator().manual_seed(step)
    n = max(1, mib * (1 << 20) // 4 // 4)   # four tensors of float32
    model = {"layers.%d.weight" % i: torch.randn(n, generator=g) for i in range(4)}
    torch.save(model, os.path.join(d, "model.pt"))
    opt = {"state": {i: {"step": step, "exp_avg": torch.randn(16, generator=g)} for i in range(4)},
           "param_groups": [{"lr": 0.001, "params": [0, 1, 2, 3]}]}
    torch.save(opt, os.path.join(d, "optimizer.pt"))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump({"step": step}, f)


class Hostile:
    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def hostile(path, marker):
    torch.save({"weight": torch.ones(4), "hook": Hostile(os.system, "touch " + marker)}, path)


def dcp_metadata(path, data_file):
    """The .metadata of a one-tensor save ("w") by the tests' torch 2.x
    layout writer, its data file renamed data_file."""
    import tempfile

    import dcp_series
    with tempfile.TemporaryDirectory() as d:
        dcp_series.write_layout(os.path.join(d, "s"), {"w": torch.zeros(4)}, {"w": ("w",)})
        with open(os.path.join(d, "s", ".metadata"), "rb") as f:
            data = f.read()
    assert data.count(b"__0_0.distcp") == 1 and len(data_file.encode()) == 12, "a name of the same length"
    with open(path, "wb") as f:
        f.write(data.replace(b"__0_0.distcp", data_file.encode()))


def same(*pairs):
    if not pairs or len(pairs) % 2:
        sys.exit(__doc__)
    for i in range(0, len(pairs), 2):
        same_dir(pairs[i], pairs[i + 1])


def same_dir(served, original):
    for root, _, names in os.walk(original):
        for name in sorted(names):
            p = os.path.join(root, name)
            rel = os.path.relpath(p, original)
            m = os.path.join(served, rel)
            if name.endswith(".pt"):
                deepcompare.assert_loads_same(m, p, rel)
            else:
                with open(m, "rb") as f, open(p, "rb") as g:
                    if f.read() != g.read():
                        raise AssertionError("%s: bytes differ" % m)
    print("%s == %s" % (served, original))


def main(argv):
    cmds = {"make": (make, 3), "hostile": (hostile, 2), "dcp_metadata": (dcp_metadata, 2), "same": (same, None)}
    if len(argv) < 2 or argv[1] not in cmds or (len(argv) - 2 != cmds[argv[1]][1] and argv[1] != "same"):
        sys.exit(__doc__)
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
