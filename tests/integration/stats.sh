#!/bin/sh
# ckptctl stats on a real torch 1.13 run of four blocks (float32, bfloat16,
# float16 and float64 tensors each):
#   checkpoint-10  full save
#   checkpoint-20  full save; blocks 0-1 frozen (identical tensors, new
#                  file), blocks 2-3 changed by known amounts (block 3 only
#                  in part of its big tensor)
#   checkpoint-30  partial save of the odd blocks, changed again
# --json must report relative L2 == 0 and identical-chunk fraction 1.0 for
# frozen layers, the relative L2 numpy computes from the same tensors for
# changed ones (1e-5 relative), the identical-chunk fraction that comparing
# the tensors' bytes chunk by chunk gives, and for checkpoint-30 partial-save
# bytes equal to the even blocks' tensor bytes.  The text output names the
# same layers.  Packed, with the raw files of the older checkpoints gone,
# the per-layer numbers, read from the packs, stay the same.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_torch
"$TORCH_PYTHON" -c 'import numpy' 2>/dev/null || skip "$TORCH_PYTHON cannot import numpy"
tmp=$(ck_tmpdir)
store="$tmp/store"

cat >"$tmp/stats_check.py" <<'PY'
import json, os, sys
import numpy as np
import torch

BLOCKS = 4
FILE = "pytorch_model.bin"

def block(i, gen):
    p = "model.layers.%d." % i
    return {
        p + "mlp.up_proj.weight": torch.randn(96, 160, generator=gen),
        p + "self_attn.q_proj.weight": torch.randn(64, 64, generator=gen).to(torch.bfloat16),
        p + "input_layernorm.weight": (1 + 0.1 * torch.randn(64, generator=gen)).to(torch.float16),
        p + "self_attn.rotary_emb.inv_freq": torch.rand(32, generator=gen, dtype=torch.float64),
    }

def changed(t, scale, gen, rows=None):
    """t plus scale * noise (on the first rows only, when given)."""
    noise = scale * torch.randn(t.shape, generator=gen, dtype=torch.float32)
    if rows is not None:
        noise[rows:] = 0
    return (t.float() + noise).to(t.dtype) if t.dtype != torch.float64 else t + noise.double()

def save(run, step, sd):
    d = os.path.join(run, "checkpoint-%d" % step)
    os.makedirs(d)
    torch.save(sd, os.path.join(d, FILE))
    with open(os.path.join(d, "config.json"), "w") as f:
        f.write('{"step": %d}\n' % step)

def make(run):
    gen = torch.Generator().manual_seed(1234)
    s10 = {}
    for i in range(BLOCKS):
        s10.update(block(i, gen))
    s20 = {}
    for name, t in s10.items():
        b = int(name.split(".")[2])
        if b < 2:
            s20[name] = t.clone()          # frozen: same values, new file
        elif b == 2:
            s20[name] = changed(t, 0.01, gen)
        else:
            s20[name] = changed(t, 0.3, gen, rows=8 if t.dim() == 2 and t.shape[0] == 96 else None)
    s30 = {n: changed(t, 0.05, gen) for n, t in s20.items() if int(n.split(".")[2]) % 2 == 1}
    save(run, 10, s10)
    save(run, 20, s20)
    save(run, 30, s30)

def load(run, step):
    return torch.load(os.path.join(run, "checkpoint-%d" % step, FILE))

def composite(run, step):
    """What a resume loads: newest-wins by tensor name back through the run."""
    out = {}
    for s in (10, 20, 30):
        if s <= step:
            out.update(load(run, s))
    return out

def layer_of(name):
    return "layers." + name.split(".")[2]

def as64(t):
    return t.float().numpy().astype(np.float64) if t.dtype != torch.float64 else t.numpy()

def raw(t):
    return t.contiguous().view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""

def expected(run, prev_step, step, chunk):
    prev, cur = composite(run, prev_step), composite(run, step)
    out = {}
    for layer in sorted({layer_of(n) for n in cur}):
        names = [n for n in cur if layer_of(n) == layer]
        d = np.concatenate([as64(cur[n]).ravel() - as64(prev[n]).ravel() for n in names])
        p = np.concatenate([as64(prev[n]).ravel() for n in names])
        same = chunks = 0
        for n in names:
            a, b = raw(prev[n]), raw(cur[n])
            for o in range(0, len(b), chunk):
                chunks += 1
                same += a[o:o + chunk] == b[o:o + chunk]
        out[layer] = (np.linalg.norm(d) / np.linalg.norm(p), same / chunks)
    return out

def expect(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)

def check(run, report_path, chunk, packed=False):
    with open(report_path) as f:
        r = json.load(f)
    expect(r["chunk_size"] == chunk, "chunk_size %r" % r["chunk_size"])
    series = [s for s in r["series"] if s["name"] == "run"]
    expect(len(series) == 1, "series run missing: %r" % [s["name"] for s in r["series"]])
    cks = {c["name"]: c for c in series[0]["checkpoints"]}
    expect(sorted(cks) == ["checkpoint-10", "checkpoint-20", "checkpoint-30"], "checkpoints %r" % sorted(cks))
    for c in cks.values():
        for k in ("dedup_bytes", "delta_bytes", "compression_saved_bytes"):
            expect(packed or c[k] == 0, "%s %s = %r before packs exist" % (c["name"], k, c[k]))
    if packed:
        expect(cks["checkpoint-10"]["compression_saved_bytes"] > 0, "checkpoint-10 packed saved nothing")
    # Physical: the files each checkpoint holds; logical: what its composite serves.
    for step in () if packed else (10, 20, 30):
        d = os.path.join(run, "checkpoint-%d" % step)
        size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        c = cks["checkpoint-%d" % step]
        expect(c["physical_bytes"] == size, "checkpoint-%d physical %d != %d" % (step, c["physical_bytes"], size))
        tb = sum(t.numel() * t.element_size() for t in composite(run, step).values())
        expect(c["tensor_bytes"] == tb, "checkpoint-%d tensor bytes %d != %d" % (step, c["tensor_bytes"], tb))
        expect(c["logical_bytes"] > tb, "checkpoint-%d logical %d <= tensor bytes" % (step, c["logical_bytes"]))
    for step in (10, 20):
        c = cks["checkpoint-%d" % step]
        expect(packed or c["logical_bytes"] == c["physical_bytes"], "full save checkpoint-%d: logical != physical" % step)
        expect(c["partial_save_bytes"] == 0, "full save checkpoint-%d has partial bytes" % step)
    even = sum(t.numel() * t.element_size() for n, t in load(run, 20).items() if int(n.split(".")[2]) % 2 == 0)
    got = cks["checkpoint-30"]["partial_save_bytes"]
    expect(got == even, "checkpoint-30 partial-save bytes %d != even blocks' %d" % (got, even))
    tot = series[0]["totals"]
    for k in ("logical_bytes", "physical_bytes", "partial_save_bytes", "tensor_bytes"):
        expect(tot[k] == sum(c[k] for c in cks.values()), "series total %s" % k)
    expect(cks["checkpoint-10"]["previous"] is None and cks["checkpoint-10"]["layers"] == [], "first checkpoint")
    for prev, step in ((10, 20), (20, 30)):
        c = cks["checkpoint-%d" % step]
        expect(c["previous"] == "checkpoint-%d" % prev, "previous of checkpoint-%d" % step)
        layers = {l["layer"]: l for l in c["layers"]}
        want = expected(run, prev, step, chunk)
        expect(sorted(layers) == sorted(want), "layers %r, want %r" % (sorted(layers), sorted(want)))
        for name, (rel, frac) in want.items():
            l = layers[name]
            expect(l["tensors"] == 4 and l["measured_tensors"] == 4 and l["new_tensors"] == 0,
                   "%d %s counts: %r" % (step, name, l))
            b = int(name.split(".")[1])
            frozen = (step == 20 and b < 2) or (step == 30 and b % 2 == 0)
            if frozen:
                expect(l["relative_l2"] == 0 and l["identical_fraction"] == 1.0,
                       "frozen %d %s: %r" % (step, name, l))
            else:
                expect(rel > 0 and l["relative_l2"] is not None and abs(l["relative_l2"] - rel) <= 1e-5 * rel,
                       "%d %s relative L2 %r, numpy %r" % (step, name, l["relative_l2"], rel))
            expect(abs(l["identical_fraction"] - frac) < 1e-12,
                   "%d %s identical fraction %r, want %r" % (step, name, l["identical_fraction"], frac))
    # The partly changed block 3 must have been seen chunk by chunk.
    f3 = {l["layer"]: l for l in cks["checkpoint-20"]["layers"]}["layers.3"]["identical_fraction"]
    if chunk < 96 * 160 * 4:
        expect(0 < f3 < 1, "block 3 partly changed: fraction %r" % f3)
    print("stats --json (chunk %d) agrees with numpy" % chunk)

if sys.argv[1] == "make":
    make(sys.argv[2])
else:
    check(sys.argv[2], sys.argv[3], int(sys.argv[4]), len(sys.argv) > 5 and sys.argv[5] == "packed")
PY

py() { PYTHONDONTWRITEBYTECODE=1 "$TORCH_PYTHON" "$tmp/stats_check.py" "$@"; }

py make "$tmp/run"
"$CKPTCTL" init "$store" >/dev/null
ck_import "$store" "$tmp/run" 0

"$CKPTCTL" stats "$store" --json >"$tmp/all.json" || fail "stats --json exited $?"
py check "$tmp/run" "$tmp/all.json" 1048576
"$CKPTCTL" stats "$store" run --json --chunk-size 4096 >"$tmp/small.json" || fail "stats --chunk-size 4096 exited $?"
py check "$tmp/run" "$tmp/small.json" 4096

"$CKPTCTL" stats "$store" run >"$tmp/text" || fail "stats (text) exited $?"
cat "$tmp/text"
grep -q "checkpoint-30 vs checkpoint-20" "$tmp/text" || fail "text output lacks the 30 vs 20 table"
for l in 0 1 2 3; do
	grep -q "layers\.$l " "$tmp/text" || fail "text output lacks layers.$l"
done

# Packed, with the raw files of all but the newest checkpoint gone (as
# `compact --keep-raw 1` drops those the store owns; these were imported
# in place, so they are moved away here, and the numpy side reads them
# there): the tensors are decoded from the packs, and every number about
# them stays.
"$CKPTCTL" compact "$store" -q || fail "compact exited $?"
mkdir "$tmp/orig"
cp -r "$tmp/run/checkpoint-30" "$tmp/orig/"
mv "$tmp/run/checkpoint-10" "$tmp/run/checkpoint-20" "$tmp/orig/"
"$CKPTCTL" stats "$store" run --json --chunk-size 4096 >"$tmp/packed.json" || fail "stats of the packed store exited $?"
py check "$tmp/orig" "$tmp/packed.json" 4096 packed

rc=0
"$CKPTCTL" stats "$store" nosuch 2>/dev/null || rc=$?
[ "$rc" = 1 ] || fail "stats of a missing series exited $rc, expected 1"
rc=0
"$CKPTCTL" stats "$store" --chunk-size 1001 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "--chunk-size 1001 exited $rc, expected 64"
rc=0
"$CKPTCTL" stats "$store" run/checkpoint-10 2>/dev/null || rc=$?
[ "$rc" = 64 ] || fail "stats of a checkpoint exited $rc, expected 64"
echo "PASS"
