"""What a store shows, recorded and compared (tests/integration/reindex.sh).

  reindex_check.py record STORE MNT OUT
      writes OUT (JSON): `ckptctl ls --json` of the store, of every series and
      of every checkpoint, `ckptctl show --json` of every file (or its exit
      status and message when it cannot be served), and the SHA-256 of every
      file read through MNT (a read-only mount of STORE) with the listing of
      every directory.
  reindex_check.py same BEFORE AFTER
      AFTER holds exactly what BEFORE does, ids aside.
  reindex_check.py without BEFORE AFTER SERIES/CKPT...
      AFTER holds what BEFORE does for every other checkpoint, and nothing of
      the ones named.

ckptctl is $CKPTCTL.  Every failure exits 1 with what differed.
"""

import hashlib
import json
import os
import subprocess
import sys


def ckptctl(*args):
    p = subprocess.run([os.environ["CKPTCTL"], *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def ls_json(*args):
    rc, out, err = ckptctl("ls", *args, "--json")
    if rc != 0:
        sys.exit("FAIL: ckptctl ls %s exited %d: %s" % (" ".join(args), rc, err))
    return json.loads(out)


def sha256(path):
    """The file's SHA-256, or the error reading it gives (a refused file)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        return "error: " + os.strerror(e.errno)
    return h.hexdigest()


def record(store, mnt, out):
    rec = {"ls": ls_json(store)}
    for series in rec["ls"]["series"]:
        name = series["name"]
        rec["ls " + name] = ls_json(store, name)
        for ck in rec["ls " + name]["checkpoints"]:
            where = "%s/%s" % (name, ck["name"])
            rec["ls " + where] = ls_json(store, where)
            for f in rec["ls " + where]["files"]:
                rc, text, err = ckptctl("show", store, where, f["path"], "--json")
                rec["show %s %s" % (where, f["path"])] = (
                    json.loads(text) if rc == 0 else {"exit": rc, "stderr": err})
    for root, dirs, files in os.walk(mnt):
        rel = os.path.relpath(root, mnt)
        rec["dir " + rel] = sorted(dirs + files)
        for name in files:
            rec["bytes " + os.path.normpath(os.path.join(rel, name))] = sha256(os.path.join(root, name))
    with open(out, "w") as f:
        json.dump(rec, f, indent=1, sort_keys=True)
    print("recorded %d checkpoints, %d files read through the mount"
          % (sum(1 for k in rec if k.startswith("ls ") and "/" in k),
             sum(1 for k in rec if k.startswith("bytes "))))


def without_ids(v):
    """Ids may change on reindex: drop any "id" or "*_id" key."""
    if isinstance(v, dict):
        return {k: without_ids(x) for k, x in v.items() if k != "id" and not k.endswith("_id")}
    if isinstance(v, list):
        return [without_ids(x) for x in v]
    return v


def load(path):
    with open(path) as f:
        return without_ids(json.load(f))


def compare(want, got):
    bad = [k for k in sorted(set(want) | set(got)) if want.get(k) != got.get(k)]
    for k in bad[:10]:
        print("differs: %s\n  before: %s\n  after:  %s"
              % (k, json.dumps(want.get(k))[:300], json.dumps(got.get(k))[:300]))
    if bad:
        sys.exit("FAIL: %d of %d records differ" % (len(bad), len(want)))
    print("%d records identical" % len(want))


def about(key, ckpt):
    """Whether record key is about checkpoint SERIES/CKPT."""
    words = key.split(" ", 1)
    if len(words) < 2:
        return False
    what = words[1]
    return what == ckpt or what.startswith(ckpt + " ") or what.startswith(ckpt + "/")


def without(before, after, gone):
    want = {k: v for k, v in before.items() if not any(about(k, c) for c in gone)}
    for series in {c.split("/")[0] for c in gone}:
        names = {c.split("/", 1)[1] for c in gone if c.startswith(series + "/")}
        want["ls " + series]["checkpoints"] = [
            c for c in want["ls " + series]["checkpoints"] if c["name"] not in names]
        want["dir " + series] = [n for n in want["dir " + series] if n not in names]
    # The series summary (counts, step range) follows from the rest.
    want.pop("ls")
    got = dict(after)
    got.pop("ls")
    compare(want, got)


def main(argv):
    if len(argv) >= 5 and argv[1] == "record":
        record(argv[2], argv[3], argv[4])
    elif len(argv) == 4 and argv[1] == "same":
        compare(load(argv[2]), load(argv[3]))
    elif len(argv) >= 5 and argv[1] == "without":
        without(load(argv[2]), load(argv[3]), argv[4:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
