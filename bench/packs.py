#!/usr/bin/env python3
"""The packed store through the mount, on a real training run.

bench/train_gpt.py trains a small GPT (6 blocks, d=256, AdamW) with torch
1.13 on CPU; here every checkpoint it saves goes through a writable ckptfs
mount (torch.save into SERIES/tmp-step-N/, committed by renaming it to
step-N).  Each of its four series gets a store of its own, so that sizes
are per scenario: full saves (fp32 model + AdamW state), the bf16 model
file, an LLMTailor filter policy and a frozen fine-tune.  Then

  - `ckptctl compact STORE --keep-raw 1` packs every checkpoint but the
    newest and removes their raw files: its wall and CPU time give the
    compaction throughput;
  - physical/logical sizes: logical = the bytes of every checkpoint file,
    physical = pack files + raw files left (the newest checkpoint, which
    stays raw), and the packed part alone (packed versions vs packs);
  - torch.load of model.pt + optimizer.pt through a fresh read-only mount,
    of the newest checkpoint (raw) and of the oldest (the far end of its
    reverse-delta chain), against torch.load of the store's own raw copy
    of the newest (same sizes, page cache warm for both), timed in turn.

Run through bench/packs.sh; prints a Markdown table for docs/bench.md.
"""
import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_gpt  # noqa: E402  (D's training run, reused as it is)

SERIES = ("full", "bf16", "tailor", "frozen")
CKPTFS = os.environ.get("CKPTFS", "ckptfs")
CKPTCTL = os.environ.get("CKPTCTL", "ckptctl")


def log(msg):
	print(msg, file=sys.stderr, flush=True)


def umount(mnt):
	subprocess.run(["fusermount3", "-u", mnt], check=True)
	for _ in range(100):
		with open("/proc/mounts") as f:
			if " %s fuse" % mnt not in f.read():
				return
		time.sleep(0.05)


def tree_bytes(path):
	total = 0
	for root, _, files in os.walk(path):
		for f in files:
			total += os.lstat(os.path.join(root, f)).st_size
	return total


# --- training through the mounts ----------------------------------------------

class Saver:
	"""train_gpt.save, redirected into the writable mounts."""

	def __init__(self, mounts):
		self.mounts = mounts
		self.seconds = 0.0
		self.bytes = 0

	def __call__(self, dirpath, model_sd, optim_sd):
		series, name = dirpath.rstrip("/").split("/")[-2:]
		top = os.path.join(self.mounts[series], series)
		os.makedirs(top, exist_ok=True)
		tmp = os.path.join(top, "tmp-" + name)
		os.mkdir(tmp)
		t = time.perf_counter()
		for fname, sd in (("model.pt", model_sd), ("optimizer.pt", optim_sd)):
			if sd is not None:
				torch.save(sd, os.path.join(tmp, fname))
				self.bytes += os.path.getsize(os.path.join(tmp, fname))
		os.rename(tmp, os.path.join(top, name))	# the commit
		self.seconds += time.perf_counter() - t


def train(work, steps, finetune_steps):
	mounts = {}
	for s in SERIES:
		store, mnt = os.path.join(work, "store-" + s), os.path.join(work, "mnt-" + s)
		subprocess.run([CKPTCTL, "init", store], check=True, stdout=subprocess.DEVNULL)
		os.makedirs(mnt, exist_ok=True)
		subprocess.run([CKPTFS, store, mnt, "-o", "compact=0"], check=True)
		mounts[s] = mnt
	saver = Saver(mounts)
	train_gpt.save = saver
	argv = sys.argv
	sys.argv = ["train_gpt.py", os.path.join(work, "unused"), "--steps", str(steps),
		    "--finetune-steps", str(finetune_steps)]
	t = time.perf_counter()
	try:
		train_gpt.main()
	finally:
		sys.argv = argv
		for mnt in mounts.values():
			umount(mnt)
	log("trained in %.0f s; torch.save + commit through the mounts: %.0f MB in %.1f s" %
	    (time.perf_counter() - t, saver.bytes / 1e6, saver.seconds))


# --- compaction and sizes ---------------------------------------------------------

def checkpoints(store, series):
	d = os.path.join(store, "data", series)
	return sorted(os.listdir(d))


def compact(store):
	before = resource.getrusage(resource.RUSAGE_CHILDREN)
	t = time.perf_counter()
	out = subprocess.run([CKPTCTL, "compact", store, "--keep-raw", "1"], check=True,
			     capture_output=True, text=True)
	wall = time.perf_counter() - t
	after = resource.getrusage(resource.RUSAGE_CHILDREN)
	cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
	return wall, cpu, out.stdout + out.stderr


def measure(work, series, keep_logical):
	store = os.path.join(work, "store-" + series)
	names = checkpoints(store, series)
	data = os.path.join(store, "data", series)
	logical = tree_bytes(data)
	newest = tree_bytes(os.path.join(data, names[-1]))
	wall, cpu, out = compact(store)
	raw_left = tree_bytes(data)
	packs = tree_bytes(os.path.join(store, "packs"))
	r = {
		"series": series, "ckpts": len(names), "logical": logical, "packs": packs,
		"raw_left": raw_left, "physical": packs + raw_left,
		"ratio": logical / (packs + raw_left),
		"packed_ratio": (logical - newest) / packs if packs else float("nan"),
		"compact_wall": wall, "compact_cpu": cpu,
		"compact_mbps": (logical - newest) / 1e6 / wall,
		"compact_mbps_core": (logical - newest) / 1e6 / cpu if cpu else float("nan"),
		"oldest": names[0], "newest": names[-1], "compact_out": out.strip(),
	}
	keep_logical[series] = logical
	return r


# --- torch.load through the mount -------------------------------------------------

def load_ckpt(d):
	for f in ("model.pt", "optimizer.pt"):
		p = os.path.join(d, f)
		if os.path.exists(p):
			torch.load(p, map_location="cpu")


# One load in a process of its own, as a trainer resuming loads: into
# memory it has not touched yet.  In one long-lived process glibc's
# dynamic mmap threshold lets some loads reuse freed heap and others fault
# fresh pages in, and the baseline swings (docs/bench.md, "packs.sh").
LOAD_ONE = """
import sys, time, torch
t = time.perf_counter()
for f in ("model.pt", "optimizer.pt"):
	torch.load(sys.argv[1] + "/" + f, map_location="cpu")
print(time.perf_counter() - t)
"""


def timed_load(d):
	out = subprocess.run([sys.executable, "-c", LOAD_ONE, d], check=True, capture_output=True, text=True)
	return float(out.stdout)


def load_times(work, series, ckpt, runs, mount_opts, plain):
	"""Median torch.load times of ckpt through a fresh read-only mount each
	run: (first open included, i.e. the composite's build; load alone, the
	composite built by a stat first; the same load again in that mount).
	Each run also times a load of the plain directory, appended to plain:
	interleaved, both see the allocator in the same state (a load into
	memory the process has not used before takes several times longer),
	before the mount's loads in one run and after them in the next (of
	loads in new processes back to back, one is often the slower on VM A,
	whichever file it reads: docs/bench.md, "The bench's own order")."""
	store, mnt = os.path.join(work, "store-" + series), os.path.join(work, "mnt-" + series)
	first, alone, again = [], [], []
	opts = "ro" + ("," + mount_opts if mount_opts else "")
	for built in (False, True):
		for i in range(runs):
			if i % 2 == 0:
				plain[1].append(timed_load(plain[0]))
			subprocess.run([CKPTFS, store, mnt, "-o", opts], check=True)
			try:
				d = os.path.join(mnt, series, ckpt)
				if built:
					for f in os.listdir(d):
						os.stat(os.path.join(d, f))
				(alone if built else first).append(timed_load(d))
				if built:
					again.append(timed_load(d))
			finally:
				umount(mnt)
			if i % 2:
				plain[1].append(timed_load(plain[0]))
	return statistics.median(first), statistics.median(alone), statistics.median(again)


def plain_dir(work, series, ckpt):
	d = os.path.join(work, "store-" + series, "data", series, ckpt)
	load_ckpt(d)	# page cache warm, as the store's raw files are for the mount
	return d


def main():
	ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	ap.add_argument("--work", required=True)
	ap.add_argument("--steps", type=int, default=200)
	ap.add_argument("--finetune-steps", type=int, default=100)
	ap.add_argument("--runs", type=int, default=5)
	ap.add_argument("--loads-only", action="store_true",
			help="time torch.load only (the stores in --work are compacted already)")
	ap.add_argument("--train-only", action="store_true",
			help="stop after training: the stores in --work stay uncompacted (copy them to "
			     "time compaction again)")
	ap.add_argument("--mount-opts", default="",
			help="extra ckptfs -o options for the loads, e.g. nopassthrough")
	args = ap.parse_args()
	torch.set_num_threads(max(1, os.cpu_count() or 1))
	if not os.path.isdir(os.path.join(args.work, "store-frozen")):
		os.makedirs(args.work, exist_ok=True)
		log("training bench/train_gpt.py through 4 writable mounts ...")
		train(args.work, args.steps, args.finetune_steps)
	if args.train_only:
		return

	if args.loads_only:
		names = checkpoints(os.path.join(args.work, "store-full"), "full")
		print_loads(args.work, names[-1], names[0], args.runs, args.mount_opts)
		return
	logical = {}
	rows = {}
	for s in SERIES:
		log("compacting %s ..." % s)
		rows[s] = measure(args.work, s, logical)
		log("  " + rows[s]["compact_out"].replace("\n", "\n  "))
	print_sizes(args.work, rows, logical)
	print_loads(args.work, rows["full"]["newest"], rows["full"]["oldest"], args.runs, args.mount_opts)


def print_loads(work, newest, oldest, runs, mount_opts):
	log("timing torch.load ...")
	plain = (plain_dir(work, "full", newest), [])
	t_newest = load_times(work, "full", newest, runs, mount_opts, plain)
	t_oldest = load_times(work, "full", oldest, runs, mount_opts, plain)
	t_plain = statistics.median(plain[1])
	print("| torch.load of model.pt + optimizer.pt (full saves%s) | first load, fresh mount | vs plain "
	      "| load, composite built | vs plain | again, same mount | vs plain | target |" %
	      (", -o " + mount_opts if mount_opts else ""))
	print("|---|---|---|---|---|---|---|---|")
	print("| plain file (the store's raw copy, page cache; timed between the mount's) | %.4f s | 1.00x "
	      "| | | | | |" % t_plain)
	for label, ck, (first, alone, again), target in (("newest", newest, t_newest, ">= 0.9x"),
							 ("oldest, end of the delta chain", oldest, t_oldest,
							  ">= 0.35x")):
		print("| mount, %s: %s | %.4f s | %.2fx | %.4f s | %.2fx | %.4f s | %.2fx | %s |" % (
			label, ck, first, t_plain / first, alone, t_plain / alone, again, t_plain / again, target))
	print()


def print_sizes(work, rows, logical):
	mb = lambda b: "%.1f" % (b / 1e6)
	print("| scenario | checkpoints | logical MB | physical MB (packs + raw newest) | ratio | "
	      "packed part ratio | target |")
	print("|---|---|---|---|---|---|---|")
	targets = {"full": ">= 1.25x", "bf16": ">= 2x", "frozen": ">= 3x"}
	labels = {"full": "full saves (fp32 model + AdamW)", "bf16": "bf16 model file",
		  "frozen": "frozen fine-tune (top 2 blocks train)", "tailor": "LLMTailor policy"}
	for s in ("full", "frozen", "bf16", "tailor"):
		r = rows[s]
		ratio = "%.2fx" % r["ratio"]
		target = targets.get(s, "")
		if s == "tailor":
			# four decimals and the byte budget: the result lies close to
			# the target on this run
			policy = logical["full"] / r["logical"]
			ratio = "%.2fx (vs full saves' logical: %.4fx)" % (r["ratio"], logical["full"] / r["physical"])
			target = ">= policy %.4fx x 1.3 = %.4fx (physical <= %d B; is %d B)" % (
				policy, policy * 1.3, int(logical["full"] / (policy * 1.3)), r["physical"])
		print("| %s | %d | %s | %s (%s + %s) | %s | %.2fx | %s |" % (
			labels[s], r["ckpts"], mb(r["logical"]), mb(r["physical"]), mb(r["packs"]),
			mb(r["raw_left"]), ratio, r["packed_ratio"], target))
	print()
	print("| compaction (`ckptctl compact --keep-raw 1`) | MB packed | wall s | CPU s | MB/s | "
	      "MB/s per CPU-second | target |")
	print("|---|---|---|---|---|---|---|")
	for s in ("full", "frozen", "bf16", "tailor"):
		r = rows[s]
		packed = r["logical"] - tree_bytes(os.path.join(work, "store-" + s, "data", s, r["newest"]))
		print("| %s | %s | %.2f | %.2f | %.0f | %.0f | >= 300 per core |" % (
			s, mb(packed), r["compact_wall"], r["compact_cpu"], r["compact_mbps"], r["compact_mbps_core"]))


if __name__ == "__main__":
	main()
