#!/bin/sh
# Newest-wins merge semantics: for each case, the merged pickle must equal
# the Python reference (recursive {**older, **newer} on dicts, key order
# included), and a complete newest version must merge to itself.
set -eu
: "${CKPT_BUILDDIR:=.}"
py=${TORCH_PYTHON:-/usr/bin/python3}
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no python"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" - "$CKPT_BUILDDIR/tests/unit/merge_tool" "$tmp" <<'PY'
import collections, pickle, subprocess, sys
tool, tmp = sys.argv[1], sys.argv[2]
OD = collections.OrderedDict

def ref_merge(old, new):
    if isinstance(old, dict) and isinstance(new, dict):
        out = new.__class__() if isinstance(new, OD) else {}
        for k, v in old.items():
            out[k] = ref_merge(v, new[k]) if k in new else v
        for k, v in new.items():
            if k not in old:
                out[k] = v
        if isinstance(out, OD) and (hasattr(new, "_metadata") or hasattr(old, "_metadata")):
            out._metadata = ref_merge(getattr(old, "_metadata", None), getattr(new, "_metadata", None)) \
                if hasattr(old, "_metadata") and hasattr(new, "_metadata") else \
                getattr(new, "_metadata", getattr(old, "_metadata", None))
        return out
    return new

def sd(keys, tag, meta=None):
    d = OD((k, (tag, k)) for k in keys)
    if meta is not None:
        d._metadata = meta
    return d

cases = [
    ("state dict, odd layers newer",
     [sd(["l0", "l1", "l2", "l3"], 10), sd(["l1", "l3"], 20)], "merged"),
    ("optimizer by param index",
     [{"state": {0: {"step": 1, "m": [0]}, 1: {"step": 1, "m": [1]}, 2: {"step": 1, "m": [2]}},
       "param_groups": [{"lr": 0.1, "params": [0, 1, 2]}]},
      {"state": {1: {"step": 2, "m": [11]}}, "param_groups": [{"lr": 0.05, "params": [0, 1, 2]}]}], "merged"),
    ("complete newest is served as is",
     [{"a": 1, "b": {"c": 2}}, {"a": 3, "b": {"c": 4}}], "newest"),
    ("three versions, newest wins through the chain",
     [{"a": 1, "b": 1, "c": 1}, {"b": 2}, {"c": 3, "d": 3}], "merged"),
    ("lists and scalars come whole from newest",
     [{"x": [1, 2, 3], "y": (1, 2), "z": 5}, {"x": [9], "y": None}], "merged"),
    ("OrderedDict _metadata merges too",
     [sd(["a", "b"], 1, OD([("", {"version": 1}), ("a", {"version": 2})])),
      sd(["b"], 2, OD([("b", {"version": 3})]))], "merged"),
    ("plain-dict filtered save over a state dict: the plain type wins, no _metadata",
     [sd(["a", "b", "c"], 1, OD([("", {"version": 1})])), {"b": (2, "b")}], "merged"),
    ("newest non-dict replaces older dict", [{"a": {"b": 1}}, {"a": 7}], "newest"),
    ("different key order is reordered like {**old, **new}", [{"a": 1, "b": 2}, {"b": 3, "a": 4}], "merged"),
    ("same keys in the same order, a nested dict partial",
     [{"a": {"x": 1, "y": 2}, "b": 1}, {"a": {"x": 3}, "b": 2}], "merged"),
    ("same keys in the same order, _metadata merges",
     [sd(["a", "b"], 1, OD([("", {"version": 1}), ("a", {"version": 2})])),
      sd(["a", "b"], 2, OD([("b", {"version": 3})]))], "merged"),
    ("same keys in the same order, a plain dict over a state dict is served as is",
     [sd(["a", "b"], 1, OD([("", {"version": 1})])), {"a": (2, "a"), "b": (2, "b")}], "newest"),
]
failures = 0
for name, versions, expect_kind in cases:
    paths = []
    for i, obj in enumerate(reversed(versions)):  # newest first for the tool
        p = f"{tmp}/v{i}.pkl"
        with open(p, "wb") as f:
            pickle.dump(obj, f, protocol=2)
        paths.append(p)
    out = f"{tmp}/out.pkl"
    r = subprocess.run([tool, out] + paths, capture_output=True, text=True)
    if r.returncode:
        print(f"FAIL {name}: tool exited {r.returncode}: {r.stderr}")
        failures += 1
        continue
    expect = versions[0]
    for v in versions[1:]:
        expect = ref_merge(expect, v)
    got = pickle.load(open(out, "rb"))
    ok = type(got) is type(expect) and got == expect and list(got.keys()) == list(expect.keys()) and r.stdout.strip() == expect_kind
    if ok and hasattr(expect, "_metadata"):
        ok = getattr(got, "_metadata", None) == expect._metadata
    if ok and isinstance(expect, dict):
        for k in expect:
            if isinstance(expect[k], dict) and list(got[k].keys()) != list(expect[k].keys()):
                ok = False
    print(("ok   " if ok else "FAIL ") + name)
    if not ok:
        print("   expected", expect, getattr(expect, "_metadata", ""), expect_kind)
        print("   got     ", got, getattr(got, "_metadata", ""), r.stdout.strip())
        failures += 1
sys.exit(1 if failures else 0)
PY
