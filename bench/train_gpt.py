#!/usr/bin/env python3
"""Train a small GPT-like model on CPU and save checkpoints for the packed
store's compression study (bench/compress.sh, docs/bench.md).

Run with Debian's torch 1.13: /usr/bin/python3 bench/train_gpt.py OUT

One seeded run writes four checkpoint series under OUT, each a directory of
step-NNNNN/ checkpoints:
  full/    model.pt (fp32) + optimizer.pt (AdamW state) every --every steps
  bf16/    model.pt cast to bfloat16 at the same saves (the fp32 master
           weights stay in full/)
  tailor/  the same saves filtered by an LLMTailor policy: the first block
           and the last two blocks every save, everything else (embeddings,
           other blocks, final norm, head) every 5th save; model and Adam
           state filtered alike
  frozen/  a fine-tune resumed from the last full save (model and AdamW
           state) with everything but the top two blocks, final norm and
           head frozen; full model.pt and optimizer.pt every --every steps
The text is byte-level tokens of the licence texts Debian ships.
"""
import argparse
import glob
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB = 256


class Block(nn.Module):
	def __init__(self, d, heads):
		super().__init__()
		self.heads = heads
		self.ln1 = nn.LayerNorm(d)
		self.qkv = nn.Linear(d, 3 * d)
		self.proj = nn.Linear(d, d)
		self.ln2 = nn.LayerNorm(d)
		self.fc = nn.Linear(d, 4 * d)
		self.out = nn.Linear(4 * d, d)

	def forward(self, x, mask):
		b, t, d = x.shape
		q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
		q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
		att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
		att = att.masked_fill(mask[:t, :t] == 0, float("-inf")).softmax(dim=-1)
		y = (att @ v).transpose(1, 2).reshape(b, t, d)
		x = x + self.proj(y)
		return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
	def __init__(self, layers, d, heads, ctx):
		super().__init__()
		self.tok = nn.Embedding(VOCAB, d)
		self.pos = nn.Embedding(ctx, d)
		self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
		self.ln_f = nn.LayerNorm(d)
		self.head = nn.Linear(d, VOCAB, bias=False)
		self.register_buffer("mask", torch.tril(torch.ones(ctx, ctx)), persistent=False)

	def forward(self, idx):
		t = idx.shape[1]
		x = self.tok(idx) + self.pos(torch.arange(t))
		for blk in self.blocks:
			x = blk(x, self.mask)
		return self.head(self.ln_f(x))


def corpus():
	paths = sorted(glob.glob("/usr/share/common-licenses/*"))
	paths += sorted(glob.glob("/usr/share/doc/*/copyright"))
	data = bytearray()
	for p in paths:
		try:
			with open(p, "rb") as f:
				data += f.read()
		except OSError:
			pass
	if len(data) < 100000:
		sys.exit("train_gpt: too little text under /usr/share")
	return torch.tensor(list(data), dtype=torch.long)


def save(dirpath, model_sd, optim_sd):
	os.makedirs(dirpath, exist_ok=True)
	torch.save(model_sd, os.path.join(dirpath, "model.pt"))
	if optim_sd is not None:
		torch.save(optim_sd, os.path.join(dirpath, "optimizer.pt"))


def tailor_keep(name, layers, every_save):
	"""LLMTailor policy: block 0 and the last two blocks at every save,
	the rest only at every 5th save."""
	if every_save:
		return True
	if name.startswith("blocks."):
		i = int(name.split(".")[1])
		return i == 0 or i >= layers - 2
	return False


def tailor_filter(model, opt, layers, every_save):
	names = [n for n, _ in model.named_parameters()]
	keep = {n for n in names if tailor_keep(n, layers, every_save)}
	msd = {k: v for k, v in model.state_dict().items() if k in keep}
	osd = opt.state_dict()
	# state_dict numbers parameters in param_groups order (one group here)
	ids = [i for i, n in enumerate(names) if n in keep]
	osd = {
		"state": {i: osd["state"][i] for i in ids if i in osd["state"]},
		"param_groups": [dict(osd["param_groups"][0], params=ids)],
	}
	return msd, osd


def batch(data, gen, bsz, ctx):
	ix = torch.randint(len(data) - ctx - 1, (bsz,), generator=gen)
	x = torch.stack([data[i:i + ctx] for i in ix])
	y = torch.stack([data[i + 1:i + ctx + 1] for i in ix])
	return x, y


def train(model, opt, data, gen, steps, args, on_save):
	for step in range(1, steps + 1):
		x, y = batch(data, gen, args.batch, args.ctx)
		loss = F.cross_entropy(model(x).view(-1, VOCAB), y.view(-1))
		opt.zero_grad(set_to_none=True)
		loss.backward()
		opt.step()
		if step % args.every == 0:
			on_save(step, loss.item())


def main():
	ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	ap.add_argument("out")
	ap.add_argument("--steps", type=int, default=200)
	ap.add_argument("--finetune-steps", type=int, default=100)
	ap.add_argument("--every", type=int, default=10)
	ap.add_argument("--layers", type=int, default=6)
	ap.add_argument("--d", type=int, default=256)
	ap.add_argument("--heads", type=int, default=8)
	ap.add_argument("--ctx", type=int, default=64)
	ap.add_argument("--batch", type=int, default=2)
	ap.add_argument("--lr", type=float, default=1e-3)
	ap.add_argument("--seed", type=int, default=1234)
	args = ap.parse_args()

	torch.manual_seed(args.seed)
	gen = torch.Generator().manual_seed(args.seed)
	data = corpus()
	model = GPT(args.layers, args.d, args.heads, args.ctx)
	opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)

	nsave = [0]

	def on_full(step, loss):
		name = "step-%05d" % step
		save(os.path.join(args.out, "full", name), model.state_dict(), opt.state_dict())
		save(os.path.join(args.out, "bf16", name),
		     {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}, None)
		every = nsave[0] % 5 == 0
		msd, osd = tailor_filter(model, opt, args.layers, every)
		save(os.path.join(args.out, "tailor", name), msd, osd)
		nsave[0] += 1
		print("full step %d loss %.3f" % (step, loss), flush=True)

	train(model, opt, data, gen, args.steps, args, on_full)

	# Fine-tune: resume from the last full save and freeze everything but
	# the top two blocks (and the final norm and head above them).  The
	# optimizer goes on as the trainer resumed it: AdamW skips parameters
	# without gradients, so the frozen ones keep their Adam state as it was.
	top = tuple("blocks.%d." % i for i in range(args.layers - 2, args.layers)) + ("ln_f.", "head.")
	for n, p in model.named_parameters():
		p.requires_grad = n.startswith(top)
	for g in opt.param_groups:
		g["lr"] = args.lr / 3

	def on_frozen(step, loss):
		name = "step-%05d" % (args.steps + step)
		save(os.path.join(args.out, "frozen", name), model.state_dict(), opt.state_dict())
		print("frozen step %d loss %.3f" % (args.steps + step, loss), flush=True)

	train(model, opt, data, gen, args.finetune_steps, args, on_frozen)


if __name__ == "__main__":
	main()
