"""A small pure-Python safetensors writer and validating reader.

There is no safetensors package here, so the tests carry their own
reference implementation, written from the rules in docs/formats.md §3:

writer  -- tensors sorted by dtype descending in the Rust enum order, ties by
           name (byte-wise ascending); contiguous offsets from 0; compact JSON
           header, "__metadata__" first, then tensors in offset order with the
           fields dtype, shape, data_offsets; header padded with spaces to a
           multiple of 8.  This is what safetensors.torch.save_file writes.
reader  -- the reference loader's validation: size bounds on the header
           length, a UTF-8 JSON object starting with '{', offsets that tile
           the byte buffer exactly (no holes, no overlap, no trailing bytes),
           byte counts that match dtype x shape.  Anything else raises
           SafetensorsError with the reason.

Only torch (for tensors) and the standard library are used; torch is
imported on first use, so that RawTensor files are written and headers
parsed without it.
"""

import json
import struct

# (safetensors name, bits) in the Rust enum order, which is also the sort order.
DTYPES = [
    ("BOOL", 8), ("F4", 4), ("F6_E2M3", 6), ("F6_E3M2", 6), ("U8", 8), ("I8", 8),
    ("F8_E5M2", 8), ("F8_E4M3", 8), ("F8_E8M0", 8), ("F8_E4M3FNUZ", 8),
    ("F8_E5M2FNUZ", 8), ("I16", 16), ("U16", 16), ("F16", 16), ("BF16", 16),
    ("I32", 32), ("U32", 32), ("F32", 32), ("C64", 64), ("F64", 64),
    ("I64", 64), ("U64", 64),
]
RANK = {name: i for i, (name, _) in enumerate(DTYPES)}
BITS = dict(DTYPES)

_TORCH_OF = {}


def torch_of():
    """The dtypes torch 1.13 has.  Others are read as raw bytes (RawTensor)."""
    if not _TORCH_OF:
        import torch
        _TORCH_OF.update({
            "BOOL": torch.bool, "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16,
            "F16": torch.float16, "BF16": torch.bfloat16, "I32": torch.int32,
            "F32": torch.float32, "C64": torch.complex64, "F64": torch.float64,
            "I64": torch.int64,
        })
    return _TORCH_OF


def __getattr__(name):
    # TORCH_OF (safetensors name -> torch dtype) and NAME_OF (the reverse),
    # made on first use.
    if name == "TORCH_OF":
        return torch_of()
    if name == "NAME_OF":
        return {v: k for k, v in torch_of().items()}
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

MAX_HEADER = 100_000_000


class SafetensorsError(ValueError):
    """The bytes are not a file the reference loader would accept."""


class RawTensor:
    """A tensor of a dtype torch 1.13 lacks: name of the dtype, shape, bytes."""

    def __init__(self, dtype, shape, data):
        self.dtype, self.shape, self.data = dtype, list(shape), bytes(data)

    def __eq__(self, other):
        return (isinstance(other, RawTensor) and self.dtype == other.dtype
                and self.shape == other.shape and self.data == other.data)

    def __repr__(self):
        return "RawTensor(%s, %s, %d bytes)" % (self.dtype, self.shape, len(self.data))


def tensor_bytes(t):
    """Little-endian C-order bytes of a CPU tensor (any dtype, any rank)."""
    if isinstance(t, RawTensor):
        return t.data
    import torch
    flat = t.detach().contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy().tobytes()


def _describe(t):
    if isinstance(t, RawTensor):
        return t.dtype, t.shape
    name_of = __getattr__("NAME_OF")
    if t.dtype not in name_of:
        raise SafetensorsError("dtype %s has no safetensors name" % t.dtype)
    return name_of[t.dtype], list(t.shape)


def dumps(tensors, metadata=None):
    """Bytes of a safetensors file holding tensors (name -> tensor)."""
    entries = []
    for name, t in tensors.items():
        dtype, shape = _describe(t)
        entries.append((name, dtype, shape, tensor_bytes(t)))
    entries.sort(key=lambda e: (-RANK[e[1]], e[0].encode("utf-8")))

    header = {}
    if metadata is not None:
        header["__metadata__"] = dict(metadata)
    offset = 0
    for name, dtype, shape, data in entries:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(e[3] for e in entries)


def save(tensors, path, metadata=None):
    with open(path, "wb") as f:
        f.write(dumps(tensors, metadata))


def _no_duplicates(pairs):
    seen = {}
    for k, v in pairs:
        if k in seen:
            raise SafetensorsError("duplicate key %r in header" % k)
        seen[k] = v
    return seen


def _int(v, what):
    # JSON true/false are not integers here, whatever Python thinks.
    if not isinstance(v, int) or isinstance(v, bool) or v < 0:
        raise SafetensorsError("%s: %r is not a non-negative integer" % (what, v))
    return v


def parse_header(data):
    """Validates the whole file; returns (metadata or None, [(name, dtype, shape, begin, end)])."""
    if len(data) < 8:
        raise SafetensorsError("file is %d bytes, shorter than the 8-byte header length" % len(data))
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise SafetensorsError("header length %d exceeds %d" % (n, MAX_HEADER))
    if 8 + n > len(data):
        raise SafetensorsError("header length %d runs past the end of a %d-byte file" % (n, len(data)))
    try:
        text = data[8:8 + n].decode("utf-8")
    except UnicodeDecodeError as e:
        raise SafetensorsError("header is not UTF-8: %s" % e)
    if not text.startswith("{"):
        raise SafetensorsError("header does not start with '{'")
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise SafetensorsError("header is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object")

    metadata = header.pop("__metadata__", None)
    if metadata is not None:
        if not isinstance(metadata, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise SafetensorsError("__metadata__ is not a map of strings to strings")

    tensors = []
    for name, info in header.items():
        if not isinstance(info, dict):
            raise SafetensorsError("%s: entry is not an object" % name)
        dtype, shape, offs = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if dtype not in BITS:
            raise SafetensorsError("%s: unknown dtype %r" % (name, dtype))
        if not isinstance(shape, list):
            raise SafetensorsError("%s: shape is not a list" % name)
        shape = [_int(d, name + " shape") for d in shape]
        if not isinstance(offs, list) or len(offs) != 2:
            raise SafetensorsError("%s: data_offsets is not [begin, end]" % name)
        begin, end = (_int(o, name + " data_offsets") for o in offs)
        tensors.append((name, dtype, shape, begin, end))

    tensors.sort(key=lambda t: (t[3], t[4]))
    expect = 0
    for name, dtype, shape, begin, end in tensors:
        if begin != expect or end < begin:
            raise SafetensorsError("%s: data_offsets [%d, %d] do not follow the previous end %d"
                                   % (name, begin, end, expect))
        numel = 1
        for d in shape:
            numel *= d
        bits = numel * BITS[dtype]
        if bits % 8:
            raise SafetensorsError("%s: %d bits is not a whole number of bytes" % (name, bits))
        if end - begin != bits // 8:
            raise SafetensorsError("%s: %d bytes for %s %s, expected %d"
                                   % (name, end - begin, dtype, shape, bits // 8))
        expect = end
    if 8 + n + expect != len(data):
        raise SafetensorsError("byte buffer ends at %d but the file is %d bytes"
                               % (8 + n + expect, len(data)))
    return metadata, tensors


def loads(data):
    """Validates and decodes a safetensors file: (metadata, {name: tensor}) in file order."""
    import torch
    metadata, entries = parse_header(data)
    (n,) = struct.unpack("<Q", data[:8])
    base = 8 + n
    out = {}
    for name, dtype, shape, begin, end in entries:
        raw = data[base + begin:base + end]
        if dtype not in torch_of():
            out[name] = RawTensor(dtype, shape, raw)
            continue
        flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else \
            torch.empty(0, dtype=torch.uint8)
        out[name] = flat.view(torch_of()[dtype]).reshape(shape).clone()
    return metadata, out


def load(path):
    with open(path, "rb") as f:
        return loads(f.read())
