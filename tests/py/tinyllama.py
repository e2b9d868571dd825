"""A tiny Llama-shaped language model, trained on CPU deterministically, and
saved the way the HF Trainer lays out a checkpoint -- fully, or only some
of its decoder blocks (a partial save, as LLMTailor does).

Parameter names follow HF Llama: model.embed_tokens, model.layers.N.
{input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm,
mlp.{gate,up,down}_proj}, model.norm, lm_head.  The optimizer is AdamW with
two parameter groups (decayed matrices, undecayed norms) like the Trainer's,
the scheduler a linear warmup/decay LambdaLR.  Every step's batch is drawn
from a generator seeded by (seed, step), so a run resumed from a checkpoint
sees exactly the batches an uninterrupted run would.

A checkpoint directory (checkpoint-N/) holds:
  model.safetensors   (tests/py/safetensors_ref.py writer, metadata format=pt)
  model.pt            torch.save(model.state_dict()), minus dropped blocks
  optimizer.pt        optimizer.state_dict(), 'state' minus dropped blocks
  scheduler.pt, trainer_state.json, config.json
"""

import json
import math
import os

import torch
from torch import nn

import safetensors_ref

CONFIG = {
    "architectures": ["TinyLlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "max_position_embeddings": 16,
    "rms_norm_eps": 1e-6,
    "torch_dtype": "float32",
}
BATCH, SEQ = 4, 16
LR, WARMUP, TOTAL_STEPS = 3e-3, 5, 100


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
        def heads(y):
            return y.view(b, t, self.heads, d // self.heads).transpose(1, 2)
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
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

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Backbone(nn.Module):
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


class TinyLlamaForCausalLM(nn.Module):
    def __init__(self, c=CONFIG):
        super().__init__()
        self.model = Backbone(c)
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        return self.lm_head(self.model(ids))


def block_of(name):
    """Decoder block index of a parameter name, or None (embed, norm, head)."""
    parts = name.split(".")
    if len(parts) > 2 and parts[:2] == ["model", "layers"]:
        return int(parts[2])
    return None


def lr_lambda(step):
    if step < WARMUP:
        return (step + 1) / WARMUP
    return max(0.0, (TOTAL_STEPS - step) / (TOTAL_STEPS - WARMUP))


class Trainer:
    """Model, AdamW and scheduler, built the same way each time from a seed."""

    def __init__(self, seed=0):
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.seed = seed
        self.step = 0
        self.losses = []
        self.model = TinyLlamaForCausalLM()
        named = list(self.model.named_parameters())
        decay = [(n, p) for n, p in named if p.dim() >= 2]
        no_decay = [(n, p) for n, p in named if p.dim() < 2]
        # Optimizer state is keyed by index, assigned group by group.
        self.param_names = [n for n, _ in decay + no_decay]
        self.opt = torch.optim.AdamW([
            {"params": [p for _, p in decay], "weight_decay": 0.01},
            {"params": [p for _, p in no_decay], "weight_decay": 0.0},
        ], lr=LR)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lr_lambda)

    def batch(self, step):
        """Arithmetic sequences mod vocab (start and stride random): learnable."""
        g = torch.Generator().manual_seed(self.seed * 100003 + step)
        start = torch.randint(CONFIG["vocab_size"], (BATCH, 1), generator=g)
        stride = torch.randint(1, 4, (BATCH, 1), generator=g)
        ids = (start + stride * torch.arange(SEQ + 1)) % CONFIG["vocab_size"]
        return ids[:, :-1], ids[:, 1:]

    def train(self, steps):
        for _ in range(steps):
            self.step += 1
            inputs, targets = self.batch(self.step)
            logits = self.model(inputs)
            loss = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                               targets.reshape(-1))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.sched.step()
            self.losses.append(loss.item())
        return self.losses[-steps:] if steps else []

    def save(self, ckpt_dir, blocks=None, extra_files=None):
        """Writes an HF-Trainer-style checkpoint.  blocks=None saves everything;
        a set of block indices makes a partial save holding only those decoder
        blocks' weights and optimizer state (scheduler, trainer state and
        config stay whole)."""
        os.makedirs(ckpt_dir, exist_ok=True)

        def keep(name):
            return blocks is None or block_of(name) in blocks
        sd = self.model.state_dict()
        for name in [n for n in sd if not keep(n)]:
            del sd[name]   # keeps the OrderedDict and its _metadata, as a trainer would
        safetensors_ref.save(sd, os.path.join(ckpt_dir, "model.safetensors"), {"format": "pt"})
        torch.save(sd, os.path.join(ckpt_dir, "model.pt"))
        osd = self.opt.state_dict()
        for idx in [i for i in osd["state"] if not keep(self.param_names[i])]:
            del osd["state"][idx]
        torch.save(osd, os.path.join(ckpt_dir, "optimizer.pt"))
        torch.save(self.sched.state_dict(), os.path.join(ckpt_dir, "scheduler.pt"))
        state = {"global_step": self.step, "max_steps": TOTAL_STEPS,
                 "log_history": [{"step": i + 1, "loss": l} for i, l in enumerate(self.losses)],
                 "train_batch_size": BATCH}
        _write_json(os.path.join(ckpt_dir, "trainer_state.json"), state, sort_keys=True)
        _write_json(os.path.join(ckpt_dir, "config.json"), CONFIG)
        for name, content in (extra_files or {}).items():
            with open(os.path.join(ckpt_dir, name), "w") as f:
                f.write(content)

    def load(self, ckpt_dir, weights="model.pt"):
        """Resumes from a checkpoint directory (a plain one or a composite in a mount)."""
        path = os.path.join(ckpt_dir, weights)
        if weights.endswith(".safetensors"):
            _, sd = safetensors_ref.load(path)
        else:
            sd = torch.load(path, map_location="cpu")
        self.model.load_state_dict(sd, strict=True)
        self.opt.load_state_dict(torch.load(os.path.join(ckpt_dir, "optimizer.pt")))
        self.sched.load_state_dict(torch.load(os.path.join(ckpt_dir, "scheduler.pt")))
        with open(os.path.join(ckpt_dir, "trainer_state.json")) as f:
            state = json.load(f)
        self.step = state["global_step"]
        self.losses = [e["loss"] for e in state["log_history"]]

    def snapshot(self):
        """Everything a resumed run must reproduce, for a deep comparison."""
        return {"model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(), "step": self.step, "losses": self.losses}


def _write_json(path, obj, sort_keys=False):
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=sort_keys) + "\n")
