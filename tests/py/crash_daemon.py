"""Trainer-side steps of tests/integration/crash_daemon.sh.

  crash_daemon.py save DIR SEED MIB [PAUSE_AT GO_FILE]
      an HF-Trainer-like save into DIR (made if needed): model.pt, a
      state dict of MIB MiB seeded by SEED, by torch.save, then the
      completion marker trainer_state.json.  With PAUSE_AT (a fraction
      of model.pt's size), the save stops once that part of model.pt
      has been written, prints "paused", and goes on when GO_FILE
      exists: the daemon can be killed while a save is surely under way.
  crash_daemon.py torn DIR
      DIR is an in-progress directory holding a torn file: committing it
      (setxattr user.ckptfs.commit) fails with EIO and it leaves the
      listing (quarantined).
"""

import errno
import os
import sys
import time

import torch

from crash_common import hf_marker, in_progress, model_state


class PauseAt:
    """A file object for torch.save that waits for go_file once limit
    bytes have gone to the file."""

    def __init__(self, f, limit, go_file):
        self.f, self.limit, self.go_file, self.done = f, limit, go_file, 0

    def write(self, b):
        b = memoryview(b).cast("B")
        n = len(b)
        if self.done < self.limit <= self.done + n:
            head = self.limit - self.done
            self.f.write(b[:head])
            self.f.flush()
            print("paused at %d bytes" % self.limit, flush=True)
            while not os.path.exists(self.go_file):
                time.sleep(0.01)
            b = b[head:]
        self.f.write(b)
        self.done += n
        return n

    def flush(self):
        self.f.flush()


def save(d, seed, mib, pause_at=None, go_file=None):
    state = model_state(seed, float(mib))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.pt"), "wb") as f:
        if pause_at is not None:
            # The file is a little larger than its tensors: MIB MiB.
            limit = int(float(pause_at) * float(mib) * (1 << 20))
            torch.save(state, PauseAt(f, limit, go_file))
        else:
            torch.save(state, f)
    with open(os.path.join(d, "trainer_state.json"), "wb") as f:
        f.write(hf_marker(seed))
    print("saved %s" % d)


def torn(d):
    if not in_progress(d):
        sys.exit("%s is not in progress" % d)
    try:
        os.setxattr(d, "user.ckptfs.commit", b"1")
    except OSError as e:
        if e.errno != errno.EIO:
            sys.exit("commit of torn %s: %s, expected EIO" % (d, e))
    else:
        sys.exit("a torn directory was committed: %s" % d)
    if os.path.basename(d) in os.listdir(os.path.dirname(d)):
        sys.exit("%s still listed after a refused commit" % d)
    print("%s refused (EIO) and set aside" % d)


if __name__ == "__main__":
    cmds = {"save": (save, (3, 5)), "torn": (torn, (1,))}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 not in cmds[sys.argv[1]][1]:
        sys.exit(__doc__)
    cmds[sys.argv[1]][0](*sys.argv[2:])
