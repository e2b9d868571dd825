"""The offline merge that a ckptfs composite must equal, done the slow way.

merge_trees(older, newer) is Python's {**older, **newer} applied recursively
to dicts: key order of the older dict, then keys only the newer one has;
values from the newer one, except that two dicts under the same key merge
again.  Tensors, lists and scalars come whole from the newer tree; the
newer dict's type and instance attributes (an OrderedDict's _metadata) win.

merge_checkpoints(dirs, out) folds a series of checkpoint directories
(oldest first) into one plain directory, file by file:
  *.pt *.pth *.bin   torch.load every version, merge_trees, torch.save
  *.safetensors      union of tensors by name, newest wins, written by the
                     reference writer with the newest file's metadata
  anything else      the newest version's bytes
Files that only older checkpoints have are carried over too.

Usage: offline_merge.py OUT_DIR CKPT_DIR...   (oldest first)
"""

import os
import shutil
import sys

import torch

import safetensors_ref

TORCH_SUFFIXES = (".pt", ".pth", ".bin")


def merge_trees(older, newer):
    if not (isinstance(older, dict) and isinstance(newer, dict)):
        return newer
    out = type(newer)()
    for k, v in older.items():
        out[k] = merge_trees(v, newer[k]) if k in newer else v
    for k, v in newer.items():
        if k not in older:
            out[k] = v
    if hasattr(newer, "__dict__"):
        out.__dict__.update(newer.__dict__)
    return out


def _files(ckpt_dir):
    for root, _, names in os.walk(ckpt_dir):
        for name in names:
            yield os.path.relpath(os.path.join(root, name), ckpt_dir)


def merge_file(paths):
    """Merged content of one file given its versions (oldest first) -> bytes or a callable writer."""
    if paths[-1].endswith(TORCH_SUFFIXES):
        tree = None
        for p in paths:
            obj = torch.load(p, map_location="cpu", weights_only=False)   # trusted originals
            tree = obj if tree is None else merge_trees(tree, obj)
        return lambda dst: torch.save(tree, dst)
    if paths[-1].endswith(".safetensors"):
        tensors, metadata = {}, None
        for p in paths:
            metadata, t = safetensors_ref.load(p)
            tensors.update(t)
        return lambda dst: safetensors_ref.save(tensors, dst, metadata)
    return lambda dst: shutil.copyfile(paths[-1], dst)


def merge_checkpoints(ckpt_dirs, out_dir):
    versions = {}
    for d in ckpt_dirs:
        for rel in _files(d):
            versions.setdefault(rel, []).append(os.path.join(d, rel))
    for rel in sorted(versions):
        dst = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        merge_file(versions[rel])(dst)
    return sorted(versions)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    for rel in merge_checkpoints(sys.argv[2:], sys.argv[1]):
        print(rel)
