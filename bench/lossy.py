#!/usr/bin/env python3
"""The lossy tier on a real training run (docs/bench.md, "The lossy tier").

bench/train_gpt.py (6 blocks, d=256, fp32 AdamW, a full save every 10
steps) saves through writable mounts, as bench/packs.py does: the full-save
series and the LLMTailor-style partial series, each in a store of its own.
Then, per series:

  - `ckptctl compact --dry-run --lossy B` for each bound: what each
    checkpoint the policy codes would take;
  - `ckptctl compact --lossy B0 --keep-exact 2 --keep-raw 1 -k K` for real
    (B0 --bound, K --anchor-interval): its CPU time (lossy compaction
    throughput, MB of the checkpoints coded per CPU-second), then the
    sizes: the lossy checkpoints against their raw bytes, and the whole
    store (packs and the raw newest) against all raw bytes;
  - full saves only: torch.load of model.pt + optimizer.pt of a lossy
    checkpoint through a fresh read-only mount against a plain copy, one
    load per fresh process, interleaved (as bench/packs.py times them);
  - full saves only: training resumed from the lossy step-100 checkpoint
    through the mount and from its exact copy, to step 300 with the same
    batches, the loss on 16 fixed held-out batches every 20 steps.

Run through bench/lossy.sh; prints Markdown tables for docs/bench.md.
"""
import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import packs  # noqa: E402  (training through the mounts, timed loads)
import train_gpt  # noqa: E402

CKPTFS, CKPTCTL = packs.CKPTFS, packs.CKPTCTL
SERIES = ("full", "tailor")
log = packs.log


def cpu_children():
	r = resource.getrusage(resource.RUSAGE_CHILDREN)
	return r.ru_utime + r.ru_stime


def ctl(*args):
	return subprocess.run([CKPTCTL] + list(args), check=True, capture_output=True, text=True).stdout


LINE = re.compile(r"^(?:would code|lossy) (\S+)/(\S+): ([\d.]+) MB -> ([\d.]+) MB")


def coded(out):
	"""{checkpoint: (before MB, after MB)} from compact's per-checkpoint lines."""
	res = {}
	for line in out.splitlines():
		m = LINE.match(line)
		if m:
			res[m.group(2)] = (float(m.group(3)), float(m.group(4)))
	return res


def series_bytes(store, series):
	return packs.tree_bytes(os.path.join(store, "data", series))


def lossy_run(work, series, bounds, bound0, keep_exact, anchor):
	store = os.path.join(work, "store-" + series)
	names = packs.checkpoints(store, series)
	data = os.path.join(store, "data", series)
	sizes = {n: packs.tree_bytes(os.path.join(data, n)) for n in names}
	logical = sum(sizes.values())
	row = {"series": series, "ckpts": len(names), "logical": logical, "dry": {}, "anchor": anchor}
	for b in bounds:
		out = ctl("compact", store, "--dry-run", "--lossy", str(b), "--keep-exact", str(keep_exact),
			  "--anchor-interval", str(anchor))
		row["dry"][b] = coded(out)
	keep = os.path.join(work, "exact-" + series)
	if series == "full" and not os.path.isdir(keep):
		shutil.copytree(os.path.join(data, "step-00100"), os.path.join(keep, "step-00100"))
	c0, t0 = cpu_children(), time.perf_counter()
	out = ctl("compact", store, "--lossy", str(bound0), "--keep-exact", str(keep_exact), "--keep-raw", "1",
		  "--anchor-interval", str(anchor))
	row["wall"], row["cpu"] = time.perf_counter() - t0, cpu_children() - c0
	row["out"] = out
	row["coded"] = coded(out)
	lossy_logical = sum(sizes[n] for n in row["coded"])
	row["lossy_logical"] = lossy_logical
	row["lossy_stored"] = sum(a for _, a in row["coded"].values()) * 1e6
	row["packs"] = packs.tree_bytes(os.path.join(store, "packs"))
	row["raw_left"] = series_bytes(store, series)
	row["physical"] = row["packs"] + row["raw_left"]
	row["names"] = names
	return row


def print_sizes(rows, bounds, bound0):
	mb = lambda b: "%.1f" % (b / 1e6)
	print("| series (%s) | checkpoints | coded lossily | their raw MB | their lossy MB | ratio | "
	      "whole store: raw MB | physical MB (packs + raw newest) | ratio |" % ("B = %g" % bound0))
	print("|---|---|---|---|---|---|---|---|---|")
	for r in rows:
		print("| %s | %d | %d | %s | %s | %.1fx | %s | %s (%s + %s) | %.2fx |" % (
			r["series"], r["ckpts"], len(r["coded"]), mb(r["lossy_logical"]), mb(r["lossy_stored"]),
			r["lossy_logical"] / r["lossy_stored"], mb(r["logical"]), mb(r["physical"]), mb(r["packs"]),
			mb(r["raw_left"]), r["logical"] / r["physical"]))
	print()
	print("| dry run: bound B | " + " | ".join("%s: lossy ratio, whole store" % r["series"] for r in rows) + " |")
	print("|---|" + "---|" * len(rows))
	for b in bounds:
		cells = []
		for r in rows:
			d = r["dry"][b]
			after = sum(a for _, a in d.values()) * 1e6
			lossy_logical = r["lossy_logical"]
			# the exact part as the real run left it: everything but the lossy records
			exact_part = r["physical"] - r["lossy_stored"]
			cells.append("%.1fx, %.2fx" % (lossy_logical / after, r["logical"] / (exact_part + after)))
		print("| %g | %s |" % (b, " | ".join(cells)))
	print()
	print("| lossy compaction (`compact --lossy %g --keep-exact 2 --keep-raw 1 -k %d`) | MB coded lossily | wall s | "
	      "CPU s | MB per CPU-second | target |" % (bound0, rows[0]["anchor"]))
	print("|---|---|---|---|---|---|")
	for r in rows:
		print("| %s | %s | %.2f | %.2f | %.0f | >= 100 |" % (r["series"], mb(r["lossy_logical"]), r["wall"], r["cpu"],
								 r["lossy_logical"] / 1e6 / r["cpu"]))
	print()


def print_loads(work, row, runs):
	names = sorted(row["coded"])
	plain = (packs.plain_dir(work, "full", row["names"][-1]), [])
	print("| torch.load of model.pt + optimizer.pt, fresh process | first load, fresh mount | vs plain | "
	      "load, composite built | vs plain | again, same mount | vs plain | target |")
	print("|---|---|---|---|---|---|---|---|")
	res = []
	for ck in (names[0], "step-00100", names[-1]):
		res.append((ck, packs.load_times(work, "full", ck, runs, "", plain)))
	t_plain = statistics.median(plain[1])
	print("| plain file (the newest's raw copy, page cache) | %.4f s | 1.00x | | | | | |" % t_plain)
	for ck, (first, alone, again) in res:
		print("| lossy %s | %.4f s | %.2fx | %.4f s | %.2fx | %.4f s | %.2fx | >= 0.5x |" % (
			ck, first, t_plain / first, alone, t_plain / alone, again, t_plain / again))
	print()


# --- resume from step 100 to 300 ---------------------------------------------------

RESUME = """
import sys, torch, torch.nn.functional as F
sys.path.insert(0, sys.argv[1])
import train_gpt as T
ckpt, steps = sys.argv[2], int(sys.argv[3])
torch.manual_seed(1)
torch.set_num_threads(max(1, torch.get_num_threads()))
data = T.corpus()
model = T.GPT(6, 256, 8, 64)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
model.load_state_dict(torch.load(ckpt + "/model.pt"))
opt.load_state_dict(torch.load(ckpt + "/optimizer.pt"))
eg = torch.Generator().manual_seed(999)
held = [T.batch(data, eg, 8, 64) for _ in range(16)]
def ev():
	with torch.no_grad():
		return sum(F.cross_entropy(model(x).view(-1, 256), y.view(-1)).item() for x, y in held) / len(held)
gen = torch.Generator().manual_seed(4321)
out = ["0 %.5f nan" % ev()]
train = []
for s in range(1, steps + 1):
	x, y = T.batch(data, gen, 2, 64)
	loss = F.cross_entropy(model(x).view(-1, 256), y.view(-1))
	opt.zero_grad(set_to_none=True)
	loss.backward()
	opt.step()
	train.append(loss.item())
	if s % 20 == 0:
		out.append("%d %.5f %.5f" % (s, ev(), sum(train[-20:]) / 20))
print("\\n".join(out))
"""


def resume(ckpt, steps):
	out = subprocess.run([sys.executable, "-c", RESUME, HERE, ckpt, str(steps)], check=True, capture_output=True,
			     text=True).stdout
	return [tuple(float(v) for v in line.split()) for line in out.splitlines()]


def print_resume(work, steps):
	store, mnt = os.path.join(work, "store-full"), os.path.join(work, "mnt-full")
	log("resuming from the exact step-100 ...")
	exact = resume(os.path.join(work, "exact-full", "step-00100"), steps)
	subprocess.run([CKPTFS, store, mnt, "-o", "ro"], check=True)
	try:
		log("resuming from the lossy step-100 through the mount ...")
		lossy = resume(os.path.join(mnt, "full", "step-00100"), steps)
	finally:
		packs.umount(mnt)
	print("| step (resumed at 100) | held-out loss, exact resume | held-out loss, lossy resume | difference | "
	      "train loss (mean of 20 steps), exact | lossy |")
	print("|---|---|---|---|---|---|")
	for (s, e, te), (_, l, tl) in zip(exact, lossy):
		print("| %d | %.4f | %.4f | %+.2f %% | %s | %s |" % (100 + s, e, l, 100 * (l - e) / e,
								   "" if te != te else "%.4f" % te, "" if tl != tl else "%.4f" % tl))
	print()


def main():
	ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
	ap.add_argument("--work", required=True)
	ap.add_argument("--steps", type=int, default=200)
	ap.add_argument("--bound", type=float, default=0.05)
	ap.add_argument("--bounds", default="0.01,0.02,0.05,0.1,0.2")
	ap.add_argument("--keep-exact", type=int, default=2)
	ap.add_argument("--anchor-interval", type=int, default=4, help="compact's -k: the longest chain")
	ap.add_argument("--runs", type=int, default=5)
	ap.add_argument("--resume-steps", type=int, default=200)
	ap.add_argument("--loads-only", action="store_true",
			help="time torch.load only (the stores in --work are coded lossily already)")
	args = ap.parse_args()
	torch.set_num_threads(max(1, os.cpu_count() or 1))
	if not os.path.isdir(os.path.join(args.work, "store-full")):
		os.makedirs(args.work, exist_ok=True)
		log("training bench/train_gpt.py through writable mounts ...")
		packs.train(args.work, args.steps, 0)
	if args.loads_only:
		store = os.path.join(args.work, "store-full")
		lossy = [line.split()[1] for line in ctl("ls", store, "full").splitlines()[1:] if line.split()[-1] != "-"]
		print_loads(args.work, {"coded": dict.fromkeys(lossy), "names": packs.checkpoints(store, "full")}, args.runs)
		return
	bounds = [float(b) for b in args.bounds.split(",")]
	rows = []
	for s in SERIES:
		log("lossy compaction of %s ..." % s)
		rows.append(lossy_run(args.work, s, bounds, args.bound, args.keep_exact, args.anchor_interval))
		log("  " + rows[-1]["out"].strip().replace("\n", "\n  "))
	print_sizes(rows, bounds, args.bound)
	log("timing torch.load ...")
	print_loads(args.work, rows[0], args.runs)
	print_resume(args.work, args.resume_steps)


if __name__ == "__main__":
	main()
