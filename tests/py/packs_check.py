"""Checkpoints of a small training run, written through a writable mount,
read back after compaction (tests/integration/packs_mount.sh).

  packs_check.py train SERIES_DIR PLAIN_DIR FIRST LAST
      Trains a two-block GPT-like model with AdamW (seeded: the same run
      every time), saving full checkpoints number FIRST to LAST (model.pt,
      optimizer.pt, model.safetensors; one every 5 steps): into
      PLAIN_DIR/step-N/ first, then byte for byte into SERIES_DIR/tmp-step-N/
      (the mount), committed by renaming it to step-N.
      With "partial" after LAST, those saves hold block 1 only (its weights
      and their Adam state; model.pt and optimizer.pt), as LLMTailor saves.
  packs_check.py composite SERVED_DIR MERGED_DIR
      A composite checkpoint equals the offline merge (tests/py/
      offline_merge.py): torch.load deep-compared, safetensors tensors too.
  packs_check.py same SERIES_DIR PLAIN_DIR
      Every checkpoint of PLAIN_DIR reads back through the mount bit-exactly:
      whole files byte for byte, torch.load deep-compared, safetensors files
      read through mmap.
  packs_check.py loop SERIES_DIR PLAIN_DIR STOPFILE CKPT...
      Reads the files of the named checkpoints back and checks them as
      `same` does, over and over, until STOPFILE exists; prints how many
      passes it made.  Any difference or error ends it (exit 1).
  packs_check.py damaged SERIES_DIR PLAIN_DIR
      A pack was damaged: each file either reads back exactly or fails with
      EIO (never other bytes), and at least one fails.  Prints the count.

Several commands joined by "+" run in turn in one process.
"""

import errno
import mmap
import os
import sys

import torch
import torch.nn as nn

import safetensors_ref
from deepcompare import assert_loads_same

EVERY = 5


class Block(nn.Module):
	def __init__(self, d):
		super().__init__()
		self.ln = nn.LayerNorm(d)
		self.attn = nn.Linear(d, 3 * d)
		self.proj = nn.Linear(d, d)
		self.fc = nn.Linear(d, 4 * d)
		self.out = nn.Linear(4 * d, d)

	def forward(self, x):
		q, k, v = self.attn(self.ln(x)).chunk(3, dim=-1)
		att = (q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5).softmax(-1)
		x = x + self.proj(att @ v)
		return x + self.out(torch.relu(self.fc(x)))


class TinyGPT(nn.Module):
	def __init__(self, vocab=256, d=96, blocks=2):
		super().__init__()
		self.tok = nn.Embedding(vocab, d)
		self.blocks = nn.ModuleList(Block(d) for _ in range(blocks))
		self.head = nn.Linear(d, vocab, bias=False)

	def forward(self, idx):
		x = self.tok(idx)
		for b in self.blocks:
			x = b(x)
		return self.head(x)


def copy_file(src, dst):
	with open(src, "rb") as f:
		data = f.read()
	with open(dst, "wb") as f:
		f.write(data)


def block1_only(model, opt):
	"""The model and optimizer state of block 1 alone (an LLMTailor-style save)."""
	names = [n for n, _ in model.named_parameters()]
	keep = [i for i, n in enumerate(names) if n.startswith("blocks.1.")]
	msd = model.state_dict()	# an OrderedDict with _metadata, as trainers save it
	for k in [k for k in msd if not k.startswith("blocks.1.")]:
		del msd[k]
	osd = opt.state_dict()
	osd = {"state": {i: osd["state"][i] for i in keep},
	       "param_groups": [dict(osd["param_groups"][0], params=keep)]}
	return msd, osd


def train(series, plain, first, last, partial=False):
	torch.manual_seed(7)
	model = TinyGPT()
	opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
	gen = torch.Generator().manual_seed(7)
	for step in range(1, last * EVERY + 1):
		idx = torch.randint(0, 256, (4, 32), generator=gen)
		loss = nn.functional.cross_entropy(model(idx[:, :-1]).flatten(0, 1), idx[:, 1:].flatten())
		opt.zero_grad()
		loss.backward()
		opt.step()
		if step % EVERY or step < first * EVERY:
			continue
		name = "step-%d" % step
		pdir = os.path.join(plain, name)
		os.makedirs(pdir)
		if partial:
			msd, osd = block1_only(model, opt)
			torch.save(msd, os.path.join(pdir, "model.pt"))
			torch.save(osd, os.path.join(pdir, "optimizer.pt"))
		else:
			torch.save(model.state_dict(), os.path.join(pdir, "model.pt"))
			torch.save(opt.state_dict(), os.path.join(pdir, "optimizer.pt"))
			safetensors_ref.save({k: v.contiguous() for k, v in model.state_dict().items()},
					     os.path.join(pdir, "model.safetensors"))
		tmp = os.path.join(series, "tmp-" + name)
		os.mkdir(tmp)
		for f in sorted(os.listdir(pdir)):
			copy_file(os.path.join(pdir, f), os.path.join(tmp, f))
		os.rename(tmp, os.path.join(series, name))
		print("saved %s (loss %.3f)" % (name, loss.item()))


def read_mmap(path):
	with open(path, "rb") as f:
		with mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as m:
			return bytes(m)


def check_file(served, original):
	with open(original, "rb") as f:
		want = f.read()
	with open(served, "rb") as f:
		got = f.read()
	if got != want:
		raise AssertionError("%s: %d bytes differ from %s" % (served, len(got), original))
	if served.endswith(".pt"):
		assert_loads_same(served, original, served)
	elif served.endswith(".safetensors"):
		if read_mmap(served) != want:
			raise AssertionError("%s: mmap gives other bytes" % served)
		_, got_t = safetensors_ref.loads(read_mmap(served))
		_, want_t = safetensors_ref.load(original)
		if list(got_t) != list(want_t) or any(
				safetensors_ref.tensor_bytes(got_t[k]) != safetensors_ref.tensor_bytes(want_t[k])
				for k in want_t):
			raise AssertionError("%s: other tensors through mmap" % served)


def checkpoints(plain):
	return sorted(os.listdir(plain), key=lambda n: int(n.split("-")[1]))


def same(series, plain):
	n = 0
	for ck in checkpoints(plain):
		for f in sorted(os.listdir(os.path.join(plain, ck))):
			check_file(os.path.join(series, ck, f), os.path.join(plain, ck, f))
			n += 1
	print("%d files read back bit-exactly" % n)


def loop(series, plain, stop, names):
	passes = 0
	while not os.path.exists(stop) or passes == 0:
		for ck in names:
			for f in sorted(os.listdir(os.path.join(plain, ck))):
				check_file(os.path.join(series, ck, f), os.path.join(plain, ck, f))
		passes += 1
	print("%d passes over %s read back bit-exactly" % (passes, " ".join(names)))


def composite(served, merged):
	names = sorted(os.listdir(merged))
	if sorted(os.listdir(served)) != names:
		sys.exit("served files %s, merged %s" % (sorted(os.listdir(served)), names))
	for n in names:
		a, b = os.path.join(served, n), os.path.join(merged, n)
		if n.endswith(".safetensors"):
			_, got = safetensors_ref.loads(read_mmap(a))
			_, want = safetensors_ref.load(b)
			if list(got) != list(want) or any(safetensors_ref.tensor_bytes(got[k]) !=
							  safetensors_ref.tensor_bytes(want[k]) for k in want):
				raise AssertionError("%s: other tensors than the offline merge" % a)
		else:
			assert_loads_same(a, b, a)
	print("%s: %d files equal the offline merge" % (served, len(names)))


def damaged(series, plain):
	eio = good = 0
	for ck in checkpoints(plain):
		for f in sorted(os.listdir(os.path.join(plain, ck))):
			try:
				check_file(os.path.join(series, ck, f), os.path.join(plain, ck, f))
				good += 1
			except OSError as e:
				if e.errno != errno.EIO:
					raise
				eio += 1
				print("EIO: %s/%s" % (ck, f))
			except RuntimeError as e:
				# torch.load of a file whose read failed inside the zip reader
				if "EIO" not in str(e) and "Input/output error" not in str(e):
					raise
				eio += 1
				print("EIO (torch.load): %s/%s" % (ck, f))
	print("%d files exact, %d refused with EIO" % (good, eio))
	if not eio:
		sys.exit("the damaged pack was never noticed")


def run(argv):
	cmd = argv[0]
	if cmd == "train":
		train(argv[1], argv[2], int(argv[3]), int(argv[4]), len(argv) > 5 and argv[5] == "partial")
	elif cmd == "composite":
		composite(argv[1], argv[2])
	elif cmd == "same":
		same(argv[1], argv[2])
	elif cmd == "loop":
		loop(argv[1], argv[2], argv[3], argv[4:])
	elif cmd == "damaged":
		damaged(argv[1], argv[2])
	else:
		sys.exit("unknown command " + cmd)


def main():
	# Commands chained with "+" run in one process (torch imported once).
	argv = sys.argv[1:]
	while argv:
		n = argv.index("+") if "+" in argv else len(argv)
		run(argv[:n])
		argv = argv[n + 1:]


if __name__ == "__main__":
	main()
