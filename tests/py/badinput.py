"""Bad checkpoint files, and the checks that ckptfs refuses them cleanly.

  badinput.py make KIND DIR MARKERS   writes good.pt, good.safetensors and the
                                      KIND set of bad files into DIR; hostile
                                      pickles would create files in MARKERS
  badinput.py tamper DIR               (kind tamper, after the import;
                                      originals saved in DIR.pristine)
  badinput.py check KIND DIR MNT_SERIES IMPORT_STDERR MARKERS

KIND is one of:
  torch        truncated, bit-flipped (tensor data: CRC mismatch; data.pkl with
               a stale CRC; an invalid opcode with a correct CRC), wrong magic,
               empty, huge lengths in the pickle and in the zip directory
  pickle       hostile pickles (os.system, posix.system, eval,
               subprocess.getoutput, each would touch a marker file; one
               also as the second item of a DCP data file) and deep
               nesting (lists, dicts, MARKs a million deep)
  safetensors  short, truncated, garbled header, huge header length, holes,
               trailing bytes, unknown dtype, size/shape mismatch
  tamper       good files imported, then changed behind the store's back:
               one tensor byte flipped with size and mtime kept (the content
               hash must catch it: EIO), or grown (the identity check must)

`check` asserts: the import reported every bad file with a reason (not for
tamper: the import saw good files); no marker
exists; every bad file is absent from the mount or fails to read (and never
returns bytes that are not the file's); the good files load through the
mount and equal the originals, before and after the failed reads.
"""

import io
import json
import os
import re
import struct
import sys
import zipfile

import torch

import deepcompare
import mountcheck
import safetensors_ref


def good_state():
    g = torch.Generator().manual_seed(7)
    return {"weight": torch.randn(8, 8, generator=g), "bias": torch.randn(8, generator=g),
            "step": 3}


def records(data):
    """(name without the root folder, bytes) of a torch zip, in order."""
    z = zipfile.ZipFile(io.BytesIO(data))
    return [(i.filename.split("/", 1)[1], z.read(i)) for i in z.infolist()]


def write_torch_zip(path, recs):
    """A zip laid out exactly as torch.save lays it out, with any contents."""
    w = torch._C.PyTorchFileWriter(path)
    for name, data in recs:
        if name != "version":   # written by write_end_of_file
            w.write_record(name, data, len(data))
    w.write_end_of_file()


def data_offset(data, name_suffix):
    """File offset of the data of the first record whose name ends with name_suffix."""
    z = zipfile.ZipFile(io.BytesIO(data))
    info = next(i for i in z.infolist() if i.filename.endswith(name_suffix))
    name_len, extra_len = struct.unpack_from("<HH", data, info.header_offset + 26)
    return info.header_offset + 30 + name_len + extra_len, info.file_size


def flip(data, offset):
    b = bytearray(data)
    b[offset] ^= 0x40
    return bytes(b)


class Hostile:
    """Pickles as a call of any function: the attack, never run here."""

    def __init__(self, func, *args):
        self.func, self.args = func, args

    def __reduce__(self):
        return self.func, self.args


def make_torch(d, good):
    pkl_off, pkl_len = data_offset(good, "/data.pkl")
    data_off, _ = data_offset(good, "/data/0")
    files = {
        "truncated_half.pt": good[:len(good) // 2],
        "truncated_tail.pt": good[:-10],
        "truncated_header.pt": good[:100],
        "empty.pt": b"",
        "wrong_magic.pt": b"XK\x03\x04" + good[4:],
        "flip_tensor_data.pt": flip(good, data_off + 5),
        "flip_data_pkl.pt": flip(good, pkl_off + pkl_len // 2),
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    pkl = dict(records(good))["data.pkl"]
    # Correct CRC, but an opcode that does not exist (0xff) right after PROTO.
    write_torch_zip(os.path.join(d, "bad_opcode.pt"),
                    [(n, b"\x80\x02\xff" + v[2:] if n == "data.pkl" else v)
                     for n, v in records(good)])
    # BINUNICODE and LONG4 that claim ~2 GiB in a small pickle.
    write_torch_zip(os.path.join(d, "huge_string.pt"),
                    [("data.pkl", b"\x80\x02X\xff\xff\xff\x7fabc.")])
    write_torch_zip(os.path.join(d, "huge_long.pt"),
                    [("data.pkl", b"\x80\x02\x8b\xff\xff\xff\x7f\x01.")])
    # A storage claiming 2**62 elements, and a tensor of 2**40 x 2**40 elements.
    huge_numel = re.sub(rb"(X\x03\x00\x00\x00cpuq.)K@",
                        lambda m: m.group(1) + b"\x8a\x08" + (1 << 62).to_bytes(8, "little"),
                        pkl, count=1, flags=re.S)
    assert huge_numel != pkl, "storage numel pattern not found"
    write_torch_zip(os.path.join(d, "huge_numel.pt"),
                    [(n, huge_numel if n == "data.pkl" else v) for n, v in records(good)])
    big = b"\x8a\x06" + (1 << 40).to_bytes(6, "little")
    huge_shape = pkl.replace(b"K\x08K\x08\x86", big + big + b"\x86", 1)
    assert huge_shape != pkl, "shape pattern not found"
    write_torch_zip(os.path.join(d, "huge_shape.pt"),
                    [(n, huge_shape if n == "data.pkl" else v) for n, v in records(good)])
    # The central directory claims data/0 is 4 GiB - 16 bytes long.
    cd = next(m.start() for m in re.finditer(rb"PK\x01\x02", good)
              if good[m.start() + 46:].startswith(b"good/data/0"))
    b = bytearray(good)
    struct.pack_into("<II", b, cd + 20, 0xFFFFFFF0, 0xFFFFFFF0)
    with open(os.path.join(d, "huge_zip_size.pt"), "wb") as f:
        f.write(bytes(b))


def make_pickle(d, good, markers):
    state = good_state()
    attacks = {   # GLOBAL module, name, and a one-string argument that runs a command
        "hostile_os_system.pt": ("os", "system", "touch %s"),
        "hostile_posix_system.pt": ("posix", "system", "touch %s"),
        "hostile_eval.pt": ("__builtin__", "eval", "__import__('os').system('touch %s')"),
        "hostile_subprocess.pt": ("subprocess", "getoutput", "touch %s"),
    }
    for name, (module, func, arg) in attacks.items():
        marker = os.path.join(markers, name + ".ran")
        # A real state dict with the attack hidden one level down.  Pickled as
        # a call of posix.system, then respelled as the attack's GLOBAL.
        buf = io.BytesIO()
        torch.save({"weight": state["weight"], "config": {"hook": Hostile(os.system, arg % marker)}}, buf)
        recs = records(buf.getvalue())
        pkl = dict(recs)["data.pkl"]
        spelled = b"c%s\n%s\n" % (module.encode(), func.encode())
        pkl = pkl.replace(b"cposix\nsystem\n", spelled)
        assert spelled in pkl, name
        write_torch_zip(os.path.join(d, name), [(n, pkl if n == "data.pkl" else v) for n, v in recs])

    # A DCP data file (torch.save blobs end to end, docs/formats.md §4.1)
    # whose second item is the os.system attack: refused like a .pt.
    blob = io.BytesIO()
    torch.save(state["weight"], blob)
    with open(os.path.join(d, "hostile_os_system.pt"), "rb") as f:
        attack = f.read()
    with open(os.path.join(d, "hostile_dcp.distcp"), "wb") as f:
        f.write(blob.getvalue() + attack)

    depth = 1_000_000
    # Lists nested a million deep: ] ] ] ... a a a.
    write_torch_zip(os.path.join(d, "deep_lists.pt"),
                    [("data.pkl", b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")])
    # Dicts nested 300,000 deep ({'k': {'k': ...}}): what a recursive merge would walk.
    n = 300_000
    write_torch_zip(os.path.join(d, "deep_dicts.pt"),
                    [("data.pkl", b"\x80\x02}" + b"X\x01\x00\x00\x00k}" * n + b"s" * n + b".")])
    # A million MARKs and nothing else.
    write_torch_zip(os.path.join(d, "deep_marks.pt"), [("data.pkl", b"\x80\x02" + b"(" * depth + b".")])


def make_safetensors(d, good_st):
    n = struct.unpack("<Q", good_st[:8])[0]
    header = json.loads(good_st[8:8 + n])

    def with_header(h):
        text = json.dumps(h, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text + good_st[8 + n:]

    hole = json.loads(json.dumps(header))
    first = min((k for k in hole if k != "__metadata__"), key=lambda k: hole[k]["data_offsets"][0])
    hole[first]["data_offsets"][0] += 4          # a 4-byte hole before the first tensor
    dtype = json.loads(json.dumps(header))
    dtype[first]["dtype"] = "F33"
    shape = json.loads(json.dumps(header))
    shape[first]["shape"] = [3, 3] if shape[first]["shape"] != [3, 3] else [2, 2]
    files = {
        "st_short.safetensors": good_st[:5],
        "st_truncated.safetensors": good_st[:-4],
        "st_trailing.safetensors": good_st + b"\0" * 8,
        "st_garbled_header.safetensors": good_st[:8 + n // 2] + b"\x01" + good_st[9 + n // 2:],
        "st_not_json.safetensors": good_st[:8] + b"\xff\xfe" + good_st[10:],
        "st_huge_header.safetensors": struct.pack("<Q", 1 << 63) + good_st[8:],
        "st_header_past_end.safetensors": struct.pack("<Q", len(good_st)) + good_st[8:],
        "st_hole.safetensors": with_header(hole),
        "st_unknown_dtype.safetensors": with_header(dtype),
        "st_shape_mismatch.safetensors": with_header(shape),
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def make_tamper(d):
    """Victims: good files that `tamper` will change behind the store's back."""
    for ext in ("pt", "safetensors"):
        good = mountcheck.read_all(os.path.join(d, "good." + ext))
        for how in ("flipped", "grown"):
            with open(os.path.join(d, "victim_%s.%s" % (how, ext)), "wb") as f:
                f.write(good)


def tamper(d):
    """After the import: flip one tensor byte in the victim_flipped files
    keeping size and mtime (only the content hash can tell), append to the
    victim_grown ones (the file identity tells).  Originals go to d.pristine."""
    pristine = d + ".pristine"
    os.makedirs(pristine, exist_ok=True)
    for name in sorted(f for f in os.listdir(d) if f.startswith("victim_")):
        path = os.path.join(d, name)
        data = mountcheck.read_all(path)
        with open(os.path.join(pristine, name), "wb") as f:
            f.write(data)
        st = os.stat(path)
        if "flipped" in name:
            if name.endswith(".pt"):
                off = data_offset(data, "/data/0")[0] + 5
            else:
                off = 8 + struct.unpack("<Q", data[:8])[0] + 5
            with open(path, "r+b") as f:
                f.seek(off)
                f.write(bytes([data[off] ^ 0x01]))
        else:
            with open(path, "ab") as f:
                f.write(b"\0" * 16)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        print("tampered with %s" % name)


def make(kind, d, markers):
    markers = os.path.abspath(markers)
    os.makedirs(d, exist_ok=True)
    os.makedirs(markers, exist_ok=True)
    torch.save(good_state(), os.path.join(d, "good.pt"))
    g = torch.Generator().manual_seed(8)
    safetensors_ref.save({"a": torch.randn(4, 4, generator=g), "b": torch.arange(6)},
                         os.path.join(d, "good.safetensors"), {"format": "pt"})
    good = mountcheck.read_all(os.path.join(d, "good.pt"))
    if kind == "torch":
        make_torch(d, good)
    elif kind == "pickle":
        make_pickle(d, good, markers)
    elif kind == "safetensors":
        make_safetensors(d, mountcheck.read_all(os.path.join(d, "good.safetensors")))
    elif kind == "tamper":
        make_tamper(d)
    else:
        sys.exit("unknown kind " + kind)
    bad = sorted(f for f in os.listdir(d) if not f.startswith("good."))
    print("made %d bad %s files in %s" % (len(bad), kind, d))


def check_markers(markers):
    ran = os.listdir(markers)
    if ran:
        raise AssertionError("a hostile pickle was executed: %s" % ran)


def check_good(d, ckpt):
    deepcompare.assert_loads_same(os.path.join(ckpt, "good.pt"), os.path.join(d, "good.pt"),
                                  "good.pt through the mount")
    meta, served = safetensors_ref.load(os.path.join(ckpt, "good.safetensors"))
    ref_meta, ref = safetensors_ref.load(os.path.join(d, "good.safetensors"))
    deepcompare.assert_same((meta, served), (ref_meta, ref), "good.safetensors through the mount")


def check(kind, d, mnt_series, stderr_path, markers):
    """For kind tamper, stderr_path is unused and the pristine copies are
    in d + ".pristine": bytes a failing read returned must be theirs."""
    with open(stderr_path) as f:
        stderr = f.read()
    ckpt = mountcheck.sole_checkpoint(mnt_series)
    check_markers(markers)
    check_good(d, ckpt)
    bad = sorted(f for f in os.listdir(d) if not f.startswith("good."))
    for name in bad:
        if kind == "tamper":
            line = "changed after the import"
            how = mountcheck.assert_not_served(os.path.join(ckpt, name),
                                               os.path.join(d + ".pristine", name))
        else:
            line = mountcheck.assert_reported(stderr, name)
            how = mountcheck.assert_not_served(os.path.join(ckpt, name), os.path.join(d, name))
        print("  %-32s %-30s | %s" % (name, how, line[-90:]))
    check_markers(markers)
    check_good(d, ckpt)   # the daemon is still there and still right
    print("%d bad files refused; good files still served" % len(bad))


def main(argv):
    if len(argv) == 5 and argv[1] == "make":
        make(*argv[2:])
    elif len(argv) == 3 and argv[1] == "tamper":
        tamper(*argv[2:])
    elif len(argv) == 7 and argv[1] == "check":
        check(*argv[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
