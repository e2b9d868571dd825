"""Checkpoints saved by ranks on two nodes (tests/integration/gluster_writers.sh).

  dcp_nodes.py dcp_save DIR_RANK0 DIR_RANK1 SEED
      A 2-rank torch.distributed.checkpoint save with torch's own writer
      (gloo, two processes): rank 0 writes its files and the .metadata into
      DIR_RANK0, rank 1 its files into DIR_RANK1 -- the same directory as
      each node's client of the shared filesystem names it.  Every tensor
      is a ShardedTensor split by rows between the ranks, so both ranks'
      files are needed.
  dcp_nodes.py dcp_check DIR SEED
      Loads the save from DIR in one process (no_dist) and checks every
      tensor bit for bit against what the ranks saved.
  dcp_nodes.py hf_half DIR HALF SEED
      One node's half of an HF-style save: HALF 1 writes
      model-00001-of-00002.safetensors, config.json and
      model.safetensors.index.json; HALF 2 writes
      model-00002-of-00002.safetensors and trainer_state.json.
  dcp_nodes.py hf_check DIR SEED
      Both shards through transformers' layout: every tensor bit for bit.

torch 1.13's torch.distributed.checkpoint does not import on Python 3.11
(a dataclass default that is an instance of an unhashable dataclass); it is
imported with that class made hashable for the duration of the import.
"""

import dataclasses
import json
import os
import sys
import tempfile

import torch

import safetensors_ref


def import_dcp():
    orig = dataclasses._get_field

    def get_field(cls, a_name, a_type, *args, **kw):
        default = cls.__dict__.get(a_name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            default = default.default
        if dataclasses.is_dataclass(default) and type(default).__hash__ is None:
            type(default).__hash__ = object.__hash__
        return orig(cls, a_name, a_type, *args, **kw)

    dataclasses._get_field = get_field
    try:
        try:
            import torch.distributed.checkpoint as dcp
        except ImportError:   # torch 1.13
            import torch.distributed._shard.checkpoint as dcp
    finally:
        dataclasses._get_field = orig
    return dcp


def full_tensors(seed):
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
    mp.spawn(_worker, args=(2, [d0, d1], init, seed), nprocs=2, join=True)
    print("2-rank DCP save: %d files" % len(os.listdir(d0)))


def dcp_check(d, seed):
    dcp = import_dcp()
    want = full_tensors(seed)
    got = {k: torch.zeros_like(v) for k, v in want.items()}
    dcp.load_state_dict(got, dcp.FileSystemReader(d), no_dist=True)
    for k, v in want.items():
        if not torch.equal(got[k], v):
            sys.exit("%s: tensor %s differs" % (d, k))
    print("%s: %d tensors from both ranks load bit-exactly" % (d, len(want)))


def hf_tensors(half, seed):
    g = torch.Generator().manual_seed(int(seed) * 100 + int(half))
    return {"model.layers.%d.mlp.weight" % (i + 4 * (int(half) - 1)): torch.randn(64, 64, generator=g)
            for i in range(4)}


def hf_half(d, half, seed):
    os.makedirs(d, exist_ok=True)
    name = "model-%05d-of-00002.safetensors" % int(half)
    safetensors_ref.save(hf_tensors(half, seed), os.path.join(d, name), {"format": "pt"})
    if int(half) == 1:
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"model_type": "toy"}, f)
        weight_map = {}
        for h in (1, 2):
            for k in hf_tensors(h, seed):
                weight_map[k] = "model-%05d-of-00002.safetensors" % h
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": 8 * 64 * 64 * 4}, "weight_map": weight_map}, f)
    else:
        with open(os.path.join(d, "trainer_state.json"), "w") as f:
            json.dump({"global_step": int(seed)}, f)


def hf_check(d, seed):
    with open(os.path.join(d, "model.safetensors.index.json")) as f:
        index = json.load(f)
    n = 0
    for h in (1, 2):
        _, got = safetensors_ref.load(os.path.join(d, "model-%05d-of-00002.safetensors" % h))
        for k, v in hf_tensors(h, seed).items():
            if index["weight_map"][k] != "model-%05d-of-00002.safetensors" % h:
                sys.exit("%s: the index maps %s elsewhere" % (d, k))
            if safetensors_ref.tensor_bytes(got[k]) != v.numpy().tobytes():
                sys.exit("%s: tensor %s differs" % (d, k))
            n += 1
    print("%s: %d tensors from both nodes' shards read bit-exactly" % (d, n))


def main():
    cmd = sys.argv[1]
    if cmd == "dcp_save":
        dcp_save(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "dcp_check":
        dcp_check(sys.argv[2], sys.argv[3])
    elif cmd == "hf_half":
        hf_half(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "hf_check":
        hf_check(sys.argv[2], sys.argv[3])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
