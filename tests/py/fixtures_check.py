"""Real fixtures through a ckptfs mount (tests/integration/fixtures_roundtrip.sh).

  fixtures_check.py torch ORIG_DIR MNT_SERIES IMPORT_STDERR
      every zip-format torch.save fixture loads through the mount exactly as
      from the original file; the legacy (non-zip) ones and the broken one
      were refused by the import with a reason, and are not served.
  fixtures_check.py safetensors ORIG_DIR MNT_SERIES
      every safetensors fixture passes the validating reader through the
      mount, holds the original tensors, and is laid out like the reference
      writer (the fixtures were written by it, so: the same bytes).
"""

import fnmatch
import os
import sys

import torch

import deepcompare
import mountcheck
import safetensors_ref

LEGACY = "burn_reader_*legacy*.pt"
BROKEN = "burn_reader_broken.pt"


def check_torch(orig, mnt_series, stderr_path):
    with open(stderr_path) as f:
        stderr = f.read()
    ckpt = mountcheck.sole_checkpoint(mnt_series)
    loaded = tensors = 0
    for name in sorted(os.listdir(orig)):
        src, served = os.path.join(orig, name), os.path.join(ckpt, name)
        if fnmatch.fnmatch(name, LEGACY) or name == BROKEN:
            reason = "legacy" if name != BROKEN else None
            line = mountcheck.assert_reported(stderr, name, reason)
            how = mountcheck.assert_not_served(served, src)
            print("  refused %-44s %s | %s" % (name, how, line[-80:]))
            continue
        deepcompare.assert_loads_same(served, src, name + " through the mount")
        loaded += 1
        tensors += deepcompare.count_tensors(torch.load(src, map_location="cpu"))
    # 57 fixtures: 4 legacy, 1 broken; the rest must all have been compared.
    if loaded < 50:
        raise AssertionError("only %d zip-format fixtures compared" % loaded)
    print("%d torch.save fixtures (%d tensors) load through the mount as from the originals"
          % (loaded, tensors))


def check_safetensors(orig, mnt_series):
    ckpt = mountcheck.sole_checkpoint(mnt_series)
    names = sorted(os.listdir(orig))
    for name in names:
        served = mountcheck.read_all(os.path.join(ckpt, name))
        if mountcheck.read_mmapped(os.path.join(ckpt, name)) != served:
            raise AssertionError(name + ": mmap and read of the mounted file differ")
        original = mountcheck.read_all(os.path.join(orig, name))
        meta, tensors = safetensors_ref.loads(served)
        want_meta, want = safetensors_ref.loads(original)
        deepcompare.assert_same((meta, tensors), (want_meta, want), name + " through the mount")
        if served != safetensors_ref.dumps(want, want_meta):
            raise AssertionError(name + ": not laid out like the reference writer")
        print("  %-32s %3d tensors, valid, equal" % (name, len(tensors)))
    if len(names) < 3:
        raise AssertionError("only %d safetensors fixtures" % len(names))


def main(argv):
    if len(argv) == 5 and argv[1] == "torch":
        check_torch(*argv[2:])
    elif len(argv) == 4 and argv[1] == "safetensors":
        check_safetensors(*argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
