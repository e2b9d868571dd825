"""Checks of tests/integration/python_pkg.sh: the ckptfs Python package
against a real mount.  Several run in one process when joined by "+".

  resume STORE SERIES MNT
      ckptfs.resume_info() is `ckptctl resume-info --json`'s answer, with
      and without --mount; None for a series with nothing to resume from;
      CkptctlError (exit 1) for a directory that is no store;
      settled_resume_info() returns at once with no save in progress.
  settle STORE SERIES QUIET
      settled_resume_info() with a save in progress that never commits:
      the answer names it, and comes once it held still QUIET seconds.
  flag SERIES_DIR QUIET_DIR
      the emergency flag is up in SERIES_DIR (a real flag, raised by the
      daemon): emergency_flag_up() gives its reason, none in QUIET_DIR;
      EmergencyWatch.check() sees it until answered(); save_requested()
      returns it once and logs the step.
  callback SERIES_DIR
      ckptfs.hf.EmergencyCallback, with the flag up: should_save in the
      first step, not in the next (the same flag), through the Trainer's
      output_dir.  Run under transformers' own TrainerCallback when it
      imports; else under a stand-in base class of this file, so that the
      callback's own code runs here too.
  trainer SERIES_DIR
      the transformers Trainer (clients_check's tiny Llama) with
      EmergencyCallback, writing into SERIES_DIR with the flag up: it saves
      checkpoint-1 at once (its regular saves come every 5 steps), ckptfs
      commits it and the flag goes.  "absent: ..." without transformers.
  committed SERIES_DIR CKPT_NAME PENDING_NAME OUTSIDE
      is_committed(), wait_committed() and in_mount() on a committed
      checkpoint, one in progress, and a plain directory.
  noflag SERIES_DIR
      emergency_flag_up() is None (the emergency checkpoint committed).
  locate EXPECTED_CKPTCTL
      ckptctl_path() is EXPECTED_CKPTCTL ($CKPTCTL unset by the caller).
  native LIBRARY
      _native.load() loads $CKPTFS_PY_LIB; None for a missing file.
  installed TARGET_DIR
      the package is imported from TARGET_DIR (pip install --target), not
      from a source tree, and its version is ckptctl's.
"""

import json
import os
import subprocess
import sys
import time
import types

import ckptfs
from ckptfs import _locate, _native


def ckptctl_json(*args):
    return json.loads(subprocess.run([ckptfs.ckptctl_path()] + list(args), check=True,
                                     capture_output=True, text=True).stdout)


def expect(cond, what):
    if not cond:
        sys.exit("FAIL: " + what)


def resume(store, series, mnt):
    got = ckptfs.resume_info(store, series)
    want = ckptctl_json("resume-info", store, series, "--json")
    expect(got == want, "resume_info %s != ckptctl's %s" % (got, want))
    expect(got["path"] == os.path.join(mnt, series, got["checkpoint"]), "resume_info path: %s" % got)
    elsewhere = ckptfs.resume_info(store, series, mount="/elsewhere")
    want = ckptctl_json("resume-info", store, series, "--json", "--mount", "/elsewhere")
    expect(elsewhere == want and elsewhere["path"].startswith("/elsewhere/"),
           "resume_info(mount=) %s != ckptctl's %s" % (elsewhere, want))
    expect(ckptfs.resume_info(store, "nosuch") is None, "resume_info of a series that does not exist")
    try:
        ckptfs.resume_info(os.path.dirname(store) + "/not-a-store", series)
        sys.exit("FAIL: resume_info of no store raised nothing")
    except ckptfs.CkptctlError as e:
        expect(e.returncode == 1 and e.stderr, "resume_info of no store: %r" % e)
        print("no store: %s" % e)
    t0 = time.monotonic()
    settled = ckptfs.settled_resume_info(store, series, settle=10, quiet=5)
    expect(settled == got, "settled_resume_info %s != %s" % (settled, got))
    expect(time.monotonic() - t0 < 2, "settled_resume_info waited with nothing in progress")
    print("resume_info: %s step %d at %s, %d files" % (got["checkpoint"], got["step"], got["path"], len(got["files"])))


def settle(store, series, quiet):
    quiet = float(quiet)
    t0 = time.monotonic()
    info = ckptfs.settled_resume_info(store, series, settle=30, quiet=quiet)
    waited = time.monotonic() - t0
    expect(info and info["in_progress"], "settled_resume_info does not list the save in progress: %s" % info)
    expect(quiet <= waited < 30, "settled_resume_info waited %.1f s, quiet %.1f" % (waited, quiet))
    print("settled_resume_info: %s, in progress %s, after %.1f s" % (info["checkpoint"], info["in_progress"], waited))


def flag(series_dir, quiet_dir):
    reason = ckptfs.emergency_flag_up(series_dir)
    expect(reason and reason.get("score") == 0.25 and reason["factors"]["errors"] == 1, "flag reason: %s" % reason)
    expect(ckptfs.emergency_flag_up(quiet_dir) is None, "a flag in %s" % quiet_dir)
    watch = ckptfs.EmergencyWatch(series_dir)
    expect(watch.check() == reason and watch.check() == reason, "check() before answered()")
    expect(watch.answered(reason) is False, "answered() without a checkpoint waited for one")
    expect(watch.check() is None, "check() after answered()")
    lines = []
    other = ckptfs.EmergencyWatch(series_dir)
    expect(other.save_requested(17, lines.append) == reason, "save_requested() with the flag up")
    expect(other.save_requested(18, lines.append) is None, "save_requested() again for the same flag")
    expect(len(lines) == 1 and "emergency save at step 17" in lines[0] and "risk 0.250" in lines[0],
           "save_requested() logged %s" % lines)
    expect(other.parts() is None, "parts() without partial= is not a full save")
    print("flag: %s; logged %r" % (reason, lines[0]))


class _StandIn:
    """transformers' TrainerCallback where transformers is not installed:
    the callback derives from it and is called as the Trainer calls it."""

    class TrainerCallback:
        pass


def callback(series_dir):
    try:
        import transformers  # noqa: F401
        under = "transformers %s" % transformers.__version__
    except ImportError:
        stand_in = types.ModuleType("transformers")
        stand_in.TrainerCallback = _StandIn.TrainerCallback
        sys.modules["transformers"] = stand_in
        under = "a stand-in TrainerCallback (no transformers here)"
    from ckptfs.hf import EmergencyCallback
    lines = []
    cb = EmergencyCallback(log=lines.append)
    args = types.SimpleNamespace(output_dir=series_dir)
    control = types.SimpleNamespace(should_save=False)
    for step in (3, 4):
        control.should_save = False
        out = cb.on_step_end(args, types.SimpleNamespace(global_step=step), control)
        expect(out is control, "on_step_end returns the control")
        expect(control.should_save == (step == 3), "step %d: should_save %s" % (step, control.should_save))
    expect(len(lines) == 1 and "at step 3" in lines[0], "callback logged %s" % lines)
    print("EmergencyCallback under %s: saves at step 3, not again at 4" % under)


def trainer(series_dir):
    try:
        from ckptfs.hf import EmergencyCallback
        import clients_check
    except ImportError as e:
        print("absent: the transformers Trainer with EmergencyCallback (%s)" % e)
        return
    expect(ckptfs.emergency_flag_up(series_dir), "no flag in %s before the Trainer" % series_dir)
    lines = []
    if not clients_check.hf_trainer(series_dir, 3, [EmergencyCallback(log=lines.append)]):
        return
    saved = sorted(n for n in os.listdir(series_dir) if n.startswith("checkpoint-"))
    expect(saved == ["checkpoint-1"], "the Trainer saved %s, not checkpoint-1 alone" % saved)
    ckpt = os.path.join(series_dir, "checkpoint-1")
    expect(ckptfs.wait_committed(ckpt, 30), "%s never committed" % ckpt)
    expect(ckptfs.emergency_flag_up(series_dir) is None, "the flag stayed after %s committed" % ckpt)
    expect(len(lines) == 1 and "at step 1" in lines[0], "the callback logged %s" % lines)
    print("transformers Trainer with EmergencyCallback: %s; checkpoint-1 committed, the flag gone" % lines[0])


def committed(series_dir, name, pending, outside):
    ckpt, todo = os.path.join(series_dir, name), os.path.join(series_dir, pending)
    expect(ckptfs.is_committed(ckpt) and ckptfs.wait_committed(ckpt, 1), "%s not committed" % ckpt)
    expect(not ckptfs.is_committed(todo), "%s (in progress) committed" % todo)
    t0 = time.monotonic()
    expect(not ckptfs.wait_committed(todo, 0.5) and time.monotonic() - t0 >= 0.5, "wait_committed() of %s" % todo)
    expect(ckptfs.in_mount(ckpt) and ckptfs.in_mount(series_dir), "in_mount(%s)" % ckpt)
    expect(not ckptfs.in_mount(outside) and not ckptfs.is_committed(outside), "in_mount(%s)" % outside)
    print("committed: %s yes, %s no; in_mount: mount yes, %s no" % (name, pending, outside))


def noflag(series_dir):
    expect(ckptfs.emergency_flag_up(series_dir) is None, "the flag stayed in %s" % series_dir)
    print("no flag in %s" % series_dir)


def locate(expected):
    expect("CKPTCTL" not in os.environ, "$CKPTCTL is set")
    found = ckptfs.ckptctl_path()
    expect(os.path.realpath(found) == os.path.realpath(expected), "ckptctl_path() %s, expected %s" % (found, expected))
    print("ckptctl_path(): %s" % found)


def native(library):
    os.environ[_native.ENV_VAR] = library
    lib = _native.load()
    expect(lib is not None and lib._name == library, "_native.load() of %s: %s" % (library, lib))
    os.environ[_native.ENV_VAR] = library + ".missing"
    expect(_native.path() is None, "_native.path() of a missing file")
    print("_native: loaded %s" % library)


def installed(target):
    expect(os.path.dirname(os.path.dirname(ckptfs.__file__)) == target, "imported from %s" % ckptfs.__file__)
    expect(_locate.source_tree() is None, "an installed package found a source tree")
    version = subprocess.run([ckptfs.ckptctl_path(), "--version"], check=True, capture_output=True,
                             text=True).stdout.split()[-1]
    expect(ckptfs.__version__ == version, "ckptfs.__version__ %s, ckptctl %s" % (ckptfs.__version__, version))
    print("installed in %s, version %s" % (target, version))


CHECKS = {"resume": resume, "settle": settle, "flag": flag, "callback": callback, "trainer": trainer,
          "committed": committed,
          "noflag": noflag, "locate": locate, "native": native, "installed": installed}

if __name__ == "__main__":
    argv = sys.argv[1:]
    while argv:
        cut = argv.index("+") if "+" in argv else len(argv)
        CHECKS[argv[0]](*argv[1:cut])
        argv = argv[cut + 1:]
