"""Deep, bit-exact comparison of objects loaded with torch.load.

`differences(a, b)` walks two object trees side by side and returns a list of
human-readable differences (empty when they are the same):

- tensors: same Python type (Parameter vs Tensor), dtype, shape, stride,
  storage offset, requires_grad, and the same bytes -- for the elements of
  the view and for its whole underlying storage (so NaN payloads and -0.0
  count, which torch.equal would not say);
- storage sharing: two tensors of one tree share a storage exactly when the
  corresponding tensors of the other tree do;
- dicts: same type, same keys in the same order, equal values, and equal
  instance attributes (OrderedDict state dicts carry `_metadata`);
- lists and tuples element-wise; floats bit-exact; everything else by type
  and ==, objects with a __dict__ attribute by attribute.

`assert_loads_same(served, original)` compares two files that way, also
under torch.load(weights_only=True) where the original allows it.
"""

import math
import pickle
import struct

import torch

from safetensors_ref import tensor_bytes

try:
    import numpy
except ImportError:  # numpy is optional; only used when a tree holds arrays
    numpy = None


def _storage(t):
    s = t.storage()
    return s.untyped() if hasattr(s, "untyped") else s


def _storage_bytes(t):
    u = _storage(t)
    if u.nbytes() == 0:
        return b""
    return bytes(torch.tensor([], dtype=torch.uint8).set_(u).numpy().tobytes())


class _Walk:
    def __init__(self):
        self.diffs = []
        self.shares = ([], [])   # per side: (path, storage id) of every tensor

    def diff(self, path, msg):
        self.diffs.append("%s: %s" % (path or "<root>", msg))

    def tensor(self, path, a, b):
        for attr in ("dtype", "shape", "layout", "requires_grad"):
            if getattr(a, attr) != getattr(b, attr):
                self.diff(path, "%s %s != %s" % (attr, getattr(a, attr), getattr(b, attr)))
                return
        if a.layout != torch.strided:
            if not torch.equal(a.to_dense(), b.to_dense()):
                self.diff(path, "values differ")
            return
        if a.stride() != b.stride() or a.storage_offset() != b.storage_offset():
            self.diff(path, "stride/offset %s+%d != %s+%d" % (
                a.stride(), a.storage_offset(), b.stride(), b.storage_offset()))
            return
        if tensor_bytes(a) != tensor_bytes(b):
            self.diff(path, "values differ")
            return
        if _storage(a).nbytes() != _storage(b).nbytes():
            self.diff(path, "storage size %d != %d" % (_storage(a).nbytes(), _storage(b).nbytes()))
        elif _storage_bytes(a) != _storage_bytes(b):
            self.diff(path, "bytes of the underlying storage differ outside the view")
        for side, t in enumerate((a, b)):
            u = _storage(t)
            if u.nbytes():
                self.shares[side].append((path, u.data_ptr()))

    def walk(self, path, a, b):
        if type(a) is not type(b):
            self.diff(path, "type %s != %s" % (type(a).__name__, type(b).__name__))
            return
        if isinstance(a, torch.Tensor):
            self.tensor(path, a, b)
        elif isinstance(a, dict):
            ka, kb = list(a.keys()), list(b.keys())
            if ka != kb:
                self.diff(path, "keys %s != %s" % (_short(ka), _short(kb)))
                return
            for k in ka:
                self.walk("%s[%r]" % (path, k), a[k], b[k])
            self.attrs(path, a, b)
        elif isinstance(a, (list, tuple)):
            if len(a) != len(b):
                self.diff(path, "length %d != %d" % (len(a), len(b)))
                return
            for i, (x, y) in enumerate(zip(a, b)):
                self.walk("%s[%d]" % (path, i), x, y)
        elif isinstance(a, float):
            if struct.pack("<d", a) != struct.pack("<d", b):
                self.diff(path, "%r != %r" % (a, b))
        elif numpy is not None and isinstance(a, numpy.ndarray):
            if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
                self.diff(path, "arrays differ")
        elif isinstance(a, (str, bytes, int, bool, type(None), torch.dtype,
                            torch.device, torch.Size, complex)):
            if a != b:
                self.diff(path, "%r != %r" % (a, b))
        elif hasattr(a, "__dict__"):
            self.attrs(path, a, b)
            if not vars(a) and a != b:
                self.diff(path, "%r != %r" % (a, b))
        elif a != b and not (_is_nan(a) and _is_nan(b)):
            self.diff(path, "%r != %r" % (a, b))

    def attrs(self, path, a, b):
        va, vb = getattr(a, "__dict__", {}), getattr(b, "__dict__", {})
        if va or vb:
            self.walk(path + ".__dict__", dict(va), dict(vb))

    def sharing(self):
        """Same partition of tensors into storage-sharing groups on both sides."""
        groups = []
        for side in self.shares:
            first = {}
            groups.append([(p, first.setdefault(ptr, p)) for p, ptr in side])
        if groups[0] != groups[1]:
            for (pa, ga), (pb, gb) in zip(*groups):
                if ga != gb:
                    self.diff(pa, "shares its storage with %s on one side, %s on the other"
                              % (ga, gb))
                    break
            else:
                self.diff("", "storage sharing differs")


def _is_nan(x):
    try:
        return math.isnan(x)
    except TypeError:
        return False


def _short(keys, n=8):
    return repr(keys[:n]) + ("... (%d)" % len(keys) if len(keys) > n else "")


def differences(a, b):
    w = _Walk()
    w.walk("", a, b)
    if not w.diffs:
        w.sharing()
    return w.diffs


def assert_same(a, b, what):
    """Raises AssertionError listing the first differences between a and b."""
    d = differences(a, b)
    if d:
        raise AssertionError("%s differs:\n  %s" % (what, "\n  ".join(d[:20])))


def assert_loads_same(served, original, what):
    """torch.load of the served file equals torch.load of the original.
    Where the original also loads with weights_only=True (as the HF Trainer
    and torch >= 2.6 load), the served file must too, to the same objects:
    a synthesized pickle may not step outside the restricted unpickler."""
    assert_same(torch.load(served, map_location="cpu", weights_only=False),
                torch.load(original, map_location="cpu", weights_only=False), what)
    try:
        want = torch.load(original, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        return
    assert_same(torch.load(served, map_location="cpu", weights_only=True), want,
                what + " (weights_only=True)")


def count_tensors(obj):
    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(count_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(count_tensors(v) for v in obj)
    return 0
