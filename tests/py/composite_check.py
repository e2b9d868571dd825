"""Real-client checks of a composite checkpoint (tests/integration/composite_resume.sh).

  composite_check.py make RUN
      trains the tiny model 20 steps; RUN/checkpoint-10 is a full save (plus a
      tokenizer_config.json that only it has), RUN/checkpoint-20 holds only
      the odd decoder blocks (1, 3) of the weights and optimizer state.
  composite_check.py verify RUN MNT_SERIES WORK
      checks MNT_SERIES/checkpoint-20 against the offline merge of RUN (written
      to WORK/merged) bit-exactly, and that training resumed from the mount
      equals training resumed from the merged copy.
  composite_check.py provenance RUN MNT_SERIES SHOW_DIR
      checks user.ckptfs.sources of the mounted files, and the
      `ckptctl show --json` outputs saved as SHOW_DIR/<file>.json.

Every check failure raises (exit 1) with what differed.
"""

import json
import os
import sys

import torch

import deepcompare
import mountcheck
import offline_merge
import safetensors_ref
import tinyllama

SEED = 1234
PARTIAL_BLOCKS = {1, 3}
RESUME_STEPS = 5
TENSOR_FILES = ("model.pt", "model.safetensors", "optimizer.pt")
WHOLE_FROM_20 = ("scheduler.pt", "trainer_state.json", "config.json")
ONLY_IN_10 = "tokenizer_config.json"


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def source_step(name, param_names):
    """Step a logical tensor of checkpoint-20's composite must come from."""
    if name.startswith("state."):   # optimizer: state.<param index>.<key>
        name = param_names[int(name.split(".")[1])]
    return 20 if tinyllama.block_of(name) in PARTIAL_BLOCKS else 10


def make(run):
    t = tinyllama.Trainer(SEED)
    t.train(10)
    t.save(os.path.join(run, "checkpoint-10"),
           extra_files={ONLY_IN_10: '{"model_max_length": 16}\n'})
    t.train(10)
    t.save(os.path.join(run, "checkpoint-20"), blocks=PARTIAL_BLOCKS)
    # The test means something only if every saved tensor changed in between.
    old = torch.load(os.path.join(run, "checkpoint-10", "model.pt"))
    new = torch.load(os.path.join(run, "checkpoint-20", "model.pt"))
    for name, tensor in new.items():
        expect(not torch.equal(tensor, old[name]), "%s did not change from step 10 to 20" % name)
    print("made %s: checkpoint-10 full, checkpoint-20 blocks %s" % (run, sorted(PARTIAL_BLOCKS)))


def check_semantics(run, merged):
    """The offline merge itself picks odd blocks from 20, the rest from 10."""
    names = tinyllama.Trainer(SEED).param_names
    ck = {s: os.path.join(run, "checkpoint-%d" % s) for s in (10, 20)}
    model = torch.load(os.path.join(merged, "model.pt"))
    src = {s: torch.load(os.path.join(ck[s], "model.pt")) for s in ck}
    expect(list(model) == list(src[10]), "merged model.pt keys out of step-10 order")
    for name, tensor in model.items():
        expect(torch.equal(tensor, src[source_step(name, names)][name]), "merged " + name)
    opt = torch.load(os.path.join(merged, "optimizer.pt"))
    src = {s: torch.load(os.path.join(ck[s], "optimizer.pt")) for s in ck}
    expect(list(opt["state"]) == list(src[10]["state"]), "merged optimizer state keys")
    for idx, state in opt["state"].items():
        s = source_step("state.%d" % idx, names)
        deepcompare.assert_same(state, src[s]["state"][idx], "merged optimizer state %d" % idx)
    deepcompare.assert_same(opt["param_groups"], src[20]["param_groups"], "param_groups")
    deepcompare.assert_same(torch.load(os.path.join(merged, "scheduler.pt")),
                            torch.load(os.path.join(ck[20], "scheduler.pt")), "scheduler")


def same_files(mounted, plain, what):
    expect(sorted(os.listdir(mounted)) == sorted(os.listdir(plain)),
           "%s: listing %s != %s" % (what, sorted(os.listdir(mounted)), sorted(os.listdir(plain))))
    for name in sorted(os.listdir(plain)):
        m, p = os.path.join(mounted, name), os.path.join(plain, name)
        if name.endswith(".pt"):
            deepcompare.assert_loads_same(m, p, "%s %s" % (what, name))
            expect(mountcheck.read_mmapped(m, private=True) == mountcheck.read_all(m),
                   "%s %s: a private mapping and read differ" % (what, name))
        elif name.endswith(".safetensors"):
            served = mountcheck.read_all(m)
            expect(mountcheck.read_mmapped(m) == served, "%s %s: mmap and read differ" % (what, name))
            meta, tensors = safetensors_ref.loads(served)   # validates
            ref_meta, ref = safetensors_ref.load(p)
            expect(meta == ref_meta, "%s %s: metadata %r != %r" % (what, name, meta, ref_meta))
            deepcompare.assert_same(tensors, ref, "%s %s" % (what, name))
            with open(p, "rb") as f:
                expect(served == f.read(),
                       "%s %s: not laid out like the reference writer" % (what, name))
        else:
            with open(m, "rb") as f, open(p, "rb") as g:
                expect(f.read() == g.read(), "%s %s: bytes differ" % (what, name))
        print("  %-22s equal" % name)


def resumed(ckpt_dir, weights="model.pt"):
    t = tinyllama.Trainer(SEED)
    t.load(ckpt_dir, weights)
    t.train(RESUME_STEPS)
    return t.snapshot()


def verify(run, mnt_series, work):
    merged = os.path.join(work, "merged", "checkpoint-20")
    offline_merge.merge_checkpoints(
        [os.path.join(run, "checkpoint-10"), os.path.join(run, "checkpoint-20")], merged)
    check_semantics(run, merged)
    print("checkpoint-20 through the mount vs the offline merge:")
    same_files(os.path.join(mnt_series, "checkpoint-20"), merged, "checkpoint-20")
    print("checkpoint-10 through the mount vs the original (a full save):")
    same_files(os.path.join(mnt_series, "checkpoint-10"), os.path.join(run, "checkpoint-10"),
               "checkpoint-10")

    # Resuming from the mount trains on exactly like resuming from the merged copy.
    want = resumed(merged)
    got = resumed(os.path.join(mnt_series, "checkpoint-20"))
    deepcompare.assert_same(got, want, "state after resuming from the mount")
    got = resumed(os.path.join(mnt_series, "checkpoint-20"), "model.safetensors")
    deepcompare.assert_same(got, want, "state after resuming from the mounted model.safetensors")
    expect(got["step"] == 20 + RESUME_STEPS, "resumed run ended at step %d" % got["step"])
    print("resumed %d steps from the mount == from the offline merge (losses %s)"
          % (RESUME_STEPS, ", ".join("%.4f" % l for l in got["losses"][-RESUME_STEPS:])))


def _ckpt_step(name):
    expect(name.startswith("checkpoint-"), "not a checkpoint name: %r" % name)
    return int(name[len("checkpoint-"):])


def _served_tensors(ckpt, name):
    """Logical name -> tensor of a composite file, as ckptctl show names them."""
    path = os.path.join(ckpt, name)
    if name.endswith(".safetensors"):
        return safetensors_ref.load(path)[1]
    obj = torch.load(path)
    if name == "optimizer.pt":
        return {"state.%d.%s" % (i, k): v for i, st in obj["state"].items() for k, v in st.items()}
    return dict(obj)


def provenance(run, mnt_series, show_dir):
    """user.ckptfs.sources: {"sources": [{"checkpoint", "step", "path", ...}],
    "tensors": {name: checkpoint}}; ckptctl show --json: {"tensors": [{"name",
    "src_ckpt", "src_step", "src_path", "src_offset", "nbytes", ...}]}."""
    names = tinyllama.Trainer(SEED).param_names
    ck20 = os.path.join(mnt_series, "checkpoint-20")
    for name in sorted(os.listdir(ck20)):
        doc = json.loads(os.getxattr(os.path.join(ck20, name), "user.ckptfs.sources"))
        want = {10, 20} if name in TENSOR_FILES else {10} if name == ONLY_IN_10 else {20}
        got = {src["step"] for src in doc["sources"]}
        expect(got == want, "%s: sources from steps %s, expected %s: %s"
               % (name, sorted(got), sorted(want), json.dumps(doc)[:400]))
        for tensor, src in doc.get("tensors", {}).items():
            step = _ckpt_step(src)
            expect(step == source_step(tensor, names), "%s: %s from step %d" % (name, tensor, step))
        print("  %-22s sources from steps %s, %d tensors attributed"
              % (name, sorted(got), len(doc.get("tensors", {}))))

    for name in TENSOR_FILES:
        with open(os.path.join(show_dir, name + ".json")) as f:
            records = json.load(f)["tensors"]
        served = _served_tensors(ck20, name)
        expect(sorted(r["name"] for r in records) == sorted(served),
               "ckptctl show %s: tensor names differ from the served file's" % name)
        for rec in records:
            want = source_step(rec["name"], names)
            expect(rec["src_step"] == want and _ckpt_step(rec["src_ckpt"]) == want,
                   "ckptctl show %s: %s from %s, expected step %d"
                   % (name, rec["name"], rec["src_ckpt"], want))
            # The physical range it names holds exactly the bytes the mount serves.
            expect(("checkpoint-%d" % want) in rec["src_path"].split(os.sep),
                   "ckptctl show %s: %s in %s" % (name, rec["name"], rec["src_path"]))
            with open(rec["src_path"], "rb") as f:
                f.seek(rec["src_offset"])
                raw = f.read(rec["nbytes"])
            expect(raw == safetensors_ref.tensor_bytes(served[rec["name"]]),
                   "ckptctl show %s: bytes at %s+%d are not %s"
                   % (name, rec["src_path"], rec["src_offset"], rec["name"]))
        print("  ckptctl show %-18s %d tensors, each from the right step and byte range"
              % (name, len(records)))


def main(argv):
    cmds = {"make": (make, 1), "verify": (verify, 3), "provenance": (provenance, 3)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.exit(__doc__)
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
