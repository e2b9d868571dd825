#!/bin/sh
# ckptctl on checkpoints written by the real torch 1.13: a run directory
# with a full save at step 10 and a partial one at step 20 (only block 1
# and the final norm in model.pt), safetensors written by a tiny pure-Python
# writer, an AdamW state, trainer_state.json, and files that must be refused
# (legacy torch.save, a truncated .pt, a pickle that calls os.system).
# Checks the exit status and report of import, `ls --json` and
# `show --json` against what torch itself says the files hold, and that
# `verify` notices a file changed after import.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_torch
tmp=$(ck_tmpdir)

cat >"$tmp/make_run.py" <<'EOF'
import collections, json, os, struct, sys
import torch

run = sys.argv[1]
torch.manual_seed(0)


def model_state():
    sd = collections.OrderedDict()
    sd["model.embed_tokens.weight"] = torch.randn(16, 8)
    for i in range(2):
        sd["model.layers.%d.self_attn.q_proj.weight" % i] = torch.randn(8, 8)
        sd["model.layers.%d.mlp.up_proj.weight" % i] = torch.randn(12, 8).to(torch.bfloat16)
        sd["model.layers.%d.input_layernorm.weight" % i] = torch.ones(8)
    sd["model.norm.weight"] = torch.ones(8)
    sd["lm_head.weight"] = torch.randn(16, 8)
    sd["model.rotary_emb.inv_freq"] = torch.arange(4, dtype=torch.int64)
    return sd


ST_DTYPES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64"}


def save_safetensors(sd, path):
    """The safetensors layout, written by hand: u64 header size, JSON, data."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in sd.items():
        t = t.contiguous()
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def optimizer_state(sd):
    params = [torch.nn.Parameter(t.detach().clone().float()) for t in sd.values() if t.is_floating_point()]
    opt = torch.optim.AdamW(params, lr=1e-3)
    for p in params:
        p.grad = torch.ones_like(p)
    opt.step()
    return opt.state_dict()


class Pwned:
    def __reduce__(self):      # pickled as a call of os.system; never run by ckptfs
        return (os.system, ("echo pwned",))


def trainer_state(step):
    return {"global_step": step, "epoch": step / 10.0, "log_history": []}


full = model_state()
os.makedirs(os.path.join(run, "checkpoint-10"))
os.makedirs(os.path.join(run, "checkpoint-20"))
os.makedirs(os.path.join(run, "runs"))
for step in (10, 20):
    d = os.path.join(run, "checkpoint-%d" % step)
    sd = full if step == 10 else collections.OrderedDict(
        (k, v + 1 if v.is_floating_point() else v) for k, v in full.items()
        if k.startswith("model.layers.1.") or k == "model.norm.weight")
    torch.save(sd, os.path.join(d, "model.pt"))
    torch.save(optimizer_state(full), os.path.join(d, "optimizer.pt"))
    save_safetensors(full, os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "trainer_state.json"), "w") as f:
        json.dump(trainer_state(step), f, indent=2, sort_keys=True)
torch.save({"w": torch.ones(2)}, os.path.join(run, "checkpoint-10", "legacy.pt"),
           _use_new_zipfile_serialization=False)
with open(os.path.join(run, "checkpoint-10", "model.pt"), "rb") as f:
    whole = f.read()
with open(os.path.join(run, "checkpoint-20", "truncated.pt"), "wb") as f:
    f.write(whole[: len(whole) // 2])
torch.save({"payload": Pwned()}, os.path.join(run, "checkpoint-20", "evil.pt"))
with open(os.path.join(run, "runs", "events.out.tfevents"), "w") as f:
    f.write("not a checkpoint\n")
EOF

cat >"$tmp/check.py" <<'EOF'
import json, os, sys
import torch

tmp, what = sys.argv[1], sys.argv[2]
run = os.path.join(tmp, "run1")


def load(name):
    with open(os.path.join(tmp, name)) as f:
        return json.load(f)


def expect(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def layer_of(name):
    if ".layers." in name:
        return "layers." + name.split(".layers.")[1].split(".")[0]
    if "embed_tokens" in name:
        return "embed"
    if name.startswith("lm_head."):
        return "head"
    if name == "model.norm.weight":
        return "norm"
    if name.startswith("state.") or name.startswith("param_groups."):
        return "optimizer"
    return "other"


def tensors(obj, prefix=""):
    """{dotted path: tensor} as ckptfs names them."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(tensors(v, prefix + str(k) + "."))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(tensors(v, prefix + str(i) + "."))
    elif isinstance(obj, torch.Tensor):
        out[prefix[:-1]] = obj
    return out


def check_show(doc, want, steps):
    got = {t["name"]: t for t in doc["tensors"]}
    expect(set(got) == set(want), "tensors %s, expected %s" % (sorted(got), sorted(want)))
    for name, t in want.items():
        g = got[name]
        expect(g["dtype"] == str(t.dtype).replace("torch.", ""), "%s: dtype %s" % (name, g["dtype"]))
        expect(g["shape"] == list(t.shape), "%s: shape %s" % (name, g["shape"]))
        expect(g["layer"] == layer_of(name), "%s: layer %s" % (name, g["layer"]))
        expect(g["src_step"] == steps(name), "%s: from step %s" % (name, g["src_step"]))
        nbytes = t.numel() * t.element_size()
        expect(g["nbytes"] >= nbytes, "%s: %d bytes" % (name, g["nbytes"]))
        with open(g["src_path"], "rb") as f:      # the bytes are where show says
            f.seek(g["src_offset"])
            raw = f.read(nbytes)
        mine = (t.contiguous().view(torch.int16) if t.dtype == torch.bfloat16 else t.contiguous())
        expect(raw == mine.numpy().tobytes(), "%s: bytes at %s+%d differ" % (name, g["src_path"], g["src_offset"]))


if what == "ls":
    series = load("ls.json")["series"]
    expect(series == [{"name": "run1", "checkpoints": 2, "first_step": 10, "last_step": 20}],
           "ls STORE: %s" % series)
    ck = {c["name"]: c for c in load("ls-run1.json")["checkpoints"]}
    expect(list(ck) == ["checkpoint-10", "checkpoint-20"], "ls run1: %s" % list(ck))
    expect(ck["checkpoint-10"]["step"] == 10 and ck["checkpoint-10"]["status"] == "complete",
           "checkpoint-10: %s" % ck["checkpoint-10"])
    expect(ck["checkpoint-20"]["status"] == "partial", "checkpoint-20 not partial: %s" % ck["checkpoint-20"])
    expect(ck["checkpoint-10"]["bad"] == 1 and ck["checkpoint-20"]["bad"] == 2, "bad counts: %s" % ck)
    files = {f["path"]: f for f in load("ls-ck10.json")["files"]}
    ck10 = os.path.join(run, "checkpoint-10")
    expect(sorted(files) == sorted(os.listdir(ck10)), "files of checkpoint-10: %s" % sorted(files))
    for name, kind in (("model.pt", "torch"), ("optimizer.pt", "torch"), ("model.safetensors", "safetensors"),
                       ("trainer_state.json", "other"), ("legacy.pt", "bad")):
        expect(files[name]["kind"] == kind, "%s: kind %s" % (name, files[name]["kind"]))
        expect(files[name]["size"] == os.path.getsize(os.path.join(ck10, name)), "%s: size" % name)
    expect(files["model.pt"]["tensors"] == len(torch.load(os.path.join(ck10, "model.pt"))), "model.pt tensors")
    expect(files["optimizer.pt"]["tensors"] == len(tensors(torch.load(os.path.join(ck10, "optimizer.pt")))),
           "optimizer.pt tensors")
    expect("legacy (pre-1.6)" in files["legacy.pt"]["error"], "legacy.pt: %s" % files["legacy.pt"])
    print("ls: series, checkpoints (complete, partial) and files as expected")
elif what == "show":
    full = torch.load(os.path.join(run, "checkpoint-10", "model.pt"))
    part = torch.load(os.path.join(run, "checkpoint-20", "model.pt"))
    want = dict(full)
    want.update(part)
    check_show(load("show-model.json"), want, lambda n: 20 if n in part else 10)
    check_show(load("show-st.json"), dict(full), lambda n: 10)
    opt = tensors(torch.load(os.path.join(run, "checkpoint-20", "optimizer.pt")))
    check_show(load("show-opt.json"), opt, lambda n: 20)
    print("show: %d + %d + %d tensors with dtype, shape, layer, step and bytes as torch has them"
          % (len(want), len(full), len(opt)))
EOF

"$TORCH_PYTHON" -B "$tmp/make_run.py" "$tmp/run1" || fail "torch could not write the run"
"$CKPTCTL" init "$tmp/store" || fail "init exited $?"
rc=0
"$CKPTCTL" import "$tmp/store" "$tmp/run1" >"$tmp/import.out" 2>"$tmp/import.err" || rc=$?
cat "$tmp/import.out" "$tmp/import.err"
[ "$rc" = 2 ] || fail "import exited $rc, expected 2 (some files refused)"
grep -q "checkpoint-10/legacy.pt: legacy (pre-1.6) torch.save format not supported" "$tmp/import.err" ||
	fail "legacy.pt not refused with its reason"
grep -q "checkpoint-20/truncated.pt: " "$tmp/import.err" || fail "truncated.pt not refused"
grep -q "checkpoint-20/evil.pt: .*dangerous global .*system" "$tmp/import.err" || fail "evil.pt not refused"
[ "$(grep -c refused "$tmp/import.err")" = 3 ] || fail "expected exactly 3 refused files"
grep -q "^imported 2 checkpoints: 8 files indexed, 3 refused, 1 skipped" "$tmp/import.out" ||
	fail "unexpected summary: $(cat "$tmp/import.out")"

"$CKPTCTL" ls "$tmp/store" || fail "ls exited $?"
"$CKPTCTL" ls "$tmp/store" run1 || fail "ls run1 exited $?"
"$CKPTCTL" ls "$tmp/store" run1/checkpoint-20 || fail "ls run1/checkpoint-20 exited $?"
"$CKPTCTL" ls "$tmp/store" --json >"$tmp/ls.json" || fail "ls --json exited $?"
"$CKPTCTL" ls "$tmp/store" run1 --json >"$tmp/ls-run1.json" || fail "ls run1 --json exited $?"
"$CKPTCTL" ls --json "$tmp/store" run1/checkpoint-10 >"$tmp/ls-ck10.json" || fail "ls ck10 --json exited $?"
"$TORCH_PYTHON" -B "$tmp/check.py" "$tmp" ls || fail "ls output"
if "$CKPTCTL" ls "$tmp/store" nosuch 2>/dev/null; then fail "ls of a missing series succeeded"; fi

"$CKPTCTL" show "$tmp/store" run1/checkpoint-20 model.pt || fail "show exited $?"
"$CKPTCTL" show "$tmp/store" run1/checkpoint-20 model.pt --json >"$tmp/show-model.json" || fail "show model.pt"
"$CKPTCTL" show "$tmp/store" run1/checkpoint-10 model.safetensors --json >"$tmp/show-st.json" || fail "show st"
"$CKPTCTL" show "$tmp/store" run1/checkpoint-20 optimizer.pt --json >"$tmp/show-opt.json" || fail "show opt"
"$TORCH_PYTHON" -B "$tmp/check.py" "$tmp" show || fail "show output"

"$CKPTCTL" verify "$tmp/store" || fail "verify of an untouched store exited $?"
printf 'x' >>"$tmp/run1/checkpoint-10/model.safetensors"
rc=0
"$CKPTCTL" verify "$tmp/store" >"$tmp/verify.out" 2>&1 || rc=$?
cat "$tmp/verify.out"
[ "$rc" = 3 ] || fail "verify after a change exited $rc, expected 3 (damage found)"
grep -q "checkpoint-10/model.safetensors: changed since import" "$tmp/verify.out" ||
	fail "verify did not name the changed file"
[ "$(grep -c CHANGED "$tmp/verify.out")" = 1 ] || fail "verify named more than the changed file"
echo "ok"
