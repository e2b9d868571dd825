#!/bin/sh
# A checkpoint committed by its marker never vanishes from the mount, nor
# shows twice, on its way from the in-progress area into the store: a
# reader polling its name (a trainer deciding what to resume from) sees it
# as a directory from its mkdir on, through the commit, until it carries
# user.ckptfs.step, and every listing of the series shows it exactly once.
# (A rename commit needs no such test: the kernel holds the directory's
# lock through the rename, so no lookup or listing runs during it.)
# Between the move into the store and the view catching up, neither side
# showed it: a lookup then got ENOENT and a listing (the view's part read
# before the commit, the in-progress part after it) left it out
# (example_resume.sh once resumed from an older checkpoint, and once found
# a checkpoint missing from `ls`).  Commits run with a build in the daemon
# under way (a refresh warm-up and a reader building composites) to widen
# that window.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
"$CKPTCTL" init "$tmp/store" >/dev/null
ck_mount "$tmp/store" "$tmp/mnt" -o marker_grace=0,refresh=1,compact=0

"$TORCH_PYTHON" - "$tmp/mnt" <<'PY' || fail "a committing checkpoint vanished"
import os, sys, threading, time
import torch

mnt = sys.argv[1]
series = os.path.join(mnt, "run")
os.mkdir(series)
g = torch.Generator().manual_seed(3)
state = {"layers.%d.weight" % i: torch.randn(512, 512, generator=g) for i in range(8)}

def committed(path):
    try:
        os.getxattr(path, "user.ckptfs.step")
        return True
    except OSError:
        return False

def reader_loop(stop):
    """A reader of the checkpoints already committed (an evaluator): their
    composites are built while the commits run.  Paced: the daemon forks
    its commit child, and under AddressSanitizer (whose allocator has no
    fork handlers) a request allocating at that instant can hang the
    child, a hazard of the sanitizer build alone."""
    while not stop.wait(0.02):
        for name in sorted(os.listdir(series)):
            p = os.path.join(series, name, "model.pt")
            if committed(os.path.dirname(p)):
                os.stat(p)

def listing_failures(names, want):
    """What is wrong with a listing of the series: every name in want
    exactly once."""
    bad = ["%s listed %d times" % (n, names.count(n)) for n in set(names) if names.count(n) > 1]
    return bad + ["%s missing from the listing %s" % (n, sorted(names)) for n in want if n not in names]

stop = threading.Event()
reader = threading.Thread(target=reader_loop, args=(stop,))
reader.start()
failures = []
listings = 0
try:
    for step in range(1, 9):
        ckpt = os.path.join(series, "checkpoint-%d" % step)
        os.mkdir(ckpt)
        torch.save({k: v + step for k, v in state.items()}, os.path.join(ckpt, "model.pt"))
        with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
            f.write('{"global_step": %d}' % step)
        want = ["checkpoint-%d" % s for s in range(1, step + 1)]
        deadline = time.monotonic() + 20
        while not committed(ckpt):
            time.sleep(0.001)
            try:
                os.stat(ckpt)
            except OSError as e:
                failures.append("checkpoint-%d missing during its commit: %s" % (step, e))
                break
            failures += listing_failures(os.listdir(series), want)
            listings += 1
            if failures:
                break
            if time.monotonic() > deadline:
                failures.append("checkpoint-%d not committed within 20 s" % step)
                break
        if failures:
            break
finally:
    stop.set()
    reader.join()
if failures:
    sys.exit("; ".join(failures[:5]))
print("8 marker commits, never missing; %d listings during them, each right" % listings)

PY
ck_umount "$tmp/mnt"
echo "ok"
