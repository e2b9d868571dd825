"""Trainer-side steps of tests/integration/delete_ckpt.sh (torch 1.13).

  save SERIES_DIR NAME PLAIN_DIR STEP full|odd|even [config]
      an HF-like checkpoint: pytorch_model.bin (all blocks, or only the odd
      or even ones), optimizer.pt (Adam state of those parameters),
      scheduler.pt and trainer_state.json (whole, every save) and, with
      "config", config.json; written through the mount into
      SERIES_DIR/tmp-NAME/ (for the caller to commit by rename) and into
      PLAIN_DIR/NAME/ on a plain filesystem (for the offline merge).
  same SERVED_DIR MERGED_DIR
      the same file names, torch files loading bit-exactly as the offline
      merge (with the same key order), other files byte for byte.
  rmtree CKPT_DIR
      shutil.rmtree, as the HF Trainer's save_total_limit rotation does;
      then the directory is neither listed nor found (ENOENT).
  erofs CKPT_DIR
      unlink of a file and rmdir of the directory fail with EROFS.
"""

import errno
import filecmp
import json
import os
import shutil
import sys

import torch

from deepcompare import assert_loads_same

BLOCKS = 6


def save(series_dir, name, plain_dir, step, which, *extra):
    step = int(step)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(BLOCKS)])
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    torch.manual_seed(step)
    for _ in range(2):
        opt.zero_grad()
        model(torch.randn(4, 8)).square().sum().backward()
        opt.step()
    keep = {"full": range(BLOCKS), "odd": range(1, BLOCKS, 2), "even": range(0, BLOCKS, 2)}[which]
    prefixes = tuple("%d." % i for i in keep)
    sd = model.state_dict()
    sd = type(sd)((k, v) for k, v in sd.items() if k.startswith(prefixes))
    osd = opt.state_dict()
    ids = [i for i, (k, _) in enumerate(model.named_parameters()) if k.startswith(prefixes)]
    osd = {"state": {i: osd["state"][i] for i in ids},
           "param_groups": [dict(osd["param_groups"][0], params=ids)]}
    for d in (os.path.join(series_dir, "tmp-" + name), os.path.join(plain_dir, name)):
        os.makedirs(d, exist_ok=True)
        torch.save(sd, os.path.join(d, "pytorch_model.bin"))
        torch.save(osd, os.path.join(d, "optimizer.pt"))
        torch.save({"last_epoch": step, "base_lrs": [0.01]}, os.path.join(d, "scheduler.pt"))
        with open(os.path.join(d, "trainer_state.json"), "w") as f:
            json.dump({"global_step": step}, f)
        if "config" in extra:
            with open(os.path.join(d, "config.json"), "w") as f:
                json.dump({"n_layer": BLOCKS}, f)
    print("saved %s (%s): %d tensors" % (name, which, len(sd)))


def _keys(obj):
    """Key order of the dicts of a loaded state, recursively."""
    if isinstance(obj, dict):
        return [(k, _keys(v)) for k, v in obj.items()]
    return None


def same(served_dir, merged_dir):
    names = sorted(os.listdir(merged_dir))
    if sorted(os.listdir(served_dir)) != names:
        sys.exit("served files %s, merged %s" % (sorted(os.listdir(served_dir)), names))
    for n in names:
        s, m = os.path.join(served_dir, n), os.path.join(merged_dir, n)
        if n.endswith((".bin", ".pt")):
            assert_loads_same(s, m, n)
            if _keys(torch.load(s)) != _keys(torch.load(m)):
                sys.exit("%s: key order differs from the offline merge" % s)
        elif not filecmp.cmp(s, m, shallow=False):
            sys.exit("%s: bytes differ from %s" % (s, m))
    print("%s: %d files load bit-exactly as the offline merge" % (served_dir, len(names)))


def rmtree(ckpt_dir):
    shutil.rmtree(ckpt_dir)
    series, name = os.path.split(ckpt_dir)
    if name in os.listdir(series):
        sys.exit("%s: still listed after rmtree" % ckpt_dir)
    try:
        os.stat(ckpt_dir)
    except FileNotFoundError:
        print("%s: deleted" % ckpt_dir)
        return
    sys.exit("%s: still found after rmtree" % ckpt_dir)


def _expect(what, fn, want):
    try:
        fn()
    except OSError as e:
        if e.errno != want:
            sys.exit("%s: %s, expected %s" % (what, e, errno.errorcode[want]))
        return
    sys.exit("%s: succeeded, expected %s" % (what, errno.errorcode[want]))


def erofs(ckpt_dir):
    f = os.path.join(ckpt_dir, sorted(os.listdir(ckpt_dir))[0])
    _expect("unlink " + f, lambda: os.unlink(f), errno.EROFS)
    _expect("rmdir " + ckpt_dir, lambda: os.rmdir(ckpt_dir), errno.EROFS)
    _expect("rmtree " + ckpt_dir, lambda: shutil.rmtree(ckpt_dir), errno.EROFS)
    print("%s: EROFS for unlink and rmdir" % ckpt_dir)


def main(argv):
    cmds = {"save": save, "same": same, "rmtree": rmtree, "erofs": erofs}
    if len(argv) < 3 or argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[argv[1]](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
