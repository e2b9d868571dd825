"""Names of any bytes written through a writable mount (names_mount.sh).

Series, in-progress directories, checkpoints and files whose names hold
quotes, backslashes, newlines, tabs, bytes that are not UTF-8, and 255
bytes (a 255-byte checkpoint name in a 255-byte series: their index key
passes LMDB's limit) are created, written, committed by rename and by the
user.ckptfs.commit attribute, and quarantined when torn; the mount lists
them and reads them back byte for byte, and ckptctl ls/quarantine --json
and user.ckptfs.sources give them back exactly (surrogateescape for bytes
that are not UTF-8, as tests/py/json_names_check.py checks for imports).

    names_mount_check.py prepare RUNS            a run to import (its series keeps a pattern)
    names_mount_check.py write MNT               everything through the mount
    names_mount_check.py check STORE MNT         what the mount and ckptctl show (again after a remount)
"""
import json
import os
import struct
import subprocess
import sys

CKPTCTL = os.environb.get(b"CKPTCTL", b"./ckptctl")

LONG_SERIES = b"L" * 254 + b"\xff"                            # 255 bytes
LONG_CKPT = b'c"\\\n' + b"k" * 249 + b"-2"                      # 255 bytes, step 2 by the pattern
LONG_STAGED = b"tmp" + b"\xfe" * 252                           # 255 bytes
ODD_SERIES = b'run "q" \\ \n\t\xff\xfe'
ODD_STAGED = b'tmp "s" \\ \n\xff'
ODD_FILE = b'we"ig\\ht\n\t\xfe.bin.json'
LONG_FILE = b"f" * 250 + b"\xe9.txt"                           # 255 bytes
SUBDIR = b'sub "d" \\ \xff'
for n in (LONG_SERIES, LONG_CKPT, LONG_STAGED, LONG_FILE):
    assert len(n) == 255, len(n)

FILES = {ODD_FILE: b'{"a": 1}\n', LONG_FILE: b"long name\n", SUBDIR + b"/" + ODD_FILE: b"deeper\n"}


def fail(msg):
    sys.exit("FAIL: " + msg)


def text(b):
    return b.decode("utf-8", "surrogateescape")


def ctl_json(*args):
    p = subprocess.run([CKPTCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        fail("ckptctl %r exited %d: %s" % (args, p.returncode, p.stderr.decode(errors="replace")))
    try:
        return json.loads(p.stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        fail("ckptctl %r: not JSON (%s): %r" % (args, e, p.stdout[:2000]))


def safetensors(names, seed):
    hdr, data = {}, b""
    for i, n in enumerate(names):
        hdr[n] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
        data += struct.pack("<2f", seed + i, seed - i)
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def write_tree(d, extra=None):
    os.mkdir(os.path.join(d, SUBDIR))
    for rel, data in {**FILES, **(extra or {})}.items():
        with open(os.path.join(d, rel), "wb") as f:
            f.write(data)


def prepare(runs):
    d = os.path.join(runs, LONG_SERIES, b"c-1")
    os.makedirs(d)
    with open(os.path.join(d, b"model.safetensors"), "wb") as f:
        f.write(safetensors(['w"1\\', "w2"], 1.0))


def write(mnt):
    # A new series, an in-progress directory, files of every odd name,
    # committed by rename.
    s = os.path.join(mnt, ODD_SERIES)
    os.mkdir(s)
    staged = os.path.join(s, ODD_STAGED)
    os.mkdir(staged)
    write_tree(staged)
    if sorted(os.listdir(staged)) != sorted([ODD_FILE, LONG_FILE, SUBDIR]):
        fail("in progress: %r" % os.listdir(staged))
    os.rename(staged, os.path.join(s, b"checkpoint-7"))
    # One committed by the attribute, under its own name.
    own = os.path.join(s, b"checkpoint-8")
    os.mkdir(own)
    write_tree(own)
    os.setxattr(own, "user.ckptfs.commit", b"1")
    # A 255-byte name, into the imported 255-byte series (its pattern gives
    # the step), with a partial safetensors save: a composite.
    staged = os.path.join(mnt, LONG_SERIES, LONG_STAGED)
    os.mkdir(staged)
    write_tree(staged, {b"model.safetensors": safetensors(["w2"], 5.0)})
    os.rename(staged, os.path.join(mnt, LONG_SERIES, LONG_CKPT))
    # Torn: quarantined, the 255-byte name cut to fit.
    staged = os.path.join(s, LONG_STAGED)
    os.mkdir(staged)
    with open(os.path.join(staged, ODD_FILE[:-5] + b".pt"), "wb") as f:
        f.write(b"PK\x03\x04 torn")
    try:
        os.rename(staged, os.path.join(s, b"checkpoint-9"))
        fail("a torn checkpoint was committed")
    except OSError as e:
        if e.errno != 5:
            fail("torn commit: %s" % e)
    print("written through the mount")


def check(store, mnt):
    series = sorted(os.listdir(mnt))
    if series != sorted([ODD_SERIES, LONG_SERIES]):
        fail("series: %r" % series)
    s = os.path.join(mnt, ODD_SERIES)
    if sorted(os.listdir(s)) != [b"checkpoint-7", b"checkpoint-8"]:
        fail("%r: %r" % (ODD_SERIES, os.listdir(s)))
    for c in (b"checkpoint-7", b"checkpoint-8"):
        for rel, data in FILES.items():
            with open(os.path.join(s, c, rel), "rb") as f:
                if f.read() != data:
                    fail("%r/%r/%r: bytes differ" % (ODD_SERIES, c, rel))
    long_dir = os.path.join(mnt, LONG_SERIES)
    if sorted(os.listdir(long_dir)) != sorted([b"c-1", LONG_CKPT]):
        fail("%r: %r" % (LONG_SERIES, os.listdir(long_dir)))
    comp = os.path.join(long_dir, LONG_CKPT, b"model.safetensors")
    doc = json.loads(os.getxattr(comp, "user.ckptfs.sources").decode("utf-8"))
    if doc["checkpoint"] != text(LONG_SERIES + b"/" + LONG_CKPT):
        fail("user.ckptfs.sources: checkpoint %r" % doc["checkpoint"])
    if sorted(x["checkpoint"] for x in doc["sources"]) != sorted([text(LONG_CKPT), "c-1"]):
        fail("user.ckptfs.sources: %r" % doc["sources"])
    for rel, data in FILES.items():
        with open(os.path.join(long_dir, LONG_CKPT, rel), "rb") as f:
            if f.read() != data:
                fail("%r: bytes differ" % rel)

    doc = ctl_json(b"ls", store, b"--json")
    if sorted(x["name"] for x in doc["series"]) != sorted([text(ODD_SERIES), text(LONG_SERIES)]):
        fail("ls --json: %r" % doc["series"])
    doc = ctl_json(b"ls", store, ODD_SERIES, b"--json")
    if [c["name"] for c in doc["checkpoints"]] != ["checkpoint-7", "checkpoint-8"]:
        fail("ls SERIES --json: %r" % doc["checkpoints"])
    doc = ctl_json(b"ls", store, LONG_SERIES + b"/" + LONG_CKPT, b"--json")
    if doc["checkpoint"] != text(LONG_CKPT) or sorted(f["path"] for f in doc["files"]) != sorted(
            text(p) for p in list(FILES) + [b"model.safetensors"]):
        fail("ls SERIES/CKPT --json: %r" % doc)
    q = ctl_json(b"quarantine", store, b"--json")
    if len(q) != 1 or q[0]["series"] != text(ODD_SERIES) or not q[0]["name"].startswith(text(LONG_STAGED[:235])) \
            or len(q[0]["name"].encode("utf-8", "surrogateescape")) > 255:
        fail("quarantine --json: %r" % q)
    # One line per problem: a backslash or newline in a path is escaped.
    torn = (ODD_FILE[:-5] + b".pt").replace(b"\\", b"\\\\").replace(b"\n", b"\\n")
    if len(q[0]["reasons"]) != 1 or not q[0]["reasons"][0].startswith(text(torn) + ": "):
        fail("quarantine --json reasons: %r" % q[0]["reasons"])
    print("names read back exactly through the mount and ckptctl --json")


def main():
    mode = sys.argv[1]
    if mode == "prepare":
        prepare(os.fsencode(sys.argv[2]))
    elif mode == "write":
        write(os.fsencode(sys.argv[2]))
    elif mode == "check":
        check(os.fsencode(sys.argv[2]), os.fsencode(sys.argv[3]))
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
