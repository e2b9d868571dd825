#!/bin/sh
# ckptctl verify --content: a byte flipped inside a tensor of an imported
# file, with its size and mtime kept (so its identity is unchanged), is
# found by re-hashing, named with its tensors, and every checkpoint whose
# composite serves that tensor is named as depending on it: checkpoint-20
# (a partial save of the odd blocks) serves its even blocks from
# checkpoint-10, so it depends on damage to an even-block tensor of
# checkpoint-10 and not on damage to an odd-block one.  --identity-only
# misses the flip but not a truncation; --json says the same as the text.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_torch
tmp=$(ck_tmpdir)
store="$tmp/store"
model10="$tmp/run/checkpoint-10/model.pt"

ck_py composite_check.py make "$tmp/run"
"$CKPTCTL" init "$store" >/dev/null
ck_import "$store" "$tmp/run" 0

cat >"$tmp/helper.py" <<'PY'
import json, os, sys
sys.path.insert(0, os.path.join(os.environ["CKPT_SRCDIR"], "tests", "py"))
from mountcheck import flip_byte as flip

def load(path):
    with open(path) as f:
        return json.load(f)

def pick(show10, show20):
    """An even-block tensor checkpoint-20 takes from checkpoint-10, and an
    odd-block one it has itself; offsets are those in checkpoint-10's file."""
    src20 = {t["name"]: t["src_ckpt"] for t in load(show20)["tensors"]}
    mine = {t["name"]: t for t in load(show10)["tensors"]}
    def first(block, ckpt):
        for name, t in mine.items():
            if ".layers.%d." % block in name and src20.get(name) == ckpt and t["nbytes"] > 0:
                return t
        sys.exit("no tensor of block %d served from %s" % (block, ckpt))
    for t in (first(0, "checkpoint-10"), first(1, "checkpoint-20")):
        print(t["name"], t["src_offset"] + t["nbytes"] // 2)


def expect(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)

def dependents(report, tensor):
    return sorted(d["checkpoint"] for d in report["dependents"]
                  if d["file"] == "model.pt" and any(t["name"] == tensor for t in d["tensors"]))

def check_clean(path):
    r = load(path)
    expect(r["mode"] == "content" and r["files"] == 13 and r["intact"] == 13, "clean report: %r" % r)
    expect(r["damaged"] == [] and r["dependents"] == [] and r["bad"] == [], "clean store reports damage")
    expect(r["bytes_hashed"] > 0, "nothing hashed")

def check_flip(path, tensor, want_deps):
    r = load(path)
    dmg = [d for d in r["damaged"] if d["reason"] == "hash mismatch"]
    expect(len(r["damaged"]) == 1 and len(dmg) == 1, "expected one hash mismatch: %r" % r["damaged"])
    d = dmg[0]
    expect(d["checkpoint"] == "run/checkpoint-10" and d["file"] == "model.pt", "damaged where: %r" % d)
    expect(not d["whole_file"] and d["storage"] is not None and d["length"] > 0, "damaged range: %r" % d)
    expect(d["physical"].endswith("/run/checkpoint-10/model.pt"), "physical file: %r" % d)
    expect(tensor in d["tensors"], "%s not named among %r" % (tensor, d["tensors"]))
    got = dependents(r, tensor)
    expect(got == want_deps, "dependents of %s: %r, expected %r" % (tensor, got, want_deps))
    expect(r["intact"] == r["files"] - 1, "only model.pt of checkpoint-10 is damaged")

def check_truncated(path):
    r = load(path)
    whole = [d for d in r["damaged"] if d["whole_file"]]
    expect(len(whole) == 1 and whole[0]["reason"] == "changed", "truncation not a changed file: %r" % whole)
    expect(whole[0]["checkpoint"] == "run/checkpoint-10" and whole[0]["file"] == "model.pt", "changed where")
    if r["mode"] == "content":
        short = [d for d in r["damaged"] if d["reason"] == "short read"]
        expect(short and all(d["tensors"] for d in short), "no short read with its tensors: %r" % r["damaged"])
    deps = {d["checkpoint"]: d for d in r["dependents"] if d["file"] == "model.pt"}
    expect(sorted(deps) == ["run/checkpoint-10", "run/checkpoint-20"], "dependents: %r" % sorted(deps))
    expect(all(d["unservable"] for d in deps.values()), "a composite needing a changed file is unservable")

cmd = sys.argv[1]
if cmd == "pick":
    pick(sys.argv[2], sys.argv[3])
elif cmd == "flip":
    flip(sys.argv[2], int(sys.argv[3]))
elif cmd == "clean":
    check_clean(sys.argv[2])
elif cmd == "flipped":
    check_flip(sys.argv[2], sys.argv[3], sys.argv[4:])
elif cmd == "truncated":
    check_truncated(sys.argv[2])
PY
helper() { "$TORCH_PYTHON" -B "$tmp/helper.py" "$@" || fail "helper $1"; }

# verify_rc WANT ARGS...: runs verify, output in $tmp/out (stdout) and $tmp/err.
verify_rc() {
	_want=$1
	shift
	_rc=0
	"$CKPTCTL" verify "$@" >"$tmp/out" 2>"$tmp/err" || _rc=$?
	sed 's/^/  verify: /' "$tmp/out" "$tmp/err"
	[ "$_rc" = "$_want" ] || fail "ckptctl verify $* exited $_rc, expected $_want"
	return 0
}

echo "--- clean store"
verify_rc 0 "$store"
grep -q "13 files checked (identity and content): 13 intact, 0 damaged" "$tmp/out" || fail "clean summary"
verify_rc 0 "$store" --identity-only
verify_rc 0 "$store" --json
helper clean "$tmp/out"

"$CKPTCTL" show "$store" run/checkpoint-10 model.pt --json >"$tmp/show10.json" || fail "show 10"
"$CKPTCTL" show "$store" run/checkpoint-20 model.pt --json >"$tmp/show20.json" || fail "show 20"
helper pick "$tmp/show10.json" "$tmp/show20.json" >"$tmp/picked"
read -r even even_at <"$tmp/picked"
odd=$(sed -n 2p "$tmp/picked" | cut -d' ' -f1)
odd_at=$(sed -n 2p "$tmp/picked" | cut -d' ' -f2)
echo "even-block tensor $even (byte $even_at), odd-block tensor $odd (byte $odd_at)"

echo "--- byte flipped in $even (taken by checkpoint-20 from checkpoint-10)"
helper flip "$model10" "$even_at"
verify_rc 0 "$store" --identity-only
verify_rc 3 "$store"
grep -q "^DAMAGED  run/checkpoint-10/model.pt: hash mismatch: bytes [0-9]*\.\.[0-9]* of $model10" "$tmp/out" ||
	fail "no DAMAGED line naming the file and byte range"
grep -q "^ *tensor $even\$" "$tmp/out" || fail "damaged tensor $even not named"
grep -q "^AFFECTED run/checkpoint-20/model.pt: " "$tmp/out" || fail "checkpoint-20 not named as affected"
grep -q "^AFFECTED run/checkpoint-10/model.pt: " "$tmp/out" || fail "checkpoint-10 not named as affected"
verify_rc 3 "$store" --json
helper flipped "$tmp/out" "$even" run/checkpoint-10 run/checkpoint-20
# Verifying checkpoint-20 also checks the earlier checkpoints it takes bytes from.
verify_rc 3 "$store" run/checkpoint-20 --json
helper flipped "$tmp/out" "$even" run/checkpoint-10 run/checkpoint-20
helper flip "$model10" "$even_at"
verify_rc 0 "$store"

echo "--- byte flipped in $odd (checkpoint-20 has its own)"
helper flip "$model10" "$odd_at"
verify_rc 3 "$store"
grep -q "^AFFECTED run/checkpoint-20/model.pt" "$tmp/out" && fail "checkpoint-20 named as affected by $odd"
verify_rc 3 "$store" --json
helper flipped "$tmp/out" "$odd" run/checkpoint-10
helper flip "$model10" "$odd_at"
verify_rc 0 "$store"

echo "--- checkpoint-10/model.pt truncated"
size=$(wc -c <"$model10")
cp -p "$model10" "$tmp/model10.orig"
truncate -s $((size / 2)) "$model10"
verify_rc 3 "$store"
grep -q "^CHANGED  run/checkpoint-10/model.pt: .*changed since import (size $size" "$tmp/out" ||
	fail "truncation not reported as a size change"
grep -q "^DAMAGED  run/checkpoint-10/model.pt: short read: " "$tmp/out" || fail "no short read reported"
grep -q "^AFFECTED run/checkpoint-20/model.pt: cannot be served" "$tmp/out" || fail "checkpoint-20 not affected"
verify_rc 3 "$store" --json
helper truncated "$tmp/out"
verify_rc 3 "$store" --identity-only --json
helper truncated "$tmp/out"

echo "--- usage"
verify_rc 64 "$store" --content --identity-only
verify_rc 1 "$store" run/checkpoint-99
echo "ok"
