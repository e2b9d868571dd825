"""Real-reader checks of the control directory, MNT/.ckptfs (or a copy of it
made by tests/unit/ctl_tool): what they read must equal what the original
checkpoint files say, worked out here from those files alone.

Several commands run in one process when joined by "+" (torch loads
once): ctl_check.py weights CTL WORK + history CTL WORK; the first that
fails ends the run.

  ctl_check.py make WORK
      writes the series below to WORK/<series>/ (import each into a store)
  ctl_check.py make-wide DIR
      checkpoint-2 of a series of another architecture (a wider MLP)
  ctl_check.py yaml NAME OUT
      writes recipe NAME (one of RECIPES) as MergeKit YAML to OUT
  ctl_check.py weights CTL WORK
      weights/SERIES/CKPT/ of every checkpoint: the reference reader's rules
      (one file, or the shards of model.safetensors.index.json), metadata
      format=pt, bit-exactly the merged model weights, the side files; where
      transformers is installed, from_pretrained of each complete tiny
      Llama and its greedy generation equal to the merge's model's
  ctl_check.py layers CTL WORK SERIES CKPT
      layers/SERIES/CKPT/: each layer's tensors bit-exactly, and LAYER.json's
      source and previous steps and relative L2 changes
  ctl_check.py history CTL WORK
      history/grow/: a layer the first checkpoint lacks is listed for the
      second only; every entry equals its layers/ file
  ctl_check.py recipe CTL WORK NAME
      recipes/NAME/ (one of RECIPES) equals an LLMTailor-style merge done
      here with torch, file by file, and weights/@recipes/NAME/ its weights
  ctl_check.py diff JSON WORK A B
      `ckptctl diff --json` output for SERIES/CKPT A and B
  ctl_check.py sources JSON
      user.ckptfs.sources of weights/run/checkpoint-20/model.safetensors
  ctl_check.py memmap FILE
      numpy memmaps of FILE's float32 tensors (a layer file) equal what the
      reference reader reads
  ctl_check.py tailor-yaml SERIES OUT
      writes the recipe of TAILOR_RECIPE over SERIES to OUT
  ctl_check.py tailor-merge SERIES_DIR OUT
      the LLMTailor-style merge of TAILOR_RECIPE over a series written by
      examples/llmtailor_train.py, done the slow way, as a plain checkpoint
  ctl_check.py dcp-save WORK
      torch's real DCP writer (tests/py/dcp_series.py): WORK/dcp1 in one
      process, WORK/dcp2 in 2 ranks (row-split ShardedTensors), each full
      at step-10 and partial at step-20 and step-30
  ctl_check.py dcp CTL WORK
      weights/ and layers/ of every step of both: the reference reader
      bit-exactly the offline merge of the saves (model.* with the prefix
      stripped; optim.state.P.M as optimizer.P.M in P's layer), LAYER.json's
      steps and relative L2 changes, history/ equal to layers/
  ctl_check.py tailor-same RUN_A RUN_B STEP
      the checkpoints at STEP of two resumed runs are bit-identical, and the
      runs trained on (finite losses after the resume)

Series (tiny Llama, tests/py/tinyllama.py):
  run      checkpoint-10 full (+ tokenizer and generation config), -20 odd
           blocks, -30 even blocks: model.safetensors + model.pt + optimizer.pt
  grow     checkpoint-10 blocks 0-1 only, -20 full
  other    another seed, full saves at 10 and 20 (recipes across series)
  sonly    run without model.pt (weights from safetensors alone)
  ponly    run with model.pt as pytorch_model.bin and no safetensors
  single   single-file checkpoints model_000010.pt (full) and model_000020.pt
           (odd blocks): {"model": state_dict, "optimizer": ..., "step": N}
  tied     the head tied to the embeddings (one storage, two names, one
           parameter): model.pt + optimizer.pt at 10 (full) and 20 (odd blocks)
"""

import functools
import json
import math
import os
import pickle
import shutil
import sys
import time

import torch

import clients_check
import deepcompare
import offline_merge
import safetensors_ref
import tinyllama

SEED = 1234
ALL_SERIES = ("run", "grow", "other", "sonly", "ponly", "single", "tied")
TOKENIZER = '{"model_max_length": 16}\n'
GENERATION = '{"max_new_tokens": 8}\n'

RECIPES = {
    # blocks 0-1 from one checkpoint, 2-3 from another (the base: the last)
    "mix": {"slices": [("run/checkpoint-10", 0, 2), ("run/checkpoint-30", 2, 4)], "weights": {}},
    # across two series of one architecture, slices stacked out of order
    # (renumbered: output blocks 0-1 are other's 2-3), the head from other
    "cross": {"slices": [("other/checkpoint-20", 2, 4), ("run/checkpoint-30", 0, 2)],
              "weights": {"lm_head.weight": "other/checkpoint-20"}},
    # param_groups, scheduler and config from a checkpoint no slice names
    "based": {"slices": [("run/checkpoint-30", 0, 2), ("run/checkpoint-10", 2, 4)], "weights": {},
              "base": "run/checkpoint-20"},
}


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def recipe_yaml(name):
    r = RECIPES[name]
    out = ["slices:"]
    for model, a, b in r["slices"]:
        out += ["  - sources:", "      - model: %s" % model, "        layer_range: [%d, %d]" % (a, b)]
    out.append("merge_method: passthrough")
    if "base" in r:
        out.append("base_model: %s" % r["base"])
    if r["weights"]:
        out.append("post_weights:")
        for n, m in r["weights"].items():
            out += ["  - name: %s" % n, "    model: %s" % m]
    return "\n".join(out) + "\n"


# --- making the series ---------------------------------------------------------

def make(work):
    run = os.path.join(work, "run")
    t = tinyllama.Trainer(SEED)
    t.train(10)
    t.save(os.path.join(run, "checkpoint-10"),
           extra_files={"tokenizer_config.json": TOKENIZER, "generation_config.json": GENERATION})
    t.train(10)
    t.save(os.path.join(run, "checkpoint-20"), blocks={1, 3})
    t.train(10)
    t.save(os.path.join(run, "checkpoint-30"), blocks={0, 2})
    g = tinyllama.Trainer(SEED + 1)
    g.train(5)
    g.save(os.path.join(work, "grow", "checkpoint-10"), blocks={0, 1})
    g.train(5)
    g.save(os.path.join(work, "grow", "checkpoint-20"))
    o = tinyllama.Trainer(SEED + 2)
    for step in (10, 20):
        o.train(10)
        o.save(os.path.join(work, "other", "checkpoint-%d" % step))
    for series, drop, rename in (("sonly", "model.pt", None), ("ponly", "model.safetensors", "model.pt")):
        for ck in os.listdir(run):
            dst = os.path.join(work, series, ck)
            shutil.copytree(os.path.join(run, ck), dst)
            os.unlink(os.path.join(dst, drop))
            if rename:
                os.rename(os.path.join(dst, rename), os.path.join(dst, "pytorch_model.bin"))
    tied = tinyllama.Trainer(SEED + 4)
    tied.model.lm_head.weight = tied.model.model.embed_tokens.weight
    named = list(dict(tied.model.named_parameters()))   # one name for the shared parameter
    decay = [n for n in named if dict(tied.model.named_parameters())[n].dim() >= 2]
    tied.param_names = decay + [n for n in named if n not in decay]
    params = dict(tied.model.named_parameters())
    tied.opt = torch.optim.AdamW([{"params": [params[n] for n in decay], "weight_decay": 0.01},
                                  {"params": [params[n] for n in named if n not in decay], "weight_decay": 0.0}],
                                 lr=tinyllama.LR)
    tied.sched = torch.optim.lr_scheduler.LambdaLR(tied.opt, tinyllama.lr_lambda)
    for step, blocks in ((10, None), (20, {1, 3})):
        tied.train(10)
        d = os.path.join(work, "tied", "checkpoint-%d" % step)
        tied.save(d, blocks=blocks)
        os.unlink(os.path.join(d, "model.safetensors"))   # torch.save keeps the tie
    s = tinyllama.Trainer(SEED + 3)
    os.makedirs(os.path.join(work, "single"))
    for step, blocks in ((10, None), (20, {1, 3})):
        s.train(10)
        sd, osd = s.model.state_dict(), s.opt.state_dict()
        if blocks:
            for name in [n for n in sd if tinyllama.block_of(n) not in blocks]:
                del sd[name]
            for idx in [i for i in osd["state"] if tinyllama.block_of(s.param_names[i]) not in blocks]:
                del osd["state"][idx]
        torch.save({"model": sd, "optimizer": osd, "step": step},
                   os.path.join(work, "single", "model_%06d.pt" % step))
    print("made the series in %s" % work)


# --- what the original files say ------------------------------------------------

def checkpoints(work, series):
    d = os.path.join(work, series)
    return sorted(os.listdir(d), key=lambda n: int("".join(ch for ch in n if ch.isdigit())))


def versions(work, series, ckpt, rel):
    """Paths of rel in the checkpoints of series up to ckpt, oldest first."""
    out = []
    for ck in checkpoints(work, series):
        p = os.path.join(work, series, ck, rel) if rel else os.path.join(work, series, ck)
        if os.path.exists(p):
            out.append(p)
        if ck == ckpt:
            break
    return out


def load_any(path):
    if path.endswith(".safetensors"):
        return safetensors_ref.load(path)[1]
    return torch.load(path, map_location="cpu", weights_only=False)   # RNG states hold numpy arrays


def merged(paths):
    tree = None
    for p in paths:
        x = load_any(p)
        if isinstance(tree, dict) and isinstance(x, dict) and not p.endswith(".safetensors"):
            tree = offline_merge.merge_trees(tree, x)
        elif isinstance(tree, dict):
            tree = dict(tree, **x)
        else:
            tree = x
    return tree


def model_file(work, series):
    first = os.path.join(work, series, checkpoints(work, series)[0])
    if os.path.isfile(first):
        return ""
    for name in ("model.safetensors", "pytorch_model.bin", "model.pt"):
        if os.path.exists(os.path.join(first, name)):
            return name
    raise AssertionError("no model file in " + first)


def expected_weights(work, series, ckpt):
    rel = model_file(work, series)
    tree = merged(versions(work, series, ckpt, rel))
    return tree["model"] if rel == "" else tree


def expected_optimizer(work, series, ckpt):
    rel = model_file(work, series)
    if rel == "":
        return merged(versions(work, series, ckpt, ""))["optimizer"]
    return merged(versions(work, series, ckpt, "optimizer.pt"))


@functools.lru_cache(maxsize=None)
def param_names(series):
    names = tinyllama.Trainer(SEED).param_names
    # a tied head is one parameter, named after the embeddings
    return tuple(n for n in names if n != "lm_head.weight") if series == "tied" else tuple(names)


def layer_of(name):
    b = tinyllama.block_of(name)
    if b is not None:
        return "layers.%d" % b
    if "embed_tokens" in name:
        return "embed"
    if name.startswith("lm_head"):
        return "head"
    return "norm"


def same_tensors(got, want, what):
    expect(set(got) == set(want), "%s: names differ: %s" % (what, sorted(set(got) ^ set(want))))
    for k in want:
        expect(got[k].dtype == want[k].dtype and got[k].shape == want[k].shape and torch.equal(got[k], want[k]),
               "%s: %s differs" % (what, k))


# --- weights/ -------------------------------------------------------------------------

def read_weights_dir(d):
    """The reference reader on a weights directory: one file or indexed shards."""
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        md, t = safetensors_ref.load(os.path.join(d, "model.safetensors"))
        expect(md == {"format": "pt"}, "%s: metadata %r" % (d, md))
        return t, 1
    with open(index) as f:
        idx = json.load(f)
    out, total = {}, 0
    shards = sorted(set(idx["weight_map"].values()))
    expect(set(n for n in os.listdir(d) if n.endswith(".safetensors")) == set(shards),
           "%s: shard files are not those the index names" % d)
    for shard in shards:
        md, t = safetensors_ref.load(os.path.join(d, shard))
        expect(md == {"format": "pt"}, "%s: metadata %r" % (shard, md))
        for name, tensor in t.items():
            expect(idx["weight_map"].get(name) == shard, "%s: %s not mapped to it" % (shard, name))
            total += len(safetensors_ref.tensor_bytes(tensor))
        out.update(t)
    expect(idx["metadata"]["total_size"] == total, "%s: total_size %d, tensors hold %d"
           % (index, idx["metadata"]["total_size"], total))
    expect(set(idx["weight_map"]) == set(out), "%s: weight_map names other tensors" % index)
    return out, len(shards)


def weights(ctl, work):
    nshards = 0
    for series in ALL_SERIES:
        for ck in checkpoints(work, series):
            d = os.path.join(ctl, "weights", series, ck)
            got, n = read_weights_dir(d)
            nshards = max(nshards, n)
            want = expected_weights(work, series, ck)
            same_tensors(got, want, d)
            names = set(os.listdir(d))
            if "config.json" in names and set(param_names("run")) <= set(want):
                clients_check.check_transformers(d, want, d)
            expect(not any("optim" in n for n in names), "%s: optimizer state in the weights view" % d)
            for side in ("config.json", "tokenizer_config.json", "generation_config.json"):
                src = versions(work, series, ck, side) if os.path.isdir(os.path.join(work, series, ck)) else []
                if src:
                    with open(src[-1], "rb") as a, open(os.path.join(d, side), "rb") as b:
                        expect(a.read() == b.read(), "%s/%s differs from %s" % (d, side, src[-1]))
                else:
                    expect(side not in names, "%s: %s listed but the checkpoint has none" % (d, side))
    print("weights/: %s checkpoints bit-exact (up to %d shard%s)" % (
        sum(len(checkpoints(work, s)) for s in ALL_SERIES), nshards, "s" if nshards > 1 else ""))


# --- layers/ and history/ ----------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def load_kept(path):
    """load_any, once per file: for what only reads the trees (stored)."""
    return load_any(path)


def stored(work, series, ckpt, name):
    """(step, tensor) of every save of series up to ckpt that stored name."""
    rel = model_file(work, series)
    out = []
    for ck in checkpoints(work, series):
        step = int("".join(ch for ch in ck if ch.isdigit()))
        if name.startswith("optimizer."):
            param, moment = name[len("optimizer."):].rsplit(".", 1)
            idx = int(param[len("state."):]) if param.startswith("state.") else param_names(series).index(param)
            p = os.path.join(work, series, ck, "optimizer.pt") if rel else os.path.join(work, series, ck)
            osd = load_kept(p)
            osd = osd["optimizer"] if rel == "" else osd
            if idx in osd["state"]:
                out.append((step, osd["state"][idx][moment]))
        else:
            p = os.path.join(work, series, ck, rel) if rel else os.path.join(work, series, ck)
            sd = load_kept(p)
            sd = sd["model"] if rel == "" else sd
            if name in sd:
                out.append((step, sd[name]))
        if ck == ckpt:
            break
    return out


@functools.lru_cache(maxsize=None)
def moments_named(work, series, ckpt):
    """Whether the optimizer's parameters can be told by the model's: its
    param_groups list no more parameters than the composite model has (a
    first save of some blocks only leaves them unnamed, layer 'optimizer')."""
    osd = expected_optimizer(work, series, ckpt)
    return sum(len(g["params"]) for g in osd["param_groups"]) <= len(expected_weights(work, series, ckpt))


def moment_name(work, series, ckpt, idx, m):
    if moments_named(work, series, ckpt):
        name = param_names(series)[idx]
        return layer_of(name), "optimizer.%s.%s" % (name, m)
    return "optimizer", "optimizer.state.%d.%s" % (idx, m)


def expected_layers(work, series, ckpt):
    """layer -> {name: tensor} of weights and moments."""
    out = {}
    for name, t in expected_weights(work, series, ckpt).items():
        out.setdefault(layer_of(name), {})[name] = t
    for idx, moments in expected_optimizer(work, series, ckpt)["state"].items():
        for m, t in moments.items():
            if torch.is_tensor(t):
                layer, name = moment_name(work, series, ckpt, idx, m)
                out.setdefault(layer, {})[name] = t
    return out


def rel_l2(cur, prev):
    c, p = cur.double().reshape(-1), prev.double().reshape(-1)
    d = float(torch.sum((c - p) ** 2))
    n = float(torch.sum(p ** 2))
    if d == 0:
        return 0.0
    return math.sqrt(d / n) if n else None


def layers(ctl, work, series, ckpt):
    d = os.path.join(ctl, "layers", series, ckpt)
    want = expected_layers(work, series, ckpt)
    expect(sorted(os.listdir(d)) == sorted([l + ".safetensors" for l in want] + [l + ".json" for l in want]),
           "%s lists %s" % (d, sorted(os.listdir(d))))
    checked = 0
    for layer, tensors in want.items():
        md, got = safetensors_ref.load(os.path.join(d, layer + ".safetensors"))
        same_tensors(got, tensors, "%s/%s.safetensors" % (d, layer))
        with open(os.path.join(d, layer + ".json")) as f:
            doc = json.load(f)
        expect(doc["checkpoint"] == "%s/%s" % (series, ckpt) and doc["layer"] == layer, "%s.json header" % layer)
        expect(sorted(e["name"] for e in doc["tensors"]) == sorted(tensors), "%s.json names" % layer)
        for e in doc["tensors"]:
            saves = stored(work, series, ckpt, e["name"])
            t = tensors[e["name"]]
            expect(e["dtype"] == safetensors_ref.NAME_OF[t.dtype] and e["shape"] == list(t.shape),
                   "%s: dtype/shape" % e["name"])
            expect(e["role"] == ("optimizer" if e["name"].startswith("optimizer.") else "weight"), e["name"])
            src = saves[-1]
            expect(e["source_step"] == src[0], "%s: source_step %s, expected %s" % (e["name"], e["source_step"], src[0]))
            if len(saves) < 2:
                expect(e["previous_step"] is None and e["rel_l2"] is None, "%s: no previous save" % e["name"])
                continue
            prev = saves[-2]
            expect(e["previous_step"] == prev[0], "%s: previous_step %s, expected %s"
                   % (e["name"], e["previous_step"], prev[0]))
            want_l2 = rel_l2(src[1], prev[1])
            if want_l2 is None:
                expect(e["rel_l2"] is None, "%s: rel_l2 %r, expected null" % (e["name"], e["rel_l2"]))
            else:
                expect(e["rel_l2"] is not None and abs(e["rel_l2"] - want_l2) <= 1e-5 * max(want_l2, 1e-30) + 1e-12,
                       "%s: rel_l2 %r, expected %r" % (e["name"], e["rel_l2"], want_l2))
            checked += 1
    print("layers/%s/%s: %d layers, %d relative changes right" % (series, ckpt, len(want), checked))


def history(ctl, work):
    h = os.path.join(ctl, "history", "grow")
    expect(sorted(os.listdir(os.path.join(h, "layers.3"))) == ["checkpoint-20.safetensors"],
           "history/grow/layers.3 lists %s" % os.listdir(os.path.join(h, "layers.3")))
    expect(sorted(os.listdir(os.path.join(h, "layers.0"))) == ["checkpoint-10.safetensors", "checkpoint-20.safetensors"],
           "history/grow/layers.0 lists %s" % os.listdir(os.path.join(h, "layers.0")))
    for layer in os.listdir(h):
        for f in os.listdir(os.path.join(h, layer)):
            ck = f[:-len(".safetensors")]
            with open(os.path.join(h, layer, f), "rb") as a, \
                    open(os.path.join(ctl, "layers", "grow", ck, layer + ".safetensors"), "rb") as b:
                expect(a.read() == b.read(), "history/grow/%s/%s differs from layers/" % (layer, f))
    print("history/grow: layers.3 only where saved, %d layers" % len(os.listdir(h)))


# --- recipes/ ------------------------------------------------------------------------------

def ref_dir(work, ref):
    series, ckpt = ref.split("/")
    return series, ckpt


def expected_recipe(work, name):
    """The LLMTailor-style merge done the slow way: {file: object}."""
    r = RECIPES[name]
    base = r.get("base", r["slices"][-1][0])
    bs, bc = ref_dir(work, base)
    out_blocks = []
    for model, a, b in r["slices"]:
        out_blocks += [(model, j) for j in range(a, b)]
    cache = {}

    def composite(ref, rel):
        if (ref, rel) not in cache:
            s, c = ref_dir(work, ref)
            cache[ref, rel] = merged(versions(work, s, c, rel))
        return cache[ref, rel]

    def source(pname):
        blk = tinyllama.block_of(pname)
        if blk is not None:
            model, j = out_blocks[blk]
            return model, pname.replace("layers.%d." % blk, "layers.%d." % j, 1)
        return r["weights"].get(pname, base), pname

    files = {}
    for rel in ("model.pt", "model.safetensors"):
        sd = composite(base, rel)
        out = type(sd)()
        for k in sd:
            model, src = source(k)
            out[k] = composite(model, rel)[src]
        if hasattr(sd, "_metadata"):
            out._metadata = sd._metadata
        files[rel] = out
    osd = composite(base, "optimizer.pt")
    names = param_names(bs)
    state = {}
    for idx in osd["state"]:
        model, src = source(names[idx])
        ms, _ = ref_dir(work, model)
        state[idx] = composite(model, "optimizer.pt")["state"][param_names(ms).index(src)]
    files["optimizer.pt"] = {"state": state, "param_groups": osd["param_groups"]}
    for rel in ("scheduler.pt",):
        files[rel] = composite(base, rel)
    return files, base


def recipe(ctl, work, name):
    d = os.path.join(ctl, "recipes", name)
    files, base = expected_recipe(work, name)
    bs, bc = ref_dir(work, base)
    union = set()
    for ck in checkpoints(work, bs):
        union |= set(os.listdir(os.path.join(work, bs, ck)))
        if ck == bc:
            break
    expect(sorted(os.listdir(d)) == sorted(union), "recipes/%s lists %s" % (name, sorted(os.listdir(d))))
    for rel, want in files.items():
        path = os.path.join(d, rel)
        if rel.endswith(".safetensors"):
            same_tensors(safetensors_ref.load(path)[1], want, path)
        else:
            deepcompare.assert_same(torch.load(path, weights_only=False), want, path)
            # weights_only too, where the base's own file allows it
            try:
                torch.load(versions(work, bs, bc, rel)[-1], weights_only=True)
            except pickle.UnpicklingError:
                continue
            deepcompare.assert_same(torch.load(path, weights_only=True), want, path + " (weights_only)")
    for rel in ("trainer_state.json", "config.json"):
        with open(os.path.join(d, rel), "rb") as a, open(versions(work, bs, bc, rel)[-1], "rb") as b:
            expect(a.read() == b.read(), "recipes/%s/%s is not the base's" % (name, rel))
    got, _ = read_weights_dir(os.path.join(ctl, "weights", "@recipes", name))
    same_tensors(got, files["model.safetensors"], "weights/@recipes/" + name)
    print("recipes/%s: equal to the offline LLMTailor-style merge (base %s)" % (name, base))


# --- ckptctl diff --------------------------------------------------------------------------

def diff(json_path, work, a, b):
    with open(json_path) as f:
        doc = json.load(f)
    (sa, ca), (sb, cb) = a.split("/"), b.split("/")
    wa, wb = expected_weights(work, sa, ca), expected_weights(work, sb, cb)
    by = {t["name"]: t for t in doc["tensors"]}
    for name in set(wa) | set(wb):
        t = by[name]
        if name not in wb:
            expect(t["status"] == "only_a", name)
        elif name not in wa:
            expect(t["status"] == "only_b", name)
        elif wa[name].shape != wb[name].shape or wa[name].dtype != wb[name].dtype:
            expect(t["status"] == "retyped", name)
        elif safetensors_ref.tensor_bytes(wa[name]) == safetensors_ref.tensor_bytes(wb[name]):
            expect(t["status"] == "identical" and t["rel_l2"] == 0, "%s: %s" % (name, t["status"]))
        else:
            want = rel_l2(wb[name], wa[name])
            mx = float(torch.max(torch.abs(wb[name].double() - wa[name].double())))
            expect(t["status"] == "changed", "%s: %s" % (name, t["status"]))
            expect(abs(t["rel_l2"] - want) <= 1e-9 * want and abs(t["max_abs"] - mx) <= 1e-9 * mx,
                   "%s: rel_l2 %r max_abs %r, expected %r %r" % (name, t["rel_l2"], t["max_abs"], want, mx))
    for layer in doc["layers"]:
        n = sum(1 for t in doc["tensors"] if t["layer"] == layer["layer"])
        expect(sum(layer[k] for k in ("identical", "changed", "only_a", "only_b", "retyped")) == n,
               "layer %s counts" % layer["layer"])
    print("diff %s %s: %d tensors as the files say" % (a, b, len(doc["tensors"])))


# --- an LLMTailor-style merge of the example trainer's checkpoints ------------------

TAILOR_RECIPE = {"slices": [("checkpoint-8", 0, 2), ("checkpoint-16", 2, 4)]}


def tailor_yaml(series):
    out = ["slices:"]
    for ck, a, b in TAILOR_RECIPE["slices"]:
        out += ["  - sources:", "      - model: %s/%s" % (series, ck), "        layer_range: [%d, %d]" % (a, b)]
    return "\n".join(out + ["merge_method: passthrough"]) + "\n"


def tailor_merge(series_dir, out):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples"))
    import llmtailor_train
    names = llmtailor_train.build(10, 0)[3]
    steps = sorted(int(n.split("-")[1]) for n in os.listdir(series_dir))

    def composite(ck, rel):
        upto = int(ck.split("-")[1])
        return merged([p for p in (os.path.join(series_dir, "checkpoint-%d" % s, rel) for s in steps if s <= upto)
                       if os.path.exists(p)])
    base = TAILOR_RECIPE["slices"][-1][0]
    blocks = []
    for ck, a, b in TAILOR_RECIPE["slices"]:
        blocks += [(ck, j) for j in range(a, b)]

    def source(name):
        blk = tinyllama.block_of(name)
        if blk is None:
            return base, name
        ck, j = blocks[blk]
        return ck, name.replace("layers.%d." % blk, "layers.%d." % j, 1)
    os.makedirs(out)
    sd = composite(base, "pytorch_model.bin")
    model = type(sd)()
    for k in sd:
        ck, src = source(k)
        model[k] = composite(ck, "pytorch_model.bin")[src]
    model._metadata = sd._metadata
    torch.save(model, os.path.join(out, "pytorch_model.bin"))
    osd = composite(base, "optimizer.pt")
    state = {}
    for idx in osd["state"]:
        ck, src = source(names[idx])
        state[idx] = composite(ck, "optimizer.pt")["state"][names.index(src)]
    torch.save({"state": state, "param_groups": osd["param_groups"]}, os.path.join(out, "optimizer.pt"))
    for rel in ("scheduler.pt", "rng_state.pth"):
        torch.save(composite(base, rel), os.path.join(out, rel))
    for rel in ("trainer_state.json", "config.json"):
        shutil.copyfile(os.path.join(series_dir, base, rel), os.path.join(out, rel))
    print("merged %s into %s" % (TAILOR_RECIPE, out))


def tailor_same(run_a, run_b, step):
    ck = "checkpoint-%s" % step
    for rel in ("pytorch_model.bin", "optimizer.pt", "scheduler.pt"):
        deepcompare.assert_same(torch.load(os.path.join(run_a, ck, rel), weights_only=False),
                                torch.load(os.path.join(run_b, ck, rel), weights_only=False),
                                "%s/%s" % (ck, rel))
    with open(os.path.join(run_a, ck, "trainer_state.json")) as f:
        a = json.load(f)
    with open(os.path.join(run_b, ck, "trainer_state.json")) as f:
        b = json.load(f)
    expect(a["log_history"] == b["log_history"], "loss histories differ")
    losses = [e["loss"] for e in a["log_history"]]
    expect(all(math.isfinite(x) for x in losses) and len(losses) == int(step), "losses: %s" % losses)
    print("resumed runs identical at %s; losses after the resume %s" % (ck, ["%.3f" % x for x in losses[-4:]]))


def write(path, text):
    with open(path, "w") as f:
        f.write(text)


def make_wide(out):
    narrow = tinyllama.CONFIG["intermediate_size"]
    tinyllama.CONFIG["intermediate_size"] = 96
    try:
        t = tinyllama.Trainer(7)
        t.train(2)
        t.save(os.path.join(out, "checkpoint-2"))
    finally:
        tinyllama.CONFIG["intermediate_size"] = narrow


def sources(json_path):
    d = json.load(open(json_path))
    steps = sorted((s["checkpoint"], s["tensors"]) for s in d["sources"])
    # odd blocks from 20, the rest from 10: 2 x 9 tensors from 20
    expect(d["checkpoint"] == "run/checkpoint-20" and steps == [("checkpoint-10", 21), ("checkpoint-20", 18)],
           "user.ckptfs.sources: %r" % d)
    expect(d["tensors"]["model.layers.1.mlp.up_proj.weight"] == "checkpoint-20", "user.ckptfs.sources: %r" % d)


def memmap(path):
    import numpy
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    _, tensors = safetensors_ref.load(path)
    count = 0
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        a, b = info["data_offsets"]
        m = numpy.memmap(path, dtype="<f4", mode="r", offset=8 + n + a, shape=tuple(info["shape"]) or ())
        expect(numpy.array_equal(m, tensors[name].numpy()), "memmap of %s differs" % name)
        count += 1
    expect(count >= 9, "only %d float32 tensors in %s" % (count, path))
    print("numpy memmaps of %d tensors of %s" % (count, os.path.basename(path)))


# --- DCP checkpoints ----------------------------------------------------------------------

# series: (ranks, the dimension matrices are split along)
DCP_SERIES = {"dcp1": (1, 0), "dcp2": (2, 0), "dcp2c": (2, 1), "dcp2g": (2, "grid")}


def dcp_save(work):
    import dcp_series
    for series, (ranks, dim) in DCP_SERIES.items():
        dcp_series.save(os.path.join(work, series), ranks=ranks, dim=dim)


def dcp_layer_of(name):
    if name.startswith("layers."):
        return "layers." + name.split(".")[1]
    return "embed" if name.startswith("embed_tokens.") else "head"


def dcp_expected(work, series, step, _cache={}):
    """layer -> {name: tensor}, and name -> [(step, tensor) of each save
    that stored it, up to step]: what torch's reader gives of the saves."""
    import dcp_series
    run = os.path.join(work, series)
    saves = []
    for s in dcp_series.STEPS:
        if s <= step:
            if (run, s) not in _cache:
                _cache[run, s] = dcp_series.load_all(os.path.join(run, "step-%d" % s))
            saves.append((s, _cache[run, s]))
    params = set(k[len("model."):] for _, sd in saves for k in sd if k.startswith("model."))
    layers, history = {}, {}
    for s, sd in saves:
        for fqn, t in sd.items():
            if not torch.is_tensor(t):
                continue
            if fqn.startswith("model."):
                name = fqn[len("model."):]
                layer = dcp_layer_of(name)
            elif fqn.startswith("optim.state."):
                param, moment = fqn[len("optim.state."):].rsplit(".", 1)
                expect(param in params, "%s: no parameter %s" % (fqn, param))
                name, layer = "optimizer.%s.%s" % (param, moment), dcp_layer_of(param)
            else:
                continue
            layers.setdefault(layer, {})[name] = t
            history.setdefault(name, []).append((s, t))
    return layers, history


def dcp(ctl, work):
    import dcp_series
    nt = 0
    for series in DCP_SERIES:
        for step in dcp_series.STEPS:
            ck = "step-%d" % step
            want, saves = dcp_expected(work, series, step)
            d = os.path.join(ctl, "weights", series, ck)
            got, _ = read_weights_dir(d)
            weights = {k: v for l in want.values() for k, v in l.items() if not k.startswith("optimizer.")}
            same_tensors(got, weights, d)
            expect(os.listdir(d) == ["model.safetensors"], "%s lists %s" % (d, os.listdir(d)))
            nt += len(got)
            d = os.path.join(ctl, "layers", series, ck)
            expect(sorted(os.listdir(d)) == sorted([l + ".safetensors" for l in want] + [l + ".json" for l in want]),
                   "%s lists %s" % (d, sorted(os.listdir(d))))
            for layer, tensors in want.items():
                path = os.path.join(d, layer + ".safetensors")
                md, got = safetensors_ref.load(path)
                same_tensors(got, tensors, path)
                with open(os.path.join(ctl, "history", series, layer, ck + ".safetensors"), "rb") as a, \
                        open(path, "rb") as b:
                    expect(a.read() == b.read(), "history/%s/%s/%s differs from layers/" % (series, layer, ck))
                with open(os.path.join(d, layer + ".json")) as f:
                    doc = json.load(f)
                expect(sorted(e["name"] for e in doc["tensors"]) == sorted(tensors), "%s.json names" % path)
                for e in doc["tensors"]:
                    stored_at = saves[e["name"]]
                    expect(e["source_step"] == stored_at[-1][0], "%s %s: source_step %s" % (d, e["name"], e["source_step"]))
                    if len(stored_at) < 2:
                        expect(e["previous_step"] is None and e["rel_l2"] is None, "%s %s: no previous save" % (d, e["name"]))
                        continue
                    expect(e["previous_step"] == stored_at[-2][0], "%s %s: previous_step" % (d, e["name"]))
                    want_l2 = rel_l2(stored_at[-1][1], stored_at[-2][1])
                    expect(e["rel_l2"] is not None and abs(e["rel_l2"] - want_l2) <= 1e-5 * max(want_l2, 1e-30) + 1e-12,
                           "%s %s: rel_l2 %r, expected %r" % (d, e["name"], e["rel_l2"], want_l2))
    print("weights/, layers/, history/ of DCP saves (1 rank; 2 split by rows, by columns, in blocks; partial saves): "
          "%d weights bit-exact" % nt)


COMMANDS = {
    "make": make,
    "make-wide": make_wide,
    "yaml": lambda name, out: write(out, recipe_yaml(name)),
    "weights": weights,
    "layers": layers,
    "history": history,
    "recipe": recipe,
    "diff": diff,
    "sources": sources,
    "memmap": memmap,
    "tailor-yaml": lambda series, out: write(out, tailor_yaml(series)),
    "tailor-merge": tailor_merge,
    "tailor-same": tailor_same,
    "dcp-save": dcp_save,
    "dcp": dcp,
}

if __name__ == "__main__":
    runs, cur = [], []
    for arg in sys.argv[1:]:
        if arg == "+":
            runs.append(cur)
            cur = []
        else:
            cur.append(arg)
    runs.append(cur)
    for run in runs:
        if not run or run[0] not in COMMANDS:
            sys.exit(__doc__)
        t0 = time.monotonic()
        COMMANDS[run[0]](*run[1:])
        print("  (%s: %.1f s)" % (" ".join(run[:1] + run[3:]), time.monotonic() - t0))
