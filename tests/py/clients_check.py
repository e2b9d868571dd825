"""The loaders people actually call, pointed at a ckptfs mount.

Runs with whatever the interpreter has: torch always; the safetensors and
transformers packages, torch.load(mmap=True), torch >= 2 distributed
checkpoint (DCP) and a CUDA device each where present.  Every part that
runs compares what it loaded with the offline merge of the plain files;
every part that cannot run says so on stdout ("absent: ..."), so a log
shows exactly what a machine checked.

  clients_check.py save RUN
      tinyllama checkpoints in RUN: checkpoint-10 full, -20 blocks {1, 3},
      -30 block {0}.  With CUDA, -30's model.pt and optimizer.pt are saved
      from cuda:0 tensors (their pickles name the device, as a GPU trainer's
      do).
  clients_check.py check MNT_RUN PLAIN_RUN SCRATCH
      each checkpoint through the mount against the offline merge.
  clients_check.py dcp-save DIR STEPS   a DCP save of a model trained STEPS steps
  clients_check.py dcp-load DIR STEPS   DCP load from DIR equals that model
      (torch 1.13's prototype DCP with flat keys, imported through
      dcp_series's shim on Python >= 3.11)
  clients_check.py hf-trainer OUT_DIR STOP
      the transformers Trainer (tiny Llama, deterministic, 20 steps) up to
      step STOP, saving every 5 steps, resuming from OUT_DIR's newest
      checkpoint
  clients_check.py hf-same DIR_A DIR_B
      both runs kept the last two checkpoints and end with the same weights
"""

import inspect
import os
import sys

import torch

import dcp_series
import deepcompare
import offline_merge
import safetensors_ref
import tinyllama

STEPS = (10, 20, 30)
BLOCKS = {10: None, 20: {1, 3}, 30: {0}}


def absent(what, why):
    print("absent: %s (%s)" % (what, why))


def cuda():
    return torch.cuda.is_available()


def to_device(obj, dev):
    if isinstance(obj, torch.Tensor):
        return obj.to(dev)
    if isinstance(obj, dict):
        out = type(obj)((k, to_device(v, dev)) for k, v in obj.items())
        if hasattr(obj, "__dict__"):
            out.__dict__.update(obj.__dict__)
        return out
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(v, dev) for v in obj)
    return obj


def devices(obj, path=""):
    """(path, device) of every tensor in a tree, in walk order."""
    if isinstance(obj, torch.Tensor):
        return [(path, str(obj.device))]
    if isinstance(obj, dict):
        return [d for k, v in obj.items() for d in devices(v, "%s/%s" % (path, k))]
    if isinstance(obj, (list, tuple)):
        return [d for i, v in enumerate(obj) for d in devices(v, "%s/%d" % (path, i))]
    return []


def save(run):
    t = tinyllama.Trainer()
    for step in STEPS:
        t.train(step - t.step)
        ckpt = os.path.join(run, "checkpoint-%d" % step)
        t.save(ckpt, blocks=BLOCKS[step])
    if not cuda():
        absent("a checkpoint saved from cuda:0", "torch.cuda.is_available() is False")
        return
    for name in ("model.pt", "optimizer.pt"):
        p = os.path.join(ckpt, name)
        torch.save(to_device(torch.load(p, weights_only=False), "cuda:0"), p)
    print("checkpoint-30: model.pt and optimizer.pt saved from cuda:0")


def check_torch(served, merged, what):
    """torch.load's ways of reading a file, each against the merge: with
    weights_only=True wherever the merged file itself loads that way (torch
    1.13's restricted unpickler knows no floats, so its scheduler.pt does not)."""
    import pickle
    wo = True
    try:
        want = torch.load(merged, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        wo = False
        want = torch.load(merged, map_location="cpu", weights_only=False)
        absent("%s with weights_only=True" % what, "the plain merge does not load so either")
    what = "%s (weights_only=%s)" % (what, wo)

    def load(path, **kw):
        return torch.load(path, weights_only=wo, **kw)
    deepcompare.assert_same(load(served, map_location="cpu"), want, what)
    if "mmap" in inspect.signature(torch.load).parameters:
        deepcompare.assert_same(load(served, map_location="cpu", mmap=True), want, what + " mmap=True")
    if not cuda():
        return
    got = load(served, map_location="cuda:0")
    bad = [p for p, d in devices(got) if d != "cuda:0"]
    assert not bad, "%s map_location=cuda:0 left %s elsewhere" % (what, bad[:3])
    deepcompare.assert_same(to_device(got, "cpu"), want, what + " map_location=cuda:0")
    # No map_location: each tensor goes where its pickle says, as from the plain files.
    if os.path.exists(merged + ".devices"):
        got, ref = load(served), load(merged + ".devices")
        assert devices(got) == devices(ref), "%s: devices %s != %s" % (what, devices(got)[:4], devices(ref)[:4])


def tensor_bytes(t):
    return safetensors_ref.tensor_bytes(t.cpu())


def check_safetensors(served, merged, what):
    _, want = safetensors_ref.load(merged)
    try:
        from safetensors import safe_open
        from safetensors.torch import load_file
    except ImportError as e:
        absent("the safetensors package", e)
        return
    got = load_file(served)
    assert set(got) == set(want), what + ": tensor names differ"
    for name, t in want.items():
        assert tensor_bytes(got[name]) == tensor_bytes(t), "%s: %s differs" % (what, name)
    dev = "cuda:0" if cuda() else "cpu"
    with safe_open(served, framework="pt", device=dev) as f:
        assert f.metadata() == {"format": "pt"}, "%s metadata %s" % (what, f.metadata())
        for name in f.keys():
            t = f.get_tensor(name)
            assert str(t.device) == dev and tensor_bytes(t) == tensor_bytes(want[name]), name
            rows = f.get_slice(name)[:1]
            assert torch.equal(rows.cpu(), t[:1].cpu()), name + " get_slice"
    print("%s: safetensors load_file and safe_open(device=%s) equal the merge" % (what, dev))


def check_transformers(served_dir, want, what):
    """transformers' from_pretrained on served_dir loads exactly the tensors
    of want (name -> tensor), and its greedy generation equals that of a
    model built from want with the same config: what an eval harness
    pointed at the directory would produce."""
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        absent("the transformers package", e)
        return
    dev = "cuda:0" if cuda() else "cpu"
    kw = {"device_map": dev} if cuda() else {}
    model, info = LlamaForCausalLM.from_pretrained(served_dir, output_loading_info=True, **kw)
    lost = {k: v for k, v in info.items() if v}
    assert not lost, "%s: from_pretrained %s" % (what, lost)
    sd = model.state_dict()
    for name, t in want.items():
        assert tensor_bytes(sd[name]) == tensor_bytes(t), "%s: %s differs" % (what, name)
    ref = LlamaForCausalLM(LlamaConfig.from_pretrained(served_dir))
    ref.load_state_dict({k: v.clone() for k, v in want.items()})
    ref.generation_config = model.generation_config
    ref = ref.to(device=dev, dtype=model.dtype).eval()
    ids = torch.arange(1, 9, device=dev).unsqueeze(0)
    greedy = {"max_new_tokens": 8, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        got, exp = model.eval().generate(ids, **greedy), ref.generate(ids, **greedy)
    assert torch.equal(got, exp), "%s: generation %s, the merge's model gives %s" % (what, got.tolist(), exp.tolist())
    print("%s: transformers from_pretrained on %s equals the merge; greedy generation %s as the merge's model"
          % (what, dev, got[0, ids.shape[1]:].tolist()))


def check(mnt_run, plain_run, scratch):
    for step in STEPS:
        name = "checkpoint-%d" % step
        merged = os.path.join(scratch, name)
        offline_merge.merge_checkpoints(
            [os.path.join(plain_run, "checkpoint-%d" % s) for s in STEPS if s <= step], merged)
        served = os.path.join(mnt_run, name)
        if cuda():   # the merge, keeping each tensor's device, for the default-location check
            for f in ("model.pt", "optimizer.pt"):
                tree = None
                for s in (s for s in STEPS if s <= step):
                    obj = torch.load(os.path.join(plain_run, "checkpoint-%d" % s, f), weights_only=False)
                    tree = obj if tree is None else offline_merge.merge_trees(tree, obj)
                torch.save(tree, os.path.join(merged, f + ".devices"))
        for f in ("model.pt", "optimizer.pt", "scheduler.pt"):
            check_torch(os.path.join(served, f), os.path.join(merged, f), "%s/%s" % (name, f))
        print("%s: torch.load (%s%s) equals the merge" % (
            name, "mmap, " if "mmap" in inspect.signature(torch.load).parameters else "",
            "map_location=cuda:0, devices" if cuda() else "map_location=cpu"))
        check_safetensors(os.path.join(served, "model.safetensors"),
                          os.path.join(merged, "model.safetensors"), name + "/model.safetensors")
        check_transformers(served, safetensors_ref.load(os.path.join(merged, "model.safetensors"))[1], name)
    if not cuda():
        absent("CUDA", "torch.cuda.is_available() is False: map_location=cuda not checked")


def dcp_state(steps):
    t = tinyllama.Trainer(seed=7)
    t.train(int(steps))
    return {"model": t.model.state_dict(), "step": torch.tensor(t.step)}


def dcp_module():
    """torch's DCP: torch.distributed.checkpoint (torch >= 2), or 1.13's
    prototype imported with dcp_series's dataclass shim (Python >= 3.11)."""
    return dcp_series.import_dcp()


def flat_state(state):
    return dict([("model." + k, v) for k, v in state["model"].items()] + [("step", state["step"])])


def dcp_save(path, steps):
    dcp = dcp_module()
    if hasattr(dcp, "save"):
        dcp.save(dcp_state(steps), checkpoint_id=path)
        how = "dcp.save"
    else:   # torch 1.13's prototype API: flat keys
        dcp.save_state_dict(flat_state(dcp_state(steps)), dcp.FileSystemWriter(path), no_dist=True)
        how = "save_state_dict"
    print("DCP save (%s) into %s" % (how, path))


def dcp_load(path, steps):
    dcp = dcp_module()
    want = dcp_state(steps)
    want["model"] = dict(want["model"])    # not the state_dict's OrderedDict and its _metadata
    got = {"model": {k: torch.zeros_like(v) for k, v in want["model"].items()}, "step": torch.tensor(0)}
    if hasattr(dcp, "load"):
        dcp.load(got, checkpoint_id=path)
    else:
        got = flat_state(got)
        dcp.load_state_dict(got, dcp.FileSystemReader(path), no_dist=True)
        want = flat_state(want)
    deepcompare.assert_same(got, want, "DCP load of " + path)
    print("DCP load from %s equals the saved state" % path)


HF_STEPS, HF_SAVE = 20, 5


def hf_trainer(out_dir, stop_at, callbacks=()):
    """The transformers Trainer, fully deterministic, a run of HF_STEPS
    steps that stops after step stop_at, saving every HF_SAVE steps into
    out_dir (keeping two: its rotation deletes the others) and resuming
    from the newest checkpoint there when it has one; with callbacks
    added to the Trainer's.  False where transformers is absent."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    try:
        from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainerCallback, TrainingArguments
        from transformers.trainer_utils import get_last_checkpoint
    except ImportError as e:
        absent("the transformers Trainer", e)
        return False
    stop_at = int(stop_at)
    want = {"output_dir": out_dir, "max_steps": HF_STEPS, "save_steps": HF_SAVE,
            "save_total_limit": 2, "per_device_train_batch_size": 4, "logging_steps": HF_SAVE,
            "report_to": "none", "seed": 0, "data_seed": 0, "full_determinism": True,
            "use_cpu": not cuda(), "save_safetensors": True, "dataloader_num_workers": 0}
    known = inspect.signature(TrainingArguments.__init__).parameters
    args = TrainingArguments(**{k: v for k, v in want.items() if k in known})
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4,
                                         max_position_embeddings=32))

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            ids = torch.randint(64, (16,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids}
    class Stop(TrainerCallback):   # as a preempted job stops: after a save
        def on_step_end(self, args, state, control, **kw):
            if state.global_step >= stop_at:
                control.should_training_stop = True
    last = get_last_checkpoint(out_dir) if os.path.isdir(out_dir) else None
    Trainer(model=model, args=args, train_dataset=Data(),
            callbacks=[Stop()] + list(callbacks)).train(resume_from_checkpoint=last)
    print("transformers Trainer: to step %d in %s%s" % (stop_at, out_dir, ", resumed from " + last if last else ""))
    return True


def hf_same(a_dir, b_dir):
    """The two runs' newest checkpoints hold the same weights, and each keeps two."""
    try:
        from safetensors.torch import load_file
    except ImportError as e:
        absent("the transformers Trainer", e)
        return
    for d in (a_dir, b_dir):
        kept = sorted(n for n in os.listdir(d) if n.startswith("checkpoint-"))
        assert kept == ["checkpoint-%d" % (HF_STEPS - HF_SAVE), "checkpoint-%d" % HF_STEPS], (d, kept)
    name = "checkpoint-%d/model.safetensors" % HF_STEPS
    a, b = load_file(os.path.join(a_dir, name)), load_file(os.path.join(b_dir, name))
    deepcompare.assert_same(a, b, "Trainer weights, stopped and resumed through the mount")
    print("transformers Trainer: stopped at %d and resumed through the mount = never stopped"
          " (%d tensors bit-identical; rotation kept two checkpoints)" % (HF_STEPS // 2, len(a)))


def main(argv):
    cmds = {"save": (save, 1), "check": (check, 3), "dcp-save": (dcp_save, 2), "dcp-load": (dcp_load, 2),
            "hf-trainer": (hf_trainer, 2), "hf-same": (hf_same, 2)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        sys.exit(__doc__)
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
