"""Writes a small training-like series for the packed store's tests.

    packs_make.py OUT NCKPT [SEED] [--same] [--partial] [--every N]

OUT/checkpoint-<10*i>/ for i = 1..NCKPT, each with model.pt (a state dict:
a frozen embedding, layers updated a little every save, a bfloat16 copy,
a tensor larger than one 1 MiB chunk), optimizer.pt (Adam-like moments)
and trainer_state.json.  --same writes identical checkpoints (dedup);
--partial leaves layers.1.weight out of every second save (a partial save,
which also shifts the torch storage keys of what follows it); --every N
keeps it only in saves 1, 1 + N, 1 + 2N ... (an LLMTailor-like policy).
Seeded: the same arguments give the same tensors.
"""
import json
import os
import sys

import torch


def main():
    out, n = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 and not sys.argv[3].startswith("--") else 1
    same = "--same" in sys.argv
    partial = "--partial" in sys.argv
    every = int(sys.argv[sys.argv.index("--every") + 1]) if "--every" in sys.argv else 0
    g = torch.Generator().manual_seed(seed)
    state = {
        "embed.weight": torch.randn(512, 64, generator=g),          # frozen
        "layers.0.weight": torch.randn(256, 256, generator=g),
        "layers.0.bias": torch.randn(256, generator=g),
        "layers.1.weight": torch.randn(640, 512, generator=g),     # 1.25 MiB: two chunks
        "head.weight": torch.randn(64, 256, generator=g),
    }
    exp_avg = {k: torch.zeros_like(v) for k, v in state.items()}
    exp_avg_sq = {k: torch.zeros_like(v) for k, v in state.items()}
    for i in range(1, n + 1):
        if not same or i == 1:
            for k, v in state.items():
                if k == "embed.weight":
                    continue
                grad = torch.randn(v.shape, generator=g) * 0.01
                exp_avg[k].mul_(0.9).add_(grad, alpha=0.1)
                exp_avg_sq[k].mul_(0.999).addcmul_(grad, grad, value=0.001)
                v.sub_(exp_avg[k] / (exp_avg_sq[k].sqrt() + 1e-8) * 1e-4)
        d = os.path.join(out, "checkpoint-%d" % (10 * i))
        os.makedirs(d, exist_ok=True)
        model = dict(state)
        if (partial and i % 2 == 0) or (every and (i - 1) % every):
            del model["layers.1.weight"]
        model["head.weight.bf16"] = state["head.weight"].to(torch.bfloat16)
        torch.save(model, os.path.join(d, "model.pt"))
        torch.save({"state": {k: {"exp_avg": exp_avg[k], "exp_avg_sq": exp_avg_sq[k]} for k in state},
                    "step": 10 * i}, os.path.join(d, "optimizer.pt"))
        with open(os.path.join(d, "trainer_state.json"), "w") as f:
            json.dump({"global_step": 10 * i, "log_history": [{"loss": 1.0 / i}]}, f)


if __name__ == "__main__":
    main()
