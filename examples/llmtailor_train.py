#!/usr/bin/python3
"""Train a small Llama-shaped model on CPU and checkpoint it LLMTailor-style.

The output directory is meant to be a ckptfs mount (a series directory in
it, e.g. MNT/run): every K steps the trainer writes checkpoint-N/ the way
the Hugging Face Trainer lays one out, and ckptfs commits it a moment
after its completion marker, trainer_state.json, is closed.  Most saves are partial,
as LLMTailor does: they hold only half of the decoder blocks, and the
optimizer state of only those parameters.  Resuming needs no merge tool:
in the mount, every committed checkpoint reads back as a complete one (each
parameter from the newest save that has it).

  llmtailor_train.py --out MNT/run                  train 40 steps, save every 4
  llmtailor_train.py --out MNT/run --kill-at 23     ... and SIGKILL itself at step 23
  llmtailor_train.py --out MNT/run --resume         go on from the newest committed one
  llmtailor_train.py --out MNT/run --policy full    every save holds everything
  llmtailor_train.py --out MNT/run --emergency      also save when ckptfs asks (GPU health)

Emergency saves (--emergency, ckptfs mounted with -o health=nvml): every
step the trainer looks for OUT/trigger_checkpoint.flag, and when ckptfs has
put one there (a GPU's risk score reached the threshold) it saves
checkpoint-STEP at once and waits until ckptfs has committed it.  The save
holds everything, or with --emergency-partial F and --store STORE the
fraction F of the layers that changed most by `ckptctl stats` (the ckptfs
Python package's EmergencyWatch).

Save policy (--policy llmtailor, the default; saves counted from 1):
  save 1, 1+F, 1+2F, ...   everything                        (F = --full-every)
  the others, alternately  odd blocks + final norm + lm_head,
                           even blocks + embeddings
so any two partial saves in a row cover the whole model.

A checkpoint directory holds, written in this order:
  config.json          the model's shape
  pytorch_model.bin    model.state_dict(), minus the parts not saved
  optimizer.pt         AdamW state_dict(); 'state' only for the saved parameters
  scheduler.pt         the LR scheduler (linear warmup, cosine decay)
  rng_state.pth        Python, NumPy and torch RNG states (data order, dropout)
  trainer_state.json   step, loss history, what was saved: the marker, last

Everything is seeded and runs on one CPU thread with deterministic
algorithms, so a run that is killed and resumed from a full checkpoint ends
bit-identical to one that never stopped.  Needs torch (Debian's
python3-torch 1.13 works), numpy and the ckptfs package (installed, or
PYTHONPATH=python in the source tree).
"""

import argparse
import json
import math
import os
import random
import re
import shutil
import sys
import time

import numpy as np
import torch
from torch import nn

try:
    import ckptfs
except ImportError:
    sys.exit("%s needs the ckptfs Python package: install ckptfs, or run from a source tree with "
             "PYTHONPATH=python" % os.path.basename(sys.argv[0]))

# --- the model: Llama-shaped, byte-level, with HF Llama parameter names --------

CONFIG = {
    "vocab_size": 256,          # bytes of the text
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "rms_norm_eps": 1e-6,
    "dropout": 0.1,             # dropout draws from the torch RNG: resume must restore it
}
SEQ, BATCH = 32, 4
LR, WARMUP = 3e-3, 4


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(d, d, bias=False)
        self.k_proj = nn.Linear(d, d, bias=False)
        self.v_proj = nn.Linear(d, d, bias=False)
        self.o_proj = nn.Linear(d, d, bias=False)

    def forward(self, x):
        b, t, d = x.shape

        def split(y):
            return y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    def __init__(self, d, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(d, ffn, bias=False)
        self.up_proj = nn.Linear(d, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.self_attn = Attention(c["hidden_size"], c["num_attention_heads"])
        self.post_attention_layernorm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.mlp = MLP(c["hidden_size"], c["intermediate_size"])
        self.dropout = nn.Dropout(c["dropout"])

    def forward(self, x):
        x = x + self.dropout(self.self_attn(self.input_layernorm(x)))
        return x + self.dropout(self.mlp(self.post_attention_layernorm(x)))


class LlamaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, c=CONFIG):
        super().__init__()
        self.model = LlamaModel(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


# --- data: bytes of whatever text the system has --------------------------------

def load_corpus(limit=1 << 18):
    """Debian's license texts as bytes (sorted, so every run sees the same
    corpus); synthetic 'text' from a fixed generator where there are none."""
    root = "/usr/share/common-licenses"
    data = bytearray()
    if os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            path = os.path.join(root, name)
            if os.path.isfile(path) and len(data) < limit:
                with open(path, "rb") as f:
                    data += f.read(limit - len(data))
    if len(data) < 4 * SEQ:
        g = torch.Generator().manual_seed(0)
        words = torch.randint(97, 123, (64, 6), generator=g)
        picks = torch.randint(64, (limit // 7,), generator=g)
        data = bytearray(b" ".join(bytes(words[i].tolist()) for i in picks.tolist()))
    return torch.tensor(list(data), dtype=torch.long)


def sample_batch(corpus):
    """Random windows; drawn from the global torch RNG, whose state each
    checkpoint saves, so a resumed run sees the batches a straight run would."""
    starts = torch.randint(len(corpus) - SEQ - 1, (BATCH,))
    windows = torch.stack([corpus[s:s + SEQ + 1] for s in starts.tolist()])
    return windows[:, :-1], windows[:, 1:]


# --- optimizer and schedule, as the HF Trainer builds them ------------------------

def build(total_steps, seed):
    """Model, AdamW (decayed matrices, undecayed norms) and a warmup+cosine
    LambdaLR, built identically from the seed on every start."""
    torch.manual_seed(seed)
    model = LlamaForCausalLM()
    named = list(model.named_parameters())
    decay = [(n, p) for n, p in named if p.dim() >= 2]
    no_decay = [(n, p) for n, p in named if p.dim() < 2]
    opt = torch.optim.AdamW([
        {"params": [p for _, p in decay], "weight_decay": 0.01},
        {"params": [p for _, p in no_decay], "weight_decay": 0.0},
    ], lr=LR)
    # optimizer.state_dict() keys its 'state' by position in the groups.
    param_names = [n for n, _ in decay + no_decay]

    def schedule(step):
        if step < WARMUP:
            return (step + 1) / WARMUP
        progress = (step - WARMUP) / max(1, total_steps - WARMUP)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    return model, opt, sched, param_names


# --- the LLMTailor save policy ----------------------------------------------------

def part_of(param_name):
    """'embed', 'layers.N', 'norm' or 'head': the unit a save keeps or skips."""
    m = re.match(r"model\.layers\.(\d+)\.", param_name)
    if m:
        return "layers." + m.group(1)
    if param_name.startswith("model.embed_tokens."):
        return "embed"
    if param_name.startswith("model.norm."):
        return "norm"
    return "head"


def parts_to_save(save_index, policy, full_every):
    """The parts the save_index-th save (from 1) holds."""
    blocks = range(CONFIG["num_hidden_layers"])
    everything = {"embed", "norm", "head"} | {"layers.%d" % i for i in blocks}
    if policy == "full" or (save_index - 1) % full_every == 0:
        return everything
    if (save_index - 1) % full_every % 2 == 1:
        return {"norm", "head"} | {"layers.%d" % i for i in blocks if i % 2 == 1}
    return {"embed"} | {"layers.%d" % i for i in blocks if i % 2 == 0}


def describe(parts):
    n = CONFIG["num_hidden_layers"]
    if len(parts) == n + 3:
        return "everything"
    blocks = sorted(int(p.split(".")[1]) for p in parts if p.startswith("layers."))
    others = sorted(p for p in parts if not p.startswith("layers."))
    return "blocks %s + %s" % (",".join(map(str, blocks)), ", ".join(others))


# --- checkpoints --------------------------------------------------------------------

def die(why):
    print("  killing myself (SIGKILL) %s" % why, flush=True)
    os.kill(os.getpid(), 9)


def save_checkpoint(ckpt_dir, t, parts, kill_midway=False, emergency=None, changed_most=None):
    """Writes one HF-Trainer-style checkpoint holding only `parts`."""
    os.makedirs(ckpt_dir, exist_ok=True)
    with open(os.path.join(ckpt_dir, "config.json"), "w") as f:
        json.dump(dict(CONFIG, architectures=["LlamaForCausalLM"], model_type="llama"), f, indent=2)
        f.write("\n")
    sd = t.model.state_dict()
    for name in [n for n in sd if part_of(n) not in parts]:
        del sd[name]   # keeps the OrderedDict and its _metadata, as HF does
    torch.save(sd, os.path.join(ckpt_dir, "pytorch_model.bin"))
    if kill_midway:
        die("in the middle of saving %s" % ckpt_dir)
    osd = t.opt.state_dict()
    for index in [i for i in osd["state"] if part_of(t.param_names[i]) not in parts]:
        del osd["state"][index]
    torch.save(osd, os.path.join(ckpt_dir, "optimizer.pt"))
    torch.save(t.sched.state_dict(), os.path.join(ckpt_dir, "scheduler.pt"))
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                "cpu": torch.get_rng_state()}, os.path.join(ckpt_dir, "rng_state.pth"))
    # The completion marker goes last: a moment after it is closed, ckptfs
    # commits the directory as a checkpoint of its series.
    state = {"global_step": t.step, "max_steps": t.total_steps,
             "log_history": [{"step": i + 1, "loss": loss} for i, loss in enumerate(t.losses)],
             "train_batch_size": BATCH, "saved_parts": sorted(parts)}
    if emergency:
        state["emergency"] = emergency     # the reason ckptfs gave
    if changed_most:
        state["changed_most"] = changed_most   # the ranking a partial emergency save chose by
    with open(os.path.join(ckpt_dir, "trainer_state.json"), "w") as f:
        json.dump(state, f, indent=2, sort_keys=True)
        f.write("\n")


def load_checkpoint(ckpt_dir, t):
    """Restores model, optimizer, scheduler, RNG and step from a complete
    checkpoint: a plain directory, or a composite in a ckptfs mount."""
    t.model.load_state_dict(torch.load(os.path.join(ckpt_dir, "pytorch_model.bin")), strict=True)
    t.opt.load_state_dict(torch.load(os.path.join(ckpt_dir, "optimizer.pt")))
    t.sched.load_state_dict(torch.load(os.path.join(ckpt_dir, "scheduler.pt")))
    rng = torch.load(os.path.join(ckpt_dir, "rng_state.pth"), weights_only=False)   # numpy state: own, trusted file
    random.setstate(rng["python"])
    np.random.set_state(rng["numpy"])
    torch.set_rng_state(rng["cpu"])
    with open(os.path.join(ckpt_dir, "trainer_state.json")) as f:
        state = json.load(f)
    t.step = state["global_step"]
    t.losses = [e["loss"] for e in state["log_history"]]


def is_committed(ckpt_dir, mounted):
    """In a ckptfs mount, ckptfs's rule (a committed checkpoint carries
    user.ckptfs.step, an in-progress directory does not); elsewhere, HF's:
    the marker is there."""
    if not mounted:
        return os.path.exists(os.path.join(ckpt_dir, "trainer_state.json"))
    return ckptfs.is_committed(ckpt_dir)


def checkpoints(out):
    """(step, path) of every checkpoint-N directory in out, oldest first."""
    found = []
    for name in os.listdir(out) if os.path.isdir(out) else []:
        m = re.fullmatch(r"checkpoint-(\d+)", name)
        if m and os.path.isdir(os.path.join(out, name)):
            found.append((int(m.group(1)), os.path.join(out, name)))
    return sorted(found)


def newest_committed(out, discard_others=False):
    """The newest committed checkpoint directory in out, or None.  A save
    whose marker was just closed is committed by ckptfs a moment later:
    wait for it.  With discard_others, what a killed run left half-written
    (in-progress directories) is removed, so the steps it covered can be
    saved again from scratch."""
    mounted = ckptfs.in_mount(out)
    newest = None
    for step, path in checkpoints(out):
        if mounted and os.path.exists(os.path.join(path, "trainer_state.json")):
            deadline = time.monotonic() + 10
            while not is_committed(path, True) and os.path.isdir(path) and time.monotonic() < deadline:
                time.sleep(0.05)
        if is_committed(path, mounted):
            newest = path
        elif discard_others and os.path.isdir(path):
            print("  removing %s: never committed (a killed save)" % path)
            shutil.rmtree(path)
    return newest


# --- training ----------------------------------------------------------------------

class Run:
    """Model, optimizer, scheduler and progress of one training run."""

    def __init__(self, total_steps, seed):
        self.model, self.opt, self.sched, self.param_names = build(total_steps, seed)
        self.total_steps = total_steps
        self.step = 0
        self.losses = []


def train(args):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    random.seed(args.seed)
    np.random.seed(args.seed)
    t = Run(args.steps, args.seed)   # seeds torch
    corpus = load_corpus()

    resume_dir = args.resume_from
    if args.resume:
        resume_dir = newest_committed(args.out, discard_others=True)
        if resume_dir is None:
            print("  nothing committed in %s yet: starting from scratch" % args.out)
    if resume_dir:
        load_checkpoint(resume_dir, t)
        print("  resumed at step %d from %s" % (t.step, resume_dir), flush=True)

    os.makedirs(args.out, exist_ok=True)
    watch = None
    if args.emergency:
        watch = ckptfs.EmergencyWatch(args.out, store=args.store, partial=args.emergency_partial,
                               ckptctl=args.ckptctl)
    kill_at = args.kill_at
    t.model.train()
    while t.step < args.steps:
        if args.step_delay:
            time.sleep(args.step_delay)
        inputs, targets = sample_batch(corpus)
        logits = t.model(inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        t.opt.zero_grad()
        loss.backward()
        t.opt.step()
        t.sched.step()
        t.step += 1
        t.losses.append(loss.item())

        saving = t.step % args.save_every == 0
        if t.step == kill_at and not (saving and args.kill_in_save):
            die("after step %d" % t.step)
        reason = watch.check() if watch else None
        if reason:
            # At once, in place of this step's regular save if it has one.
            parts = watch.parts() or parts_to_save(1, "full", 1)
            name = "checkpoint-%d" % t.step
            save_checkpoint(os.path.join(args.out, name), t, parts, emergency=reason,
                            changed_most=watch.ranking)
            committed = watch.answered(reason, os.path.join(args.out, name))
            print("  step %3d  loss %.4f  emergency save %s (GPU %s risk %.3f): %s%s"
                  % (t.step, loss.item(), name, reason.get("gpu"), reason.get("score", 0.0), describe(parts),
                     "" if committed else ", NOT committed"), flush=True)
            if args.kill_after_emergency is not None:
                kill_at = t.step + args.kill_after_emergency
                if args.kill_after_emergency == 0:
                    die("right after the emergency save at step %d" % t.step)
        elif saving:
            parts = parts_to_save(t.step // args.save_every, args.policy, args.full_every)
            name = "checkpoint-%d" % t.step
            save_checkpoint(os.path.join(args.out, name), t, parts,
                            kill_midway=t.step == args.kill_at)
            print("  step %3d  loss %.4f  saved %s: %s" % (t.step, loss.item(), name, describe(parts)),
                  flush=True)
    print("  done: step %d, loss %.4f" % (t.step, t.losses[-1] if t.losses else float("nan")))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", required=True, help="where checkpoint-N/ go (a series directory in the mount)")
    p.add_argument("--steps", type=int, default=40, help="train until this step (default 40)")
    p.add_argument("--save-every", type=int, default=4, metavar="K", help="save every K steps (default 4)")
    p.add_argument("--policy", choices=("llmtailor", "full"), default="llmtailor")
    p.add_argument("--full-every", type=int, default=4, metavar="F",
                   help="llmtailor: every F-th save holds everything (default 4)")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--resume", action="store_true",
                   help="go on from the newest committed checkpoint in --out")
    p.add_argument("--resume-from", metavar="DIR", help="go on from this checkpoint directory")
    p.add_argument("--kill-at", type=int, metavar="STEP",
                   help="SIGKILL itself right after step STEP's update")
    p.add_argument("--kill-in-save", action="store_true",
                   help="with --kill-at at a save step: die halfway through that save instead")
    p.add_argument("--emergency", action="store_true",
                   help="save at once when ckptfs puts trigger_checkpoint.flag in --out")
    p.add_argument("--emergency-partial", type=float, metavar="F",
                   help="emergency saves hold the fraction F of the layers that changed most (needs --store)")
    p.add_argument("--store", help="the ckptfs store behind the mount (for --emergency-partial)")
    p.add_argument("--ckptctl", help="ckptctl to run (default: $CKPTCTL, the source tree's, or PATH's)")
    p.add_argument("--kill-after-emergency", type=int, metavar="N",
                   help="SIGKILL itself N steps after an emergency save (a GPU that then fails)")
    p.add_argument("--step-delay", type=float, default=0.0, metavar="SEC",
                   help="sleep SEC seconds every step (a step as long as a real one)")
    args = p.parse_args(argv)
    if args.resume and args.resume_from:
        p.error("--resume and --resume-from exclude each other")
    if args.save_every < 1 or args.full_every < 1:
        p.error("--save-every and --full-every must be at least 1")
    if args.emergency_partial is not None and not (0 < args.emergency_partial <= 1 and args.store):
        p.error("--emergency-partial needs a fraction in (0, 1] and --store")
    return args


if __name__ == "__main__":
    train(parse_args())
