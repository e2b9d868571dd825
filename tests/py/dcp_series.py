"""Real torch distributed checkpoints (DCP) for the tests: a training series
with partial saves, saved and loaded by torch's own DCP code, and the
offline merge that a ckptfs composite of it must equal.

torch 1.13's DCP (torch.distributed._shard.checkpoint) does not import on
Python >= 3.11: a dataclass field whose default is an instance of an
unhashable dataclass (TensorProperties) is refused as a mutable default.
import_dcp() makes such a default's class hashable while the module is
imported (dataclasses._get_field wrapped, then restored); the real writer
and reader then run, in one process (no_dist=True) and over a gloo process
group of several ranks (torch.multiprocessing, forked).

The series: a small model (embed_tokens, layers.0-3, lm_head) trained with
AdamW, saved as flat FQNs -- model.<param>, optim.state.<param>.<moment>,
optim.param_groups.0.<hyperparameter> (bytes items) -- at step 10 (all
layers), 20 (odd layers) and 30 (even layers).  With 2 ranks, every matrix
and its moments are ShardedTensors split by rows; the rest is written by
rank 0 alone, as DCP does.

The torch 2.x layout (one file per rank, 2.x class paths, planner_data,
storage_meta, version) is written by write_layout(), since no torch 2.x is
installed here; torch 1.13's reader loads it through Reader2x, which maps
the 2.x class paths onto 1.13's classes.

  dcp_series.py save RUN [--ranks N] [--layout L] [--steps 10,20,30]
      the series in RUN/step-10 ... (L: real = torch 1.13's writer (default),
      2.0 = 2.0-2.3's layout and flattening, 2.4, 2.8 = with version and
      StorageMeta.modules); --steps saves only those steps (a series
      continued through a writable mount)
  dcp_series.py check SERVED_RUN PLAIN_RUN [--ranks N] [--layout L] [--steps ...]
      each step (of --steps) of SERVED_RUN, loaded by torch's reader (one
      process, or N ranks with a column split), equals the offline merge of
      PLAIN_RUN's saves up to that step, bit for bit
  dcp_series.py merge PLAIN_RUN STEP OUT [--layout L]
      the offline merge written as one DCP save (what a user would do by hand)
  dcp_series.py load DIR [--layout L]
      loads DIR with the real reader into a template made from its own
      .metadata; prints the number of items (fails as the reader fails)
  dcp_series.py bad KIND SAVE OUT
      a copy of the save SAVE in OUT whose .metadata is wrong in one way:
      truncated, garbled, absolute (a relative_path "/etc/hostname"),
      escape ("../"), past-end (an item longer than its file), overlap (a
      tensor's chunk twice), hole (a chunk one row short), hostile
      (planner_data calls os.system to create OUT/../hostile.ran)
  dcp_series.py megatron RUN
      Megatron-Core torch_dist checkpoints in RUN: iter_0000010 (all layers)
      and iter_0000020 (layers 1 and 3), each a DCP save (decoder.layers.N.*
      FQNs and optimizer state, Metadata.mcore_data) with metadata.json and
      common.pt; latest_checkpointed_iteration.txt
  dcp_series.py megatron-check SERVED_RUN PLAIN_RUN
      every iteration through SERVED_RUN: the DCP save loads the offline
      merge, common.pt loads the merge of the common.pt files, mcore_data
      covers every FQN, metadata.json is the newest
  dcp_series.py fixtures OUT
      the .metadata files of tests/unit/data/dcp (steps 10 and 20, torch
      1.13 with 1 and 2 ranks, the 2.0, 2.4 and 2.8 layouts with 2 ranks;
      one with a layer saved as bfloat16 at step 20)
"""

import argparse
import contextlib
import dataclasses
import io
import os
import pickle
import sys
import tempfile
import uuid

import torch
from torch import nn

import deepcompare

STEPS = (10, 20, 30)
NLAYERS = 4
DIM, VOCAB = 16, 32


# ---- torch 1.13's DCP under Python 3.11 -------------------------------------

@contextlib.contextmanager
def _hashable_dataclass_defaults():
    orig = dataclasses._get_field
    patched = []

    def get_field(cls, a_name, a_type, *rest):
        default = cls.__dict__.get(a_name, dataclasses.MISSING)
        if isinstance(default, dataclasses.Field):
            default = default.default
        t = type(default)
        if dataclasses.is_dataclass(t) and t.__hash__ is None and t not in patched:
            t.__hash__ = object.__hash__
            patched.append(t)
        return orig(cls, a_name, a_type, *rest)

    dataclasses._get_field = get_field
    try:
        yield
    finally:
        dataclasses._get_field = orig
        for t in patched:
            t.__hash__ = None


def import_dcp():
    """torch's DCP module: torch.distributed.checkpoint where it exists,
    else 1.13's prototype, imported with the dataclass shim."""
    try:
        import torch.distributed.checkpoint as dcp
        return dcp
    except ImportError:
        pass
    with _hashable_dataclass_defaults():
        import torch.distributed._shard.checkpoint as dcp
    return dcp


# ---- the model and its state ------------------------------------------------

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(nn.Linear(DIM, DIM) for _ in range(NLAYERS))
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = x + torch.tanh(layer(x))
        return self.lm_head(x)


class Trainer:
    def __init__(self, seed=0):
        torch.manual_seed(seed)
        self.model = Model()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-2)
        self.step = 0

    def train(self, steps):
        for _ in range(steps):
            self.step += 1
            g = torch.Generator().manual_seed(1000 + self.step)
            ids = torch.randint(VOCAB, (4, 8), generator=g)
            loss = nn.functional.cross_entropy(self.model(ids[:, :-1]).reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()

    def nested(self, layers=None):
        """{"model": {param: tensor}, "optim": {"state": {param: {...}},
        "param_groups": [{..., "params": [param names]}]}}, only the given
        layers (None: everything) and always the param groups."""
        names = [n for n, _ in self.model.named_parameters()]

        def keep(name):
            if layers is None:
                return True
            return name.startswith("layers.") and int(name.split(".")[1]) in layers

        osd = self.opt.state_dict()
        state = {names[i]: {k: v.clone() for k, v in s.items()} for i, s in osd["state"].items() if keep(names[i])}
        groups = [dict(g, params=[names[i] for i in g["params"]]) for g in osd["param_groups"]]
        model = {k: v.clone() for k, v in self.model.state_dict().items() if keep(k)}
        return {"model": model, "optim": {"state": state, "param_groups": groups}}


def layers_at(step):
    return {10: None, 20: {1, 3}, 30: {0, 2}}[step]


def nested_at(step):
    t = Trainer()
    out = None
    for s in STEPS:
        t.train(s - t.step)
        if s == step:
            out = t.nested(layers_at(s))
    return out


def flatten(nested, style="2.4"):
    """Flat FQN -> value, as DCP flattens: mappings descended; a list
    descended when it holds a tensor or a mapping (2.4+) -- in 2.0-2.3
    style a container with no tensor below it is one leaf."""
    out, paths = {}, {}

    def has_tensor(obj):
        if isinstance(obj, torch.Tensor):
            return True
        if isinstance(obj, dict):
            return any(has_tensor(v) for v in obj.values())
        if isinstance(obj, list):
            return any(has_tensor(v) for v in obj)
        return False

    def walk(path, obj):
        if isinstance(obj, dict) and (style != "2.0" or has_tensor(obj) or not path):
            for k, v in obj.items():
                walk(path + (str(k),), v)
            return
        if isinstance(obj, list) and style != "2.0" and any(isinstance(v, (torch.Tensor, dict)) for v in obj):
            for i, v in enumerate(obj):
                walk(path + (i,), v)
            return
        key = ".".join(map(str, path))
        out[key] = obj
        paths[key] = path

    walk((), nested)
    return out, paths


def style_of(layout):
    return "2.0" if layout == "2.0" else "2.4"


# ---- ranks and sharding -----------------------------------------------------

def sharded(fqn, value):
    """Matrices and their moments are split across ranks (by rows unless told)."""
    return isinstance(value, torch.Tensor) and value.dim() == 2 and not fqn.endswith(".step")


def chunk_of(t, rank, nranks, dim=0):
    n = t.shape[dim]
    per = (n + nranks - 1) // nranks
    lo, hi = min(rank * per, n), min((rank + 1) * per, n)
    off = [0] * t.dim()
    off[dim] = lo
    return off, t.narrow(dim, lo, hi - lo).contiguous()


def to_sharded(fqn, t, rank, nranks, dim=0):
    """dim 0 or 1: one chunk per rank, split along dim; "grid": the
    matrix cut into nranks x 2 blocks, each rank holding a row of them."""
    from torch.distributed._shard.sharded_tensor import Shard, init_from_local_shards
    if dim == "grid":
        (r0, _), rows = chunk_of(t, rank, nranks, 0)
        shards = []
        for half in range(2):
            (_, c0), block = chunk_of(rows, half, 2, 1)
            shards.append(Shard.from_tensor_and_offsets(block, [r0, c0], rank))
        return init_from_local_shards(shards, *t.shape)
    off, local = chunk_of(t, rank, nranks, dim)
    return init_from_local_shards([Shard.from_tensor_and_offsets(local, off, rank)], *t.shape)


def _spawn(fn, nranks, *args):
    import torch.multiprocessing as mp
    with tempfile.TemporaryDirectory() as d:
        # fork: the ranks inherit the imported torch instead of importing
        # it again (a second or more each); the parent has run no gloo.
        # Not where there is a GPU: once the parent has asked torch about
        # CUDA, a forked child cannot start it, and torch 2.x's DCP writer
        # does (staging streams, a CPU tensor's is_pinned()).
        method = "spawn" if torch.cuda.is_available() else "fork"
        mp.start_processes(_rank_main, args=(nranks, os.path.join(d, "rdzv"), fn, args),
                           nprocs=nranks, join=True, start_method=method)


def _rank_main(rank, nranks, rdzv, fn, args):
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + rdzv, rank=rank, world_size=nranks)
    try:
        fn(rank, nranks, *args)
    finally:
        dist.barrier()
        dist.destroy_process_group()


# ---- saving -----------------------------------------------------------------

def _save_with(sd, writer, no_dist):
    """torch 2.x's dcp.save (single process where no group is set up),
    else 1.13's save_state_dict (gone from recent releases)."""
    dcp = import_dcp()
    if hasattr(dcp, "save"):
        dcp.save(sd, storage_writer=writer)
    else:
        dcp.save_state_dict(sd, writer, no_dist=no_dist)


def _load_with(sd, reader, no_dist):
    dcp = import_dcp()
    if hasattr(dcp, "load"):
        dcp.load(sd, storage_reader=reader)
    else:
        dcp.load_state_dict(sd, reader, no_dist=no_dist)


def save_real(path, flat, ranks, dim=0):
    dcp = import_dcp()
    if ranks == 1:
        _save_with(flat, dcp.FileSystemWriter(path), True)
    else:
        _spawn(_save_rank, ranks, path, flat, dim)


def _save_rank(rank, nranks, path, flat, dim):
    dcp = import_dcp()    # before to_sharded: on 1.13 its _shard imports only after the shim
    sd = {k: (to_sharded(k, v, rank, nranks, dim) if sharded(k, v) else v) for k, v in flat.items()}
    _save_with(sd, dcp.FileSystemWriter(path), False)


def save(run, ranks=1, layout="real", steps=STEPS, dim=0):
    """dim: how matrices are split across ranks (to_sharded): 0 by rows, as
    FSDP does; 1 by columns, as tensor parallelism splits a row-parallel
    layer's weight; "grid" in blocks along both."""
    t = Trainer()
    for s in STEPS:
        t.train(s - t.step)
        if s not in steps:
            continue
        path = os.path.join(run, "step-%d" % s)
        flat, paths = flatten(t.nested(layers_at(s)), style_of(layout))
        if layout == "real":
            save_real(path, flat, ranks, dim)
        else:
            write_layout(path, flat, paths, layout, ranks)
        print("%s: %d items, %d rank%s, layout %s" % (path, len(flat), ranks, "s" if ranks > 1 else "", layout))


# ---- the torch 2.x layout, written by hand ------------------------------------

def _fake_2x_modules(layout):
    """Modules under torch 2.x's names whose classes pickle as 2.x's do
    (same fields, same order, TensorProperties' 5-tuple state)."""
    import enum
    import types

    import_dcp()    # _shard does not import on Python >= 3.11 without the shim
    from torch.distributed._shard.sharded_tensor.metadata import TensorProperties as TP113

    md = types.ModuleType("torch.distributed.checkpoint.metadata")
    fs = types.ModuleType("torch.distributed.checkpoint.filesystem")

    def cls(mod, name, base=object, **ns):
        c = type(name, (base,), dict(ns))
        c.__module__ = mod.__name__
        c.__qualname__ = name
        setattr(mod, name, c)
        return c

    for name in ("Metadata", "TensorStorageMetadata", "ChunkStorageMetadata", "BytesStorageMetadata",
                 "MetadataIndex", "StorageMeta"):
        cls(md, name)
    cls(fs, "_StorageInfo")
    if layout != "2.0":
        enum_name = "_MEM_FORMAT_ENCODING"
        e = enum.Enum(enum_name, [("TORCH_CONTIGUOUS_FORMAT", 0), ("TORCH_CHANNELS_LAST", 1),
                                  ("TORCH_PRESERVE_FORMAT", 2)])
        e.__module__ = md.__name__
        e.__qualname__ = enum_name
        setattr(md, enum_name, e)

        def getstate(self):
            return (self.dtype, torch.strided, False, e.TORCH_CONTIGUOUS_FORMAT, False)
        cls(md, "TensorProperties", __getstate__=getstate)
    else:
        md.TensorProperties = TP113
    return md, fs


def _props(md, dtype):
    p = md.TensorProperties.__new__(md.TensorProperties)
    if md.TensorProperties.__module__.startswith("torch.distributed._shard"):
        p.__init__(dtype=dtype)
    else:
        p.dtype = dtype
    return p


def _obj(c, **fields):
    o = c.__new__(c)
    o.__dict__.update(fields)
    return o


def write_layout(path, flat, paths, layout="2.4", ranks=1, threads=1, mcore_data=None):
    """What torch 2.x's FileSystemWriter writes for flat (FQN -> tensor or
    object): rank r's items in __r_0.distcp (__r_T for writer thread T),
    bytes items first, each item a whole torch.save zip; matrices split by
    rows across ranks (their chunks in each rank's file), everything else
    on rank 0; then the pickled Metadata in .metadata.tmp, renamed to
    .metadata.  layout 2.0 (2.0-2.3 classes), 2.4 (storage_meta), 2.8
    (version, StorageMeta.modules); mcore_data: Megatron's extra attribute."""
    md, fs = _fake_2x_modules(layout)
    os.makedirs(path)
    per_rank = [[] for _ in range(ranks)]
    sdm = {}
    for fqn, v in flat.items():
        if isinstance(v, torch.Tensor):
            sdm[fqn] = _obj(md.TensorStorageMetadata, properties=_props(md, v.dtype), size=torch.Size(v.shape),
                            chunks=[])
            parts = [chunk_of(v, r, ranks) for r in range(ranks)] if sharded(fqn, v) and ranks > 1 else \
                [([0] * v.dim(), v)]
            for r, (off, t) in enumerate(parts):
                if t.numel() == 0 and v.numel():
                    continue
                sdm[fqn].chunks.append(_obj(md.ChunkStorageMetadata, offsets=torch.Size(off),
                                            sizes=torch.Size(t.shape)))
                per_rank[r].append((fqn, torch.Size(off), len(sdm[fqn].chunks) - 1, t))
        else:
            sdm[fqn] = md.BytesStorageMetadata()
            per_rank[0].append((fqn, None, None, v))
    storage = {}
    for r, items in enumerate(per_rank):
        buckets = [[] for _ in range(threads)]
        for i, it in enumerate([x for x in items if x[1] is None] + [x for x in items if x[1] is not None]):
            buckets[i % threads].append(it)
        for t, bucket in enumerate(buckets):
            if not bucket:
                continue
            name = "__%d_%d.distcp" % (r, t)
            with open(os.path.join(path, name), "wb") as f:
                for fqn, off, idx, v in bucket:
                    blob = io.BytesIO()
                    torch.save(v.clone() if isinstance(v, torch.Tensor) else v, blob)
                    key = md.MetadataIndex.__new__(md.MetadataIndex)
                    key.__dict__.update({"fqn": fqn, "index": idx} if off is None else
                                        {"fqn": fqn, "index": idx, "offset": off})
                    storage[key] = _obj(fs._StorageInfo, relative_path=name, offset=f.tell(),
                                        length=len(blob.getvalue()))
                    f.write(blob.getvalue())
    meta = {"state_dict_metadata": sdm, "planner_data": dict(paths), "storage_data": storage}
    if layout in ("2.4", "2.8"):
        sm = {"checkpoint_id": __import__("pathlib").Path(path), "save_id": uuid.uuid4().hex, "load_id": None}
        if layout == "2.8":
            sm["modules"] = []
        meta["storage_meta"] = _obj(md.StorageMeta, **sm)
    if layout == "2.8":
        meta["version"] = "1.0.0"
    if mcore_data is not None:
        meta["mcore_data"] = mcore_data
    saved = {k: sys.modules.get(k) for k in (md.__name__, fs.__name__)}
    sys.modules[md.__name__], sys.modules[fs.__name__] = md, fs
    try:
        with open(os.path.join(path, ".metadata.tmp"), "wb") as f:
            pickle.dump(_obj(md.Metadata, **meta), f)
    finally:
        for k, m in saved.items():
            if m is None:
                del sys.modules[k]
            else:
                sys.modules[k] = m
    os.rename(os.path.join(path, ".metadata.tmp"), os.path.join(path, ".metadata"))


def _reader_class():
    """FileSystemReader that also reads 2.x class paths (mapped onto this
    torch's classes); everything else is torch's own reader."""
    dcp = import_dcp()
    if hasattr(dcp, "save"):   # torch >= 2: its own classes
        return dcp.FileSystemReader
    from torch.distributed._shard.checkpoint import filesystem as fs113, metadata as md113
    from torch.distributed._shard.sharded_tensor import metadata as st113

    class StorageMeta:
        pass

    mapping = {
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"): fs113._StorageInfo,
        ("torch.distributed.checkpoint.metadata", "TensorProperties"): st113.TensorProperties,
        ("torch.distributed.checkpoint.metadata", "_MEM_FORMAT_ENCODING"): st113.MEM_FORMAT_ENCODING,
        ("torch.distributed.checkpoint.metadata", "MEM_FORMAT_ENCODING"): st113.MEM_FORMAT_ENCODING,
        ("torch.distributed.checkpoint.metadata", "StorageMeta"): StorageMeta,
    }

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in mapping:
                return mapping[(module, name)]
            if module == "torch.distributed.checkpoint.metadata":
                return getattr(md113, name)
            return super().find_class(module, name)

    class Reader2x(dcp.FileSystemReader):
        def read_metadata(self):
            with (self.path / ".metadata").open("rb") as f:
                return Unpickler(f).load()

    return Reader2x


def read_metadata(path):
    return _reader_class()(path).read_metadata()


# ---- loading ------------------------------------------------------------------

def template_of(md):
    """A full state dict to load every item of a .metadata into."""
    out = {}
    for fqn, m in md.state_dict_metadata.items():
        if hasattr(m, "chunks"):
            out[fqn] = torch.zeros(tuple(m.size), dtype=m.properties.dtype)
        else:
            out[fqn] = None
    return out


def load(path, template):
    sd = dict(template)
    _load_with(sd, _reader_class()(path), True)
    return sd


def load_all(path):
    return load(path, template_of(read_metadata(path)))


def offline_merge(plain_run, step):
    """{**older, **newer} by FQN over the saves of plain_run up to step,
    each read whole by torch's reader; the dict order is the merge's."""
    merged = {}
    for s in STEPS:
        if s <= step and os.path.isdir(os.path.join(plain_run, "step-%d" % s)):
            merged.update(load_all(os.path.join(plain_run, "step-%d" % s)))
    return merged


def _load_ranks(rank, nranks, path, ref, out_dir):
    import_dcp()    # on 1.13, to_sharded's _shard imports only after the shim
    sd = {k: (to_sharded(k, torch.zeros_like(v), rank, nranks, dim=1) if sharded(k, v) else
              (torch.zeros_like(v) if isinstance(v, torch.Tensor) else None)) for k, v in ref.items()}
    _load_with(sd, _reader_class()(path), False)
    bad = []
    for k, v in ref.items():
        got = sd[k]
        if sharded(k, v):
            _, want = chunk_of(v, rank, nranks, dim=1)
            got = got.local_shards()[0].tensor
        else:
            want = v
        d = deepcompare.differences(got, want)
        if d:
            bad.append("%s: %s" % (k, d[0]))
    with open(os.path.join(out_dir, "rank%d" % rank), "w") as f:
        f.write("\n".join(bad))


def check(served_run, plain_run, ranks=1, steps=STEPS):
    for s in steps:
        ref = offline_merge(plain_run, s)
        path = os.path.join(served_run, "step-%d" % s)
        if ranks == 1:
            got = load(path, {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else None)
                              for k, v in ref.items()})
            deepcompare.assert_same(got, ref, "DCP load of %s" % path)
        else:
            with tempfile.TemporaryDirectory() as d:
                _spawn(_load_ranks, ranks, path, ref, d)
                for r in range(ranks):
                    with open(os.path.join(d, "rank%d" % r)) as f:
                        bad = f.read()
                    assert not bad, "rank %d loading %s:\n%s" % (r, path, bad)
        print("%s: %d items loaded by %d rank%s equal the offline merge" % (
            path, len(ref), ranks, "s (split by columns)" if ranks > 1 else ""))


def write_merged(plain_run, step, out, layout="real", ranks=1):
    flat = offline_merge(plain_run, step)
    if layout == "real":
        save_real(out, flat, ranks)
    else:
        write_layout(out, flat, {k: tuple(k.split(".")) for k in flat}, layout, ranks)
    print("%s: the offline merge of %s up to step %d (%d items)" % (out, plain_run, step, len(flat)))


def fixtures(out):
    import shutil
    with tempfile.TemporaryDirectory() as d:
        for layout, ranks in (("real", 1), ("real", 2), ("2.0", 2), ("2.4", 2), ("2.8", 2)):
            run = os.path.join(d, "%s-%d" % (layout, ranks))
            save(run, ranks, layout, (10, 20))
            for s in (10, 20):
                name = "%s-%drank-step%d.metadata" % ("torch113" if layout == "real" else "layout" + layout.replace(".", ""),
                                                     ranks, s)
                shutil.copyfile(os.path.join(run, "step-%d" % s, ".metadata"), os.path.join(out, name))
        flat, paths = flatten(nested_at(20), "2.4")
        flat["model.layers.1.weight"] = flat["model.layers.1.weight"].to(torch.bfloat16)
        write_layout(os.path.join(d, "bf16"), flat, paths, "2.4", 2)
        shutil.copyfile(os.path.join(d, "bf16", ".metadata"), os.path.join(out, "layout24-2rank-step20-bf16.metadata"))


# ---- bad metadata -----------------------------------------------------------

class _Hostile:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, ("touch " + self.path,))


def bad(kind, save_dir, out):
    """A copy of save_dir whose .metadata has one defect."""
    import copy
    import shutil
    shutil.copytree(save_dir, out)
    mpath = os.path.join(out, ".metadata")
    data = open(mpath, "rb").read()
    if kind == "truncated":
        data = data[:len(data) * 2 // 3]
    elif kind == "garbled":
        mid = len(data) // 2
        data = data[:mid] + bytes(b ^ 0x5A for b in data[mid:mid + 64]) + data[mid + 64:]
    else:
        md = read_metadata(out)
        keys = list(md.storage_data)
        tensor_keys = [k for k in keys if getattr(k, "offset", None) is not None and len(k.offset) == 2]
        if kind in ("absolute", "escape"):
            md.storage_data[keys[0]].relative_path = "/etc/hostname" if kind == "absolute" else \
                "../step-x/" + md.storage_data[keys[0]].relative_path
        elif kind == "past-end":
            md.storage_data[keys[-1]].length += 1 << 20
        elif kind in ("overlap", "hole"):
            fqn = tensor_keys[0].fqn
            tsm = md.state_dict_metadata[fqn]
            chunk = tsm.chunks[0]
            if kind == "overlap":
                tsm.chunks.append(copy.deepcopy(chunk))
            else:
                chunk.sizes = torch.Size([chunk.sizes[0] - 1] + list(chunk.sizes[1:]))
        elif kind == "hostile":
            md.planner_data = _Hostile(os.path.join(os.path.dirname(os.path.abspath(out)), "hostile.ran"))
        else:
            sys.exit("unknown defect " + kind)
        data = pickle.dumps(md)
    with open(mpath, "wb") as f:
        f.write(data)
    print("%s: %s .metadata" % (out, kind))


# ---- Megatron-Core torch_dist ---------------------------------------------------

MEGATRON_ITERS = (10, 20)


def megatron_state(iteration):
    """Flat DCP keys as Megatron-Core names them (one tensor per layer
    here), and the common state."""
    import argparse
    torch.manual_seed(iteration)
    flat = {"embedding.word_embeddings.weight": torch.randn(VOCAB, DIM),
            "decoder.final_layernorm.weight": torch.randn(DIM),
            "output_layer.weight": torch.randn(VOCAB, DIM)}
    for i in range(NLAYERS):
        for part in ("self_attention.linear_qkv.weight", "mlp.linear_fc1.weight"):
            flat["decoder.layers.%d.%s" % (i, part)] = torch.randn(DIM, DIM)
    for k in list(flat):
        flat["optimizer.state.exp_avg." + k] = torch.randn(flat[k].shape)
    common = {"args": argparse.Namespace(num_layers=NLAYERS, hidden_size=DIM, iteration=iteration),
              "checkpoint_version": 3.0, "iteration": iteration,
              "opt_param_scheduler": {"num_steps": iteration * 8, "max_lr": 3e-4}}
    return flat, common


def megatron_keep(k, iteration):
    if iteration == 10:
        return True
    return any(".layers.%d." % i in k for i in (1, 3))


def megatron(run):
    import json
    os.makedirs(run, exist_ok=True)
    for it in MEGATRON_ITERS:
        d = os.path.join(run, "iter_%07d" % it)
        flat, common = megatron_state(it)
        flat = {k: v for k, v in flat.items() if megatron_keep(k, it)}
        mcore = {k: {"nd_reformulated_orig_global_shape": tuple(v.shape)} for k, v in flat.items()}
        write_layout(d, flat, {k: (k,) for k in flat}, "2.4", 2, mcore_data=mcore)
        with open(os.path.join(d, "metadata.json"), "w") as f:
            json.dump({"sharded_backend": "torch_dist", "sharded_backend_version": 1, "common_backend": "torch",
                       "common_backend_version": 1, "iteration": it}, f, separators=(",", ":"))
        torch.save(common, os.path.join(d, "common.pt"))
        with open(os.path.join(run, "latest_checkpointed_iteration.txt"), "w") as f:
            f.write(str(it))
        print("%s: %d DCP items, common.pt, metadata.json" % (d, len(flat)))


def megatron_check(served_run, plain_run):
    import json

    import offline_merge
    for it in MEGATRON_ITERS:
        name = "iter_%07d" % it
        served = os.path.join(served_run, name)
        ref, common = {}, None
        for old in MEGATRON_ITERS:
            if old <= it:
                ref.update(load_all(os.path.join(plain_run, "iter_%07d" % old)))
                c = torch.load(os.path.join(plain_run, "iter_%07d" % old, "common.pt"), weights_only=False)
                common = c if common is None else offline_merge.merge_trees(common, c)
        got = load(served, {k: (torch.zeros_like(v) if isinstance(v, torch.Tensor) else None) for k, v in ref.items()})
        deepcompare.assert_same(got, ref, "DCP load of " + served)
        md = read_metadata(served)
        assert set(md.mcore_data) == set(md.state_dict_metadata), "%s: mcore_data does not cover every FQN" % served
        deepcompare.assert_same(torch.load(os.path.join(served, "common.pt"), weights_only=False), common,
                                served + "/common.pt")
        with open(os.path.join(served, "metadata.json")) as f:
            assert json.load(f)["iteration"] == it, served + "/metadata.json is not the newest"
        print("%s: %d DCP items, common.pt and metadata.json equal the offline merge" % (served, len(ref)))


def main(argv):
    # The tensors here are tiny; one intra-op thread also leaves no OpenMP
    # pool for a forked rank (_spawn) to inherit half of.
    torch.set_num_threads(1)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=("save", "check", "merge", "load", "fixtures", "bad", "megatron",
                                    "megatron-check"))
    ap.add_argument("args", nargs="+")
    ap.add_argument("--ranks", type=int, default=1)
    ap.add_argument("--layout", default="real", choices=("real", "2.0", "2.4", "2.8"))
    ap.add_argument("--steps", default=",".join(map(str, STEPS)))
    a = ap.parse_args(argv[1:])
    steps = tuple(int(s) for s in a.steps.split(","))
    if a.cmd == "save":
        save(a.args[0], a.ranks, a.layout, steps)
    elif a.cmd == "check":
        check(a.args[0], a.args[1], a.ranks, steps)
    elif a.cmd == "fixtures":
        fixtures(a.args[0])
    elif a.cmd == "bad":
        bad(*a.args)
    elif a.cmd == "megatron":
        megatron(a.args[0])
    elif a.cmd == "megatron-check":
        megatron_check(*a.args)
    elif a.cmd == "merge":
        write_merged(a.args[0], int(a.args[1]), a.args[2], a.layout, a.ranks)
    else:
        # load A [B...]: the items of the saves together (their FQNs' union)
        fqns = set()
        for path in a.args:
            fqns.update(load_all(path))
        print("%s: %d items" % (" + ".join(a.args), len(fqns)))


if __name__ == "__main__":
    main(sys.argv)
