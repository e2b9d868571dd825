#!/bin/sh
# Staged commits with torch 1.13 and a read-only mount (docs/format.md,
# "Staging, data and quarantine").  A full save (step 10) and a partial one
# (step 20) are written into STORE/staging and committed with ckptctl
# commit: they move to STORE/data and read back through the mount as the
# composite an offline merge gives.  In between, a dir with a truncated .pt,
# one with a hostile pickle and two incomplete DCP dirs are quarantined with
# a REASON naming the file, are not listed, and step 10 stays the newest;
# names without a step and committed names are refused, leaving the staged
# dir where it was.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
need_torch
tmp=$(ck_tmpdir)
store=$tmp/store
mnt=$tmp/mnt
stage=$store/staging/run

# commit WANT_RC ARGS...: ckptctl commit STORE ARGS, output in $tmp/commit.out/.err.
commit() {
	_c_want=$1
	shift
	_c_rc=0
	"$CKPTCTL" commit "$store" "$@" >"$tmp/commit.out" 2>"$tmp/commit.err" || _c_rc=$?
	sed 's/^/  commit: /' "$tmp/commit.out" "$tmp/commit.err"
	[ "$_c_rc" = "$_c_want" ] || fail "ckptctl commit $* exited $_c_rc, expected $_c_want"
	return 0
}

newest() {
	"$CKPTCTL" ls "$store" run --json |
		"$TORCH_PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["checkpoints"][-1]["name"])'
}

# quarantined SERIES DIR TEXT: DIR was quarantined (and only once), its REASON says TEXT.
quarantined() {
	[ ! -e "$store/staging/$1/$2" ] || fail "$1/$2 is still staged"
	set -- "$1" "$2" "$3" "$(echo "$store/quarantine/$1/$2".*)"
	[ -d "$4" ] || fail "no $store/quarantine/$1/$2.TIME"
	grep -q "$3" "$4/REASON" || fail "REASON of $1/$2 does not say '$3': $(cat "$4/REASON")"
	grep -q "${3#^}" "$tmp/commit.err" || fail "ckptctl commit did not say '$3'"
}

ck_py composite_check.py make "$tmp/run"
"$CKPTCTL" init "$store"
mkdir -p "$stage" "$store/staging/dcp"

# --- a full save, committed under another name -------------------------------
cp -r "$tmp/run/checkpoint-10" "$stage/tmp-checkpoint-10"
commit 0 run/tmp-checkpoint-10 checkpoint-10
[ -d "$store/data/run/checkpoint-10" ] || fail "checkpoint-10 not in data/"
[ ! -e "$stage/tmp-checkpoint-10" ] || fail "tmp-checkpoint-10 still staged"
[ -f "$store/manifests/run/checkpoint-10.manifest" ] || fail "no manifest for checkpoint-10"
diff -r "$tmp/run/checkpoint-10" "$store/data/run/checkpoint-10" || fail "checkpoint-10 changed on commit"
[ "$(newest)" = checkpoint-10 ] || fail "newest is $(newest)"

# --- torn checkpoints: quarantined, never listed -------------------------------
cp -r "$tmp/run/checkpoint-20" "$stage/checkpoint-20"
size=$(wc -c <"$stage/checkpoint-20/model.pt")
head -c $((size / 2)) "$tmp/run/checkpoint-20/model.pt" >"$stage/checkpoint-20/model.pt"
commit 3 run/checkpoint-20
quarantined run checkpoint-20 "^model.pt: "
[ "$(newest)" = checkpoint-10 ] || fail "after a torn save the newest is $(newest)"

sleep 1   # a second quarantine of checkpoint-20 gets its own time stamp (or a suffix)
cp -r "$tmp/run/checkpoint-20" "$stage/checkpoint-30"
ck_py commit_check.py hostile "$stage/checkpoint-30/extra.pt" "$tmp/hostile.ran"
commit 3 run/checkpoint-30
quarantined run checkpoint-30 "^extra.pt: .*dangerous global"
[ ! -e "$tmp/hostile.ran" ] || fail "the hostile pickle ran"
[ "$(newest)" = checkpoint-10 ] || fail "after a hostile save the newest is $(newest)"

mkdir "$store/staging/dcp/dcp_1" "$store/staging/dcp/dcp_2"
head -c 4096 /dev/urandom >"$store/staging/dcp/dcp_1/__0_0.distcp"
ck_py commit_check.py dcp_metadata "$store/staging/dcp/dcp_2/.metadata" __0_0.distcp
commit 3 dcp/dcp_1
quarantined dcp dcp_1 "^__0_0.distcp: DCP data file without a .metadata"
commit 3 dcp/dcp_2
quarantined dcp dcp_2 "^.metadata: 'w' is stored in __0_0.distcp, which is not there"
"$CKPTCTL" ls "$store" dcp >/dev/null 2>&1 && fail "series dcp exists after only torn saves"

"$CKPTCTL" quarantine "$store" --json >"$tmp/q.json"
"$TORCH_PYTHON" - "$tmp/q.json" <<'PY' || fail "ckptctl quarantine --json: $(cat "$tmp/q.json")"
import json, sys
q = json.load(open(sys.argv[1]))
got = sorted((e["series"], e["name"].rsplit(".", 1)[0]) for e in q)
assert got == [("dcp", "dcp_1"), ("dcp", "dcp_2"), ("run", "checkpoint-20"), ("run", "checkpoint-30")], got
assert all(e["reasons"] and ": " in e["reasons"][0] for e in q), q
PY
[ "$("$CKPTCTL" quarantine "$store" | grep -c '^[a-z]*/')" = 4 ] || fail "ckptctl quarantine lists $("$CKPTCTL" quarantine "$store")"

# --- refusals leave the staged dir alone ------------------------------------------
cp -r "$tmp/run/checkpoint-20" "$stage/latest"
commit 1 run/latest
grep -q "no step number" "$tmp/commit.err" || fail "a name without a step: $(cat "$tmp/commit.err")"
commit 1 run/latest checkpoint-10
grep -q "already committed" "$tmp/commit.err" || fail "replacing checkpoint-10: $(cat "$tmp/commit.err")"
commit 1 run/nothing-here checkpoint-40
diff -r "$tmp/run/checkpoint-20" "$stage/latest" || fail "a refused commit changed the staged dir"
commit 0 run/latest checkpoint-20
[ "$(newest)" = checkpoint-20 ] || fail "newest is $(newest) after committing checkpoint-20"

# --- the committed series reads back as the composite ------------------------------
ck_mount "$store" "$mnt" -o ro
ck_py composite_check.py verify "$tmp/run" "$mnt/run" "$tmp/work" || fail "composite through the mount"
ck_umount "$mnt"
