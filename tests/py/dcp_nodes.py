"""Checkpoints saved by ranks on two nodes (tests/integration/gluster_writers.sh).

  dcp_nodes.py dcp_save DIR_RANK0 DIR_RANK1 SEED
      A 2-rank torch.distributed.checkpoint save with torch's own writer
      (gloo, two processes): rank 0 writes its files and the .metadata into
      DIR_RANK0, rank 1 its files into DIR_RANK1 -- the same directory as
      each node's client of the shared filesystem (or each node's ckptfs
      mount) names it.  Every tensor is a ShardedTensor split by rows
      between the ranks, so both ranks' files are needed.
  dcp_nodes.py dcp_check SEED DIR...
      Loads the save from each DIR in one process (no_dist) and checks
      every tensor bit for bit against what the ranks saved.
  dcp_nodes.py hf_part DIR SEED PART [--marker] [--halfway FILE [--go FILE]]
      One node's part of an HF-style save: PART 1 writes
      model-00001-of-00002.safetensors, config.json and
      model.safetensors.index.json; PART 2 writes
      model-00002-of-00002.safetensors; --marker then writes
      trainer_state.json (the marker).  --halfway: the shard is written
      half, FILE created, and the rest written once the FILE --go names
      exists (without --go: never; the process waits to be killed).
  dcp_nodes.py hf_check SEED DIR...
      Both shards of each DIR through transformers' layout: every tensor
      bit for bit.

torch 1.13's DCP is imported with the shim of dcp_series.py.  The HF-style
files are written and checked without torch (raw float32 tensors), so
that those commands start at once.
"""

import argparse
import array
import json
import os
import random
import sys
import tempfile
import time

import safetensors_ref


def full_tensors(seed):
    import torch
    g = torch.Generator().manual_seed(int(seed))
    return {"layers.%d.weight" % i: torch.randn(128, 128, generator=g) for i in range(4)}


def rank_shards(rank, seed):
    """Each tensor split by rows: rank 0 holds the first half, rank 1 the second."""
    from torch.distributed._shard.metadata import ShardMetadata
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
    out = {}
    for k, t in full_tensors(seed).items():
        md = ShardMetadata(shard_offsets=[rank * 64, 0], shard_sizes=[64, 128], placement="rank:%d/cpu" % rank)
        out[k] = init_from_local_shards([Shard(t[rank * 64:(rank + 1) * 64].clone(), md)], [128, 128])
    return out


def _worker(rank, world, dirs, init, seed):
    import torch.distributed as dist
    from dcp_series import import_dcp
    dcp = import_dcp()
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=world)
    dcp.save_state_dict(rank_shards(rank, seed), dcp.FileSystemWriter(dirs[rank]))
    dist.barrier()
    dist.destroy_process_group()


def dcp_save(d0, d1, seed):
    import torch.multiprocessing as mp
    os.makedirs(d0, exist_ok=True)
    os.makedirs(d1, exist_ok=True)
    init = tempfile.mktemp(prefix="dcp_nodes_init.")
    # Forked, not spawned: the ranks need not import torch again.
    mp.start_processes(_worker, args=(2, [d0, d1], init, seed), nprocs=2, join=True, start_method="fork")
    print("2-rank DCP save: %d files" % len(os.listdir(d0)))


def dcp_check(seed, dirs):
    import torch
    from dcp_series import import_dcp
    dcp = import_dcp()
    want = full_tensors(seed)
    for d in dirs:
        got = {k: torch.zeros_like(v) for k, v in want.items()}
        dcp.load_state_dict(got, dcp.FileSystemReader(d), no_dist=True)
        for k, v in want.items():
            if not torch.equal(got[k], v):
                sys.exit("%s: tensor %s differs" % (d, k))
        print("%s: %d tensors from both ranks load bit-exactly" % (d, len(want)))


def hf_tensors(part, seed):
    """Four 64 x 64 float32 tensors (as raw little-endian bytes) of part."""
    rng = random.Random(int(seed) * 100 + int(part))
    out = {}
    for i in range(4):
        data = array.array("f", (rng.gauss(0.0, 1.0) for _ in range(64 * 64)))
        if sys.byteorder != "little":
            data.byteswap()
        out["model.layers.%d.mlp.weight" % (i + 4 * (int(part) - 1))] = \
            safetensors_ref.RawTensor("F32", [64, 64], data.tobytes())
    return out


def shard_name(part):
    return "model-%05d-of-00002.safetensors" % int(part)


def write_slowly(path, data, halfway, go):
    """data into path: half of it, then halfway created, then the rest once go exists."""
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
        f.flush()
        if halfway:
            open(halfway, "w").close()
            while not (go and os.path.exists(go)):
                time.sleep(0.05)
        f.write(data[len(data) // 2:])


def hf_part(d, seed, part, marker=False, halfway=None, go=None):
    os.makedirs(d, exist_ok=True)
    write_slowly(os.path.join(d, shard_name(part)), safetensors_ref.dumps(hf_tensors(part, seed), {"format": "pt"}),
                 halfway, go)
    if int(part) == 1:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"model_type": "toy"}, f)
        weight_map = {}
        for h in (1, 2):
            for k in hf_tensors(h, seed):
                weight_map[k] = shard_name(h)
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 8 * 64 * 64 * 4}, "weight_map": weight_map}, f)
    if marker:
        with open(os.path.join(d, "trainer_state.json"), "w") as f:
            json.dump({"global_step": int(seed)}, f)


def hf_check(seed, dirs):
    for d in dirs:
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            index = json.load(f)
        n = 0
        for h in (1, 2):
            with open(os.path.join(d, shard_name(h)), "rb") as f:
                data = f.read()
            _, entries = safetensors_ref.parse_header(data)
            base = 8 + int.from_bytes(data[:8], "little")
            got = {name: data[base + b:base + e] for name, _, _, b, e in entries}
            for k, v in hf_tensors(h, seed).items():
                if index["weight_map"][k] != shard_name(h):
                    sys.exit("%s: the index maps %s elsewhere" % (d, k))
                if got.get(k) != v.data:
                    sys.exit("%s: tensor %s differs" % (d, k))
                n += 1
        print("%s: %d tensors from both nodes' shards read bit-exactly" % (d, n))


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("dcp_save")
    p.add_argument("d0")
    p.add_argument("d1")
    p.add_argument("seed")
    for name in ("dcp_check", "hf_check"):
        p = sub.add_parser(name)
        p.add_argument("seed")
        p.add_argument("dirs", nargs="+")
    p = sub.add_parser("hf_part")
    p.add_argument("dir")
    p.add_argument("seed")
    p.add_argument("part", choices=["1", "2"])
    p.add_argument("--marker", action="store_true")
    p.add_argument("--halfway")
    p.add_argument("--go")
    a = ap.parse_args()
    if a.cmd == "dcp_save":
        dcp_save(a.d0, a.d1, a.seed)
    elif a.cmd == "dcp_check":
        dcp_check(a.seed, a.dirs)
    elif a.cmd == "hf_part":
        hf_part(a.dir, a.seed, a.part, a.marker, a.halfway, a.go)
    else:
        hf_check(a.seed, a.dirs)


if __name__ == "__main__":
    main()
