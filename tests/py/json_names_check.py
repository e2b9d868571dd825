"""Names of any bytes through every JSON the project writes.

Series, checkpoint, file and tensor names here hold quotes, backslashes,
newlines, tabs, control characters, bytes that are not UTF-8, and 255-byte
names.  Each JSON document must parse with Python's strict json module from
its UTF-8 bytes, and every name in it must come back exactly: a name that is
not UTF-8 is written with the \\udcXX escapes of Python's "surrogateescape",
so name.encode("utf-8", "surrogateescape") gives the original bytes (what
os.fsencode gives for a name os.listdir returns).

    json_names_check.py build STORE RUNS   make the runs, init, import; check the
                                           --json output of ls, show, stats, verify
    json_names_check.py mount STORE RUNS MNT   the xattrs of every file of the mount
                                               (getfattr and os.getxattr)
    json_names_check.py damage STORE RUNS  verify --json of a damaged tensor, and what
                                           depends on it
"""
import json
import os
import subprocess
import sys

import torch

CKPTCTL = os.environb.get(b"CKPTCTL", b"./ckptctl")
PATTERN = b"--pattern=-([0-9]+)$"

SERIES_A = b'run"1 \\ \n\t\xff\xfe'
CKPTS_A = [b'ck"pt\\\t\xe9\x01' + b"c" * 243 + s for s in (b"-10", b"-20")]   # 255 bytes
FILE_A = b'mo"del\\\n\xfe.pt'
JSON_A = b'conf"ig\\\x1f\n\xc3\xa9.json'
BAD_A = b'bro"ken\\\n\xff.pt'
SERIES_B = b'"' + b"s" * 253 + b"\\"                          # 255 bytes
CKPTS_B = [b'"\\c\xff' + s for s in (b"-10", b"-20")]
FILE_B = b'\\"' + b"f" * 250 + b".pt"                           # 255 bytes
TENSORS = ['we"ight\\0', 'line\nbreak\ttab\x01', "caf\u00e9 \U0001f600", "plain"]

# The index keys a checkpoint by series and name together, within LMDB's
# 511 bytes: a 255-byte series has short checkpoint names here.
for n in (SERIES_B, FILE_B, *CKPTS_A):
    assert len(n) == 255, len(n)


def text(b):
    """What a name must read as once parsed."""
    return b.decode("utf-8", "surrogateescape")


def fail(msg):
    sys.exit("FAIL: " + msg)


def parse(what, out):
    try:
        return json.loads(out.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        fail("%s: not JSON (%s):\n%r" % (what, e, out[:2000]))


def ctl(*args, want=(0,)):
    p = subprocess.run([CKPTCTL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode not in want:
        fail("ckptctl %r exited %d: %s" % (args, p.returncode, p.stderr.decode(errors="replace")))
    return p.stdout


def ctl_json(*args, want=(0,)):
    return parse("ckptctl %r" % (args,), ctl(*args, want=want))


def expect(what, got, want):
    if got != want:
        fail("%s: got %r, want %r" % (what, got, want))


def run_layout(runs):
    """{series: {ckpt: {file: path}}} of what build() writes, all bytes."""
    out = {}
    for series, ckpts, fname in ((SERIES_A, CKPTS_A, FILE_A), (SERIES_B, CKPTS_B, FILE_B)):
        out[series] = {c: {fname: os.path.join(runs, series, c, fname)} for c in ckpts}
    for c in CKPTS_A:
        out[SERIES_A][c][JSON_A] = os.path.join(runs, SERIES_A, c, JSON_A)
    out[SERIES_A][CKPTS_A[0]][BAD_A] = os.path.join(runs, SERIES_A, CKPTS_A[0], BAD_A)
    return out


def full_save():
    gen = torch.Generator().manual_seed(17)
    return {name: torch.randn(4, 3, generator=gen) for name in TENSORS}


def build(store, runs):
    full = full_save()
    for series, ckpts, fname in ((SERIES_A, CKPTS_A, FILE_A), (SERIES_B, CKPTS_B, FILE_B)):
        for i, c in enumerate(ckpts):
            d = os.path.join(runs, series, c)
            os.makedirs(d)
            # The second checkpoint saves only two tensors: a composite.
            sd = full if i == 0 else {k: v + 1 for k, v in list(full.items())[:2]}
            with open(os.path.join(d, fname), "wb") as f:
                torch.save(sd, f)
    for c in CKPTS_A:
        with open(os.path.join(runs, SERIES_A, c, JSON_A), "w") as f:
            json.dump({"step": c.decode("latin-1")}, f)
    with open(os.path.join(runs, SERIES_A, CKPTS_A[0], BAD_A), "wb") as f:
        f.write(b"PK\x03\x04 not a torch.save archive")

    ctl(b"init", store)
    ctl(b"import", store, os.path.join(runs, SERIES_A), PATTERN, want=(2,))   # BAD_A is refused
    ctl(b"import", store, os.path.join(runs, SERIES_B), PATTERN)
    layout = run_layout(runs)

    doc = ctl_json(b"ls", store, b"--json")
    expect("ls: series", sorted(s["name"] for s in doc["series"]), sorted(text(s) for s in layout))
    for series, ckpts in layout.items():
        doc = ctl_json(b"ls", store, series, b"--json")
        expect("ls SERIES: series", doc["series"], text(series))
        expect("ls SERIES: checkpoints", [c["name"] for c in doc["checkpoints"]], [text(c) for c in ckpts])
        expect("ls SERIES: steps", [c["step"] for c in doc["checkpoints"]], [10, 20])
        expect("ls SERIES: sources", [c["source"] for c in doc["checkpoints"]],
               [text(os.path.join(runs, series, c)) for c in ckpts])
        for c, files in ckpts.items():
            doc = ctl_json(b"ls", store, series + b"/" + c, b"--json")
            expect("ls SERIES/CKPT: series", doc["series"], text(series))
            expect("ls SERIES/CKPT: checkpoint", doc["checkpoint"], text(c))
            expect("ls SERIES/CKPT: files", sorted((f["path"], f["source"]) for f in doc["files"]),
                   sorted((text(f), text(p)) for f, p in files.items()))

    for series, ckpts in layout.items():
        older, newer = list(ckpts)
        fname = FILE_A if series == SERIES_A else FILE_B
        doc = ctl_json(b"show", store, series + b"/" + newer, fname, b"--json")
        expect("show: path", doc["path"], text(series + b"/" + newer + b"/" + fname))
        tensors = doc["tensors"]
        expect("show: tensor names", sorted(t["name"] for t in tensors), sorted(TENSORS))
        expect("show: sources", sorted((t["name"], t["src_ckpt"], t["src_path"]) for t in tensors),
               sorted((name, text(newer if i < 2 else older), text(ckpts[newer if i < 2 else older][fname]))
                      for i, name in enumerate(TENSORS)))

    doc = ctl_json(b"stats", store, b"--json", want=(2,))   # BAD_A cannot be served
    expect("stats: store", doc["store"], text(store))
    expect("stats: series and checkpoints",
           sorted((s["name"], [c["name"] for c in s["checkpoints"]]) for s in doc["series"]),
           sorted((text(s), [text(c) for c in ckpts]) for s, ckpts in layout.items()))

    doc = ctl_json(b"verify", store, b"--json")
    expect("verify: damaged", doc["damaged"], [])
    expect("verify: bad", [(b["checkpoint"], b["file"], b["physical"]) for b in doc["bad"]],
           [(text(SERIES_A + b"/" + CKPTS_A[0]), text(BAD_A), text(layout[SERIES_A][CKPTS_A[0]][BAD_A]))])
    print("ckptctl ls, show, stats and verify --json: every name read back exactly")


def getfattr(path, name):
    p = subprocess.run([b"getfattr", b"--absolute-names", b"--only-values", b"-n", name, path],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if p.returncode != 0:
        fail("getfattr -n %s %r: %s" % (name.decode(), path, p.stderr.decode(errors="replace")))
    return p.stdout


def mount(store, runs, mnt):
    layout = run_layout(runs)
    mnt = os.fsencode(mnt)
    expect("mount: series", sorted(os.listdir(mnt)), sorted(layout))
    checked = 0
    for series, ckpts in layout.items():
        expect("mount: checkpoints", sorted(os.listdir(os.path.join(mnt, series))), sorted(ckpts))
        for c in ckpts:
            ckdir = os.path.join(mnt, series, c)
            expect("user.ckptfs.checkpoint of the directory", os.getxattr(ckdir, "user.ckptfs.checkpoint"),
                   series + b"/" + c)
            for f in os.listdir(ckdir):
                path = os.path.join(ckdir, f)
                if f == BAD_A:   # refused at import: why, not where from
                    try:
                        os.getxattr(path, "user.ckptfs.sources")
                        fail("user.ckptfs.sources of the refused %r" % path)
                    except OSError:
                        continue
                raw = getfattr(path, b"user.ckptfs.sources")
                expect("getfattr and os.getxattr", os.getxattr(path, "user.ckptfs.sources"), raw)
                doc = parse("user.ckptfs.sources of %r" % path, raw)
                expect("sources: checkpoint", doc["checkpoint"], text(series + b"/" + c))
                expect("sources: file", doc["file"], text(f))
                names = {text(k): k for k in ckpts}
                for s in doc["sources"]:
                    if s["checkpoint"] not in names:
                        fail("sources of %r: checkpoint %r is not one of the series'" % (path, s["checkpoint"]))
                    expect("sources: path", s["path"], text(layout[series][names[s["checkpoint"]]][f]))
                if f in (FILE_A, FILE_B):
                    expect("sources: tensors", sorted(doc["tensors"]), sorted(TENSORS))
                    if c == list(ckpts)[1]:
                        expect("sources: synthesized", doc["synthesized"], True)
                        expect("sources: tensor origins", sorted(doc["tensors"].items()),
                               sorted((n, text(list(ckpts)[0 if i >= 2 else 1])) for i, n in enumerate(TENSORS)))
                checked += 1
    if checked != 6:
        fail("%d files had user.ckptfs.sources, not 6" % checked)
    print("user.ckptfs.sources of %d files (getfattr, os.getxattr): every name read back exactly" % checked)


def damage(store, runs):
    """One byte of a tensor that the newer checkpoint takes from the older
    one changes, the file's identity kept: verify names the damaged range,
    its tensor, and the composite that serves it."""
    layout = run_layout(runs)
    older, newer = CKPTS_A
    path = layout[SERIES_A][older][FILE_A]
    victim = TENSORS[2]
    raw = full_save()[victim].numpy().tobytes()
    st = os.stat(path)
    with open(path, "r+b") as f:
        data = f.read()
        at = data.find(raw)
        if at < 0 or data.find(raw, at + 1) >= 0:
            fail("the bytes of %r are not once in %r" % (victim, path))
        f.seek(at + 5)
        f.write(bytes([data[at + 5] ^ 0x40]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    doc = ctl_json(b"verify", store, b"--json", want=(3,))
    expect("verify: damaged", [(d["checkpoint"], d["file"], d["physical"], d["tensors"]) for d in doc["damaged"]],
           [(text(SERIES_A + b"/" + older), text(FILE_A), text(path), [victim])])
    deps = {(d["checkpoint"], d["file"]): d for d in doc["dependents"]}
    dep = deps.get((text(SERIES_A + b"/" + newer), text(FILE_A)))
    if dep is None:
        fail("verify: %r does not depend on the damage: %r" % (newer, list(deps)))
    expect("verify: the composite's damaged tensors",
           [(t["name"], t["from"]["checkpoint"], t["from"]["file"]) for t in dep["tensors"]],
           [(victim, text(SERIES_A + b"/" + older), text(FILE_A))])
    print("ckptctl verify --json of a damaged tensor: every name read back exactly")


def main():
    mode, store, runs = sys.argv[1], os.fsencode(sys.argv[2]), os.fsencode(sys.argv[3])
    if mode == "build":
        build(store, runs)
    elif mode == "mount":
        mount(store, runs, sys.argv[4])
    elif mode == "damage":
        damage(store, runs)
    else:
        fail("unknown mode " + mode)


if __name__ == "__main__":
    main()
