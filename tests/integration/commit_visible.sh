#!/bin/sh
# A checkpoint committed by its marker never vanishes from the mount on
# its way from the in-progress area into the store: a reader polling its
# name (a trainer deciding what to resume from) sees it as a directory from
# its mkdir on, through the commit, until it carries user.ckptfs.step.
# Between the move into the store and the view catching up, neither side
# showed it, and a lookup then got ENOENT (example_resume.sh once resumed
# from an older checkpoint because of that); such a lookup now waits for
# the commit.  Commits run with a build in the daemon under way (a refresh
# warm-up and a reader building composites) to widen that window.
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

stop = threading.Event()
reader = threading.Thread(target=reader_loop, args=(stop,))
reader.start()
failures = []
try:
    for step in range(1, 9):
        ckpt = os.path.join(series, "checkpoint-%d" % step)
        os.mkdir(ckpt)
        torch.save({k: v + step for k, v in state.items()}, os.path.join(ckpt, "model.pt"))
        with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
            f.write('{"global_step": %d}' % step)
        deadline = time.monotonic() + 20
        while not committed(ckpt):
            time.sleep(0.001)
            try:
                os.stat(ckpt)
            except OSError as e:
                failures.append("checkpoint-%d missing during its commit: %s" % (step, e))
                break
            if time.monotonic() > deadline:
                failures.append("checkpoint-%d not committed within 20 s" % step)
                break
finally:
    stop.set()
    reader.join()
if failures:
    sys.exit("; ".join(failures))
print("8 commits, never missing")
PY
ck_umount "$tmp/mnt"
echo "ok"
