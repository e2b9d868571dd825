#!/usr/bin/python3
"""Restart a trainer that died, from the newest checkpoint the mount serves.

The master node of "Proactive Fault Tolerance System for Megatron-LM
Training" (Ashfaq et al.) in small: it runs the training command; when the
trainer dies (killed, or exits non-zero: a GPU failure takes the process
with it), it asks ckptfs where to resume,

    ckptfs.settled_resume_info(STORE, SERIES)    # ckptctl resume-info STORE SERIES --json

(the newest committed checkpoint whose every file the mount serves, and its
path in the mount, once saves still being committed have settled), and
starts the command again with the resume arguments filled in.

    supervisor.py --store /data/store --series run \\
        --resume-arg=--resume-from --resume-arg={path} \\
        -- python3 llmtailor_train.py --out /mnt/ckpt/run --emergency

Placeholders in --resume-arg: {path} (the checkpoint in the mount), {step},
{checkpoint}; with --heads, also {tp}, {pp} and {dp}: the paper's plan for
the GPUs left (parallel_plan.py), counted from --gpus or from the GPUs that
still read well in MNT/.ckptfs/health.json.  Without a checkpoint to resume
from (resume-info exits 4) the command starts from scratch.
"""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parallel_plan import plan   # noqa: E402

try:
    import ckptfs
except ImportError:
    sys.exit("%s needs the ckptfs Python package: install ckptfs, or run from a source tree with "
             "PYTHONPATH=python" % os.path.basename(sys.argv[0]))


def gpus_left(mount):
    """GPUs that read well in the mount's health.json, or None."""
    try:
        with open(os.path.join(mount, ".ckptfs", "health.json")) as f:
            health = json.load(f)
    except (OSError, ValueError):
        return None
    gpus = [g for g in health.get("gpus", []) if g.get("error") is None]
    return len(gpus) or None


def fill(template, values):
    return [a.format(**values) for a in template]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--store", required=True)
    p.add_argument("--series", required=True)
    p.add_argument("--mount", help="the mount (default: the store's writable mount)")
    p.add_argument("--ckptctl", help="ckptctl to run (default: $CKPTCTL, the source tree's, or PATH's)")
    p.add_argument("--resume-arg", action="append", default=[], metavar="ARG",
                   help="appended to the command on a restart, placeholders filled in (repeatable)")
    p.add_argument("--max-restarts", type=int, default=3)
    p.add_argument("--settle", type=float, default=15.0,
                   help="wait at most SEC for saves being committed (default 15)")
    p.add_argument("--quiet", type=float, default=3.0,
                   help="... ending once nothing changed for SEC (default 3)")
    p.add_argument("--heads", type=int, help="attention heads: fill {tp} {pp} {dp}")
    p.add_argument("--gpus", type=int, help="GPUs left (default: from health.json)")
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        p.error("no training command (give it after --)")

    run = list(cmd)
    for attempt in range(args.max_restarts + 1):
        print("supervisor: starting %s" % " ".join(run), flush=True)
        rc = subprocess.call(run)
        if rc == 0:
            print("supervisor: the trainer finished", flush=True)
            return 0
        print("supervisor: the trainer died (%s)" % ("signal %d" % -rc if rc < 0 else "exit %d" % rc), flush=True)
        if attempt == args.max_restarts:
            break
        # A save whose marker landed commits within a second or two; one
        # the trainer left half-written never does.
        info = ckptfs.settled_resume_info(args.store, args.series, args.settle, args.quiet, args.mount,
                                          args.ckptctl)
        if info is None:
            print("supervisor: nothing committed yet: starting from scratch", flush=True)
            run = list(cmd)
            continue
        values = {"path": info["path"], "step": info["step"], "checkpoint": info["checkpoint"]}
        if args.heads:
            n = args.gpus or (gpus_left(info["mount"]) if info.get("mount") else None) or 1
            values["tp"], values["pp"], values["dp"] = plan(n, args.heads)
            print("supervisor: %d GPU(s) left: TP=%d PP=%d DP=%d" % (n, values["tp"], values["pp"],
                                                                    values["dp"]), flush=True)
        print("supervisor: resuming from %s/%s (step %d)" % (args.series, info["checkpoint"], info["step"]),
              flush=True)
        run = list(cmd) + fill(args.resume_arg, values)
    print("supervisor: giving up after %d restarts" % args.max_restarts, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
