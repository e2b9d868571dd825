#!/usr/bin/env python3
"""A torch.save series rewritten in torch 2.x's DCP layout, for packing it.

For each checkpoint directory of SRC (model.pt + optimizer.pt, e.g. a
store-full/data/full of bench/packs.sh with BENCH_KEEP=1) writes DST/<name>/
as torch.distributed.checkpoint's FileSystemWriter lays a save out
(single_file_per_rank; docs/formats.md §4.1): every item of the flattened
state (model.<fqn>, optim.<path>) a whole torch.save zip appended to
__0_0.distcp, and .metadata the pickled index.  Debian's torch 1.13 has no
working DCP under Python 3.11, so the layout is written by hand.  Then:

  ckptctl init S && ckptctl import S DST --series dcp && ckptctl compact S

and compare the packs with those of the torch.save series (docs/bench.md).
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "py"))
from clients_check import dcp_write_layout  # noqa: E402  (the tests' writer of the layout)


def flatten(prefix, obj, out):
	if isinstance(obj, dict):
		for k, v in obj.items():
			flatten("%s.%s" % (prefix, k) if prefix else str(k), v, out)
	elif isinstance(obj, (list, tuple)):
		for i, v in enumerate(obj):
			flatten("%s.%d" % (prefix, i), v, out)
	else:
		out[prefix] = obj


def convert(src_dir, dst_dir):
	items = {}
	flatten("model", torch.load(os.path.join(src_dir, "model.pt")), items)
	flatten("optim", torch.load(os.path.join(src_dir, "optimizer.pt")), items)
	dcp_write_layout(dst_dir, items)


def main():
	if len(sys.argv) != 3:
		sys.exit(__doc__)
	for name in sorted(os.listdir(sys.argv[1])):
		convert(os.path.join(sys.argv[1], name), os.path.join(sys.argv[2], name))
	print("wrote %s" % sys.argv[2])


if __name__ == "__main__":
	main()
