"""packs_load.py MNT SERIES ORIG: torch.load every checkpoint of SERIES
through the mount MNT and compare it, bit for bit (tests/py/deepcompare.py),
with the original it was committed from, ORIG/<checkpoint>/.  Also reads
every served file whole and compares its bytes.  Prints one line per
checkpoint; exits 1 on the first difference."""
import os
import sys

from deepcompare import assert_loads_same


def main():
    mnt, series, orig = sys.argv[1:4]
    names = sorted(os.listdir(os.path.join(mnt, series)), key=lambda n: int(n.split("-")[-1]))
    want = sorted(os.listdir(orig), key=lambda n: int(n.split("-")[-1]))
    if names != want:
        sys.exit("the mount lists %s, committed were %s" % (names, want))
    for name in names:
        for f in sorted(os.listdir(os.path.join(orig, name))):
            served, original = os.path.join(mnt, series, name, f), os.path.join(orig, name, f)
            with open(served, "rb") as a, open(original, "rb") as b:
                if a.read() != b.read():
                    sys.exit("%s: bytes differ from %s" % (served, original))
            if f.endswith(".pt"):
                assert_loads_same(served, original, served)
        print("%s/%s: loads the same as committed" % (series, name))


if __name__ == "__main__":
    main()
