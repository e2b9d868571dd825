#!/usr/bin/env python3
"""A torch.save series rewritten in torch 2.x's DCP layout, for packing it.

For each checkpoint directory of SRC (model.pt + optimizer.pt, e.g. a
store-full/data/full of bench/packs.sh with BENCH_KEEP=1) writes DST/<name>/
as torch 2.x's torch.distributed.checkpoint FileSystemWriter lays a save
out (one file per rank): every item of the flattened state (model.<fqn>,
optim.<path>) a whole torch.save zip appended to __0_0.distcp, and
.metadata the pickled Metadata with 2.x's class paths, written by the
tests' writer (tests/py/dcp_series.py; docs/formats.md §4.1), since Debian has
torch 1.13.  Then:

  ckptctl init S && ckptctl import S DST --series dcp && ckptctl compact S

and compare the packs with those of the torch.save series (docs/bench.md).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
from dcp_series import write_layout  # noqa: E402  (the tests' writer of the 2.x layout)


def flatten(path, obj, items, paths):
	if isinstance(obj, dict):
		for k, v in obj.items():
			flatten(path + (k,), v, items, paths)
	elif isinstance(obj, (list, tuple)):
		for i, v in enumerate(obj):
			flatten(path + (i,), v, items, paths)
	else:
		key = ".".join(map(str, path))
		items[key] = obj
		paths[key] = path


def convert(src_dir, dst_dir):
	items, paths = {}, {}
	flatten(("model",), torch.load(os.path.join(src_dir, "model.pt")), items, paths)
	flatten(("optim",), torch.load(os.path.join(src_dir, "optimizer.pt")), items, paths)
	write_layout(dst_dir, items, paths, "2.4")


def main():
	if len(sys.argv) != 3:
		sys.exit(__doc__)
	for name in sorted(os.listdir(sys.argv[1])):
		convert(os.path.join(sys.argv[1], name), os.path.join(sys.argv[2], name))
	print("wrote %s" % sys.argv[2])


if __name__ == "__main__":
	main()
