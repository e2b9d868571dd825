"""A save that does not fit in the store (tests/integration/enospc.sh).

  crash_enospc.py MNT STORE DAEMON_PID

STORE (on a 24 MiB tmpfs) is mounted writable on MNT.  An HF-like save
(model.pt by torch.save, then trainer_state.json) commits checkpoint-10
(1 MiB).  A save of 40 MiB into checkpoint-20 then runs out of space: the
writer gets ENOSPC (OSError errno 28, which torch 1.13 wraps in the
RuntimeError of its zip writer), checkpoint-20 is not committed and shows
in progress, the daemon is alive, checkpoint-10 loads exactly.  Committing
checkpoint-20 anyway (user.ckptfs.commit) fails and commits nothing.  Once
the failed directory is gone (rm -r through the mount, or, when that
commit set it aside, from STORE/quarantine as an operator would), a small
save commits again and loads exactly.
"""

import errno
import glob
import os
import shutil
import sys
import traceback

import torch

from crash_common import (assert_same_bytes, assert_same_obj, committed, daemon_alive, hf_marker,
                          in_progress, model_state, wait_committed)


def errnos(e):
    """The errnos of an exception and of those it was raised from or in."""
    seen = []
    while e is not None and e not in seen:
        seen.append(e)
        e = e.__cause__ or e.__context__
    return [x.errno for x in seen if isinstance(x, OSError)]


def save(d, seed, mib, marker=True):
    """In a forked child: torch.save through a Python file object (where
    the errno reaches Python), then the marker.  The child's exit status:
    0, or the errno the save failed with (1 if none).  os._exit before the
    exception is dropped: torch 1.13's zip writer aborts the process when
    it is destroyed after a failed write."""
    state = model_state(seed, mib)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "model.pt"), "wb") as f:
                torch.save(state, f)
            if marker:
                with open(os.path.join(d, "trainer_state.json"), "wb") as f:
                    f.write(hf_marker(seed))
            code = 0
        except BaseException as e:
            nos = errnos(e)
            code = nos[0] if nos else 1
            print("writer: %s%s" % (type(e).__name__, " (errno %s)" % nos if nos else ""), flush=True)
            if not nos:
                traceback.print_exc()
            os._exit(code)  # here, while e (and torch's writer) is alive
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if not os.WIFEXITED(status):
        sys.exit("the writer of %s died (status %#x)" % (d, status))
    return state, os.WEXITSTATUS(status)


def check_ck10(run, state10, daemon_pid):
    if not daemon_alive(daemon_pid):
        sys.exit("the daemon died")
    assert_same_obj(os.path.join(run, "checkpoint-10", "model.pt"), state10, "checkpoint-10/model.pt")


def main(mnt, store, daemon_pid):
    run = os.path.join(mnt, "run")
    d10, d20, d30 = (os.path.join(run, "checkpoint-%d" % s) for s in (10, 20, 30))

    state10, rc = save(d10, 10, 1)
    if rc:
        sys.exit("the save of checkpoint-10 failed: errno %d" % rc)
    wait_committed(store, "run", "checkpoint-10")
    check_ck10(run, state10, daemon_pid)
    print("checkpoint-10 committed; %d KiB free" % (os.statvfs(mnt).f_bavail * os.statvfs(mnt).f_frsize // 1024))

    _, rc = save(d20, 20, 40)
    if rc != errno.ENOSPC:
        sys.exit("a save larger than the store ended with errno %d, not ENOSPC" % rc)
    print("the save of checkpoint-20 failed with ENOSPC")
    if "checkpoint-20" in committed(store, "run"):
        sys.exit("the torn checkpoint-20 was committed")
    if not in_progress(d20):
        sys.exit("checkpoint-20 is not shown in progress")
    check_ck10(run, state10, daemon_pid)

    try:
        os.setxattr(d20, "user.ckptfs.commit", b"1")
    except OSError as e:
        print("committing the torn checkpoint-20 anyway: %s" % e)
    else:
        sys.exit("the torn checkpoint-20 was committed by setxattr")
    if "checkpoint-20" in committed(store, "run"):
        sys.exit("the torn checkpoint-20 is listed as committed")
    check_ck10(run, state10, daemon_pid)

    # Away with the failed directory: in progress still, or set aside.
    if os.path.exists(d20):
        shutil.rmtree(d20)
    aside = glob.glob(os.path.join(store, "quarantine", "run", "checkpoint-20.*"))
    for q in aside:
        shutil.rmtree(q)
    print("removed checkpoint-20%s" % (" (from the quarantine)" if aside else " (through the mount)"))
    if "checkpoint-20" in os.listdir(run):
        sys.exit("checkpoint-20 is still listed")

    state30, rc = save(d30, 30, 1)
    if rc:
        sys.exit("the save of checkpoint-30 after freeing space failed: errno %d" % rc)
    wait_committed(store, "run", "checkpoint-30")
    assert_same_obj(os.path.join(d30, "model.pt"), state30, "checkpoint-30/model.pt")
    assert_same_bytes(os.path.join(d30, "trainer_state.json"), hf_marker(30), "checkpoint-30/trainer_state.json")
    check_ck10(run, state10, daemon_pid)
    if committed(store, "run") != ["checkpoint-10", "checkpoint-30"]:
        sys.exit("committed: %s" % committed(store, "run"))
    print("checkpoint-30 committed after the space was freed")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
