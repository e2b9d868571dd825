#!/bin/sh
# -o health=nvml through a real writable mount, driven by the fake NVML
# (tests/nvml/libnvidia-ml.so.1 on LD_LIBRARY_PATH) replaying a trace the
# test appends to while the daemon runs:
#  - MNT/.ckptfs/health.json: found by lookup, not listed; metrics,
#    factors, score and sample time of the fake GPU;
#  - a quiet GPU raises no flag; an XID error does, within one sampling
#    interval, in every series written through the mount (one with
#    committed checkpoints, one with none yet) and not in a series that was
#    only imported; the flag holds the reason (score 0.25, errors 1);
#  - the flag is read-only, and goes away as the emergency checkpoint
#    commits;
#  - the gap rule: right after that commit another XID raises nothing
#    (health.json says why), measured against the series' 1000 s save
#    interval, not against the emergency checkpoint;
#  - NVML failing mid-run is logged and survived; no NVML driver is one log
#    line and the mount works as before;
#  - ckptctl resume-info names the newest checkpoint the mount serves whole,
#    skipping one with a file changed behind the store's back.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
need_fuse
tmp=$(ck_tmpdir)
store=$tmp/store mnt=$tmp/mnt trace=$tmp/trace
LD_LIBRARY_PATH=$CKPT_BUILDDIR/tests/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CKPT_FAKE_NVML_TRACE=$trace
export LD_LIBRARY_PATH CKPT_FAKE_NVML_TRACE
[ -f "$CKPT_BUILDDIR/tests/nvml/libnvidia-ml.so.1" ] || fail "the fake NVML is not built (make check builds it)"
HEALTHY="name=FakeH100 temp=60 power=300 util=95 memutil=40 used=60000 total=81559"
PY=python3
command -v $PY >/dev/null 2>&1 || PY=$TORCH_PYTHON

# json FILE EXPR: prints EXPR (Python, over the document d) of the JSON file.
json() { $PY -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }
rounds() { json "$mnt/.ckptfs/health.json" 'd["rounds"]'; }
# wait_rounds N: until health.json has counted N more sampling rounds.
wait_rounds() {
	_wr_until=$(($(rounds) + $1)) _wr_i=0
	while [ "$(rounds)" -lt $_wr_until ]; do
		_wr_i=$((_wr_i + 1))
		[ $_wr_i -lt 200 ] || fail "health.json stopped counting rounds"
		sleep 0.1
	done
}
now_ns() { date +%s%N; }
save() { ck_save_small "$mnt" "$@"; }
# start_fg LOG OPTS: ckptfs in the foreground (its log in LOG), live.
start_fg() {
	_sf_log=$1
	shift
	mkdir -p "$mnt"
	ck_track "$mnt"
	"$CKPTFS" "$store" "$mnt" -f -o compact=0,health=nvml,health_interval=1 "$@" 2>"$_sf_log" &
	ck_until 10 test -e "$mnt/.ckptfs" || { cat "$_sf_log"; fail "ckptfs -f did not mount"; }
}

"$CKPTCTL" init "$store"
# A series imported before the mount and never written through it.
mkdir -p "$tmp/runs/idle/checkpoint-1"
echo '{}' >"$tmp/runs/idle/checkpoint-1/config.json"
ck_import "$store" "$tmp/runs/idle" 0
echo "gpu=0 $HEALTHY" >"$trace"
start_fg "$tmp/log1" -o risk_threshold=0.25

echo "== the control directory"
ls -a "$mnt" | grep -qx '.ckptfs' && fail ".ckptfs is listed in the root"
[ -d "$mnt/.ckptfs" ] || fail "no $mnt/.ckptfs"
ls "$mnt/.ckptfs" | grep -qx health.json || fail ".ckptfs does not list health.json"
wait_rounds 1
[ "$(json "$mnt/.ckptfs/health.json" 'd["state"], d["threshold"], d["gap"], d["window"]')" = "ok 0.25 0.25 60" ] ||
	fail "health.json: $(cat "$mnt/.ckptfs/health.json")"
[ "$(json "$mnt/.ckptfs/health.json" 'd["gpus"][0]["name"], d["gpus"][0]["metrics"]["temperature_c"], d["gpus"][0]["score"]')" = "FakeH100 60 0" ] ||
	fail "health.json GPU: $(cat "$mnt/.ckptfs/health.json")"
json "$mnt/.ckptfs/health.json" 'sorted(d["gpus"][0]["factors"])' | grep -q "temp_rise" || fail "no factors"
(echo x >"$mnt/.ckptfs/health.json") 2>/dev/null && fail "health.json is writable"
mkdir "$mnt/.ckptfs/x" 2>/dev/null && fail "mkdir in .ckptfs worked"
mkdir "$mnt/.ckptfs" 2>/dev/null && fail "mkdir .ckptfs worked"

echo "== a series with a 1000 s save interval, one with no checkpoint yet"
mkdir "$mnt/run" "$mnt/fresh"
save run 100 2000
save run 200 1000
mkdir "$mnt/fresh/checkpoint-5"    # in progress: the series has nothing committed
flag=trigger_checkpoint.flag

echo "== a quiet GPU raises nothing"
wait_rounds 3
for s in run fresh idle; do
	[ -e "$mnt/$s/$flag" ] && fail "a quiet GPU raised $s/$flag"
done

echo "== an XID error raises the flag within one interval"
t0=$(now_ns)
echo "gpu=0 xid=48" >>"$trace"
i=0
until [ -e "$mnt/run/$flag" ]; do
	i=$((i + 1))
	[ $i -lt 100 ] || fail "no flag 10 s after the XID"
	sleep 0.05
done
t1=$(now_ns)
cat "$mnt/run/$flag"
raised=$(json "$mnt/run/$flag" 'd["raised_ns"]')
# One interval (1 s) from the XID's arrival in the trace to the flag, and
# the flag seen within a few polls of being raised.
[ $((raised - t0)) -le 1300000000 ] || fail "flag raised $(((raised - t0) / 1000000)) ms after the XID"
[ $((t1 - raised)) -le 500000000 ] || fail "flag seen $(((t1 - raised) / 1000000)) ms after it was raised"
echo "flag raised $(((raised - t0) / 1000000)) ms after the XID reached the trace, seen $(((t1 - raised) / 1000000)) ms later"
[ "$(json "$mnt/run/$flag" 'd["score"], d["factors"]["errors"], d["gpu"], d["newest_step"], abs(d["interval_s"] - 1000) < 10')" = "0.25 1 0 200 True" ] ||
	fail "flag reason: $(cat "$mnt/run/$flag")"
[ -e "$mnt/fresh/$flag" ] || fail "no flag in a series with nothing committed"
[ -e "$mnt/idle/$flag" ] && fail "a series not written through the mount got the flag"
(echo x >"$mnt/run/$flag") 2>/dev/null && fail "the flag is writable"
rm "$mnt/run/$flag" 2>/dev/null && fail "rm of the flag worked"
[ -f "$mnt/run/$flag" ] || fail "the flag went by rm"

echo "== the emergency checkpoint commits: the flag goes"
save run 230 0
[ -e "$mnt/run/$flag" ] && fail "the flag stayed after run/checkpoint-230 committed"
[ -e "$mnt/fresh/$flag" ] || fail "a commit in run cleared fresh's flag"

echo "== the gap rule: another XID right after it raises nothing"
echo "gpu=0 xid=48" >>"$trace"
wait_rounds 2
[ -e "$mnt/run/$flag" ] && fail "a flag within the gap: $(cat "$mnt/run/$flag")"
json "$mnt/.ckptfs/health.json" '[s for s in d["series"] if s["name"] == "run"][0]' >"$tmp/run.series"
cat "$tmp/run.series"
grep -q "within the gap" "$tmp/run.series" || fail "health.json does not say the gap held the flag"
[ "$(json "$mnt/.ckptfs/health.json" '[abs(s["interval_s"] - 1000) < 10 for s in d["series"] if s["name"] == "run"][0]')" = True ] ||
	fail "the emergency checkpoint changed the save interval"

echo "== NVML failing mid-run"
echo "gpu=0 fail=1" >>"$trace"
echo "gpu=0 fail=1" >>"$trace"
echo "gpu=0 $HEALTHY" >>"$trace"
wait_rounds 4
grep -q "NVML failed" "$tmp/log1" || fail "no log line for the failure: $(cat "$tmp/log1")"
grep -q "NVML works again" "$tmp/log1" || fail "no log line for the recovery: $(cat "$tmp/log1")"
[ "$(json "$mnt/.ckptfs/health.json" 'd["state"]')" = ok ] || fail "state after recovery: $(cat "$mnt/.ckptfs/health.json")"
save run 300 0
ck_umount "$mnt"
wait
sed 's/^/  ckptfs: /' "$tmp/log1"

echo "== no NVML driver: one line, the mount works"
echo "init=fail" >"$trace"
start_fg "$tmp/log2"
wait_rounds 0
[ "$(json "$mnt/.ckptfs/health.json" 'd["state"]')" = unavailable ] || fail "state without NVML: $(cat "$mnt/.ckptfs/health.json")"
save run 400 0
[ "$(grep -c "GPU health" "$tmp/log2")" = 1 ] || fail "not one line about NVML: $(cat "$tmp/log2")"
grep "GPU health" "$tmp/log2"
ck_umount "$mnt"
wait

echo "== a read-only mount publishes health.json too"
echo "gpu=0 $HEALTHY" >"$trace"
ck_mount "$store" "$mnt" -o ro,health=nvml,health_interval=1
[ "$(json "$mnt/.ckptfs/health.json" 'd["state"], d["gpus"][0]["name"]')" = "ok FakeH100" ] ||
	fail "health.json of a read-only mount: $(cat "$mnt/.ckptfs/health.json")"
mkdir "$mnt/new" 2>/dev/null && fail "mkdir in a read-only mount"
ck_umount "$mnt"

echo "== resume-info: the newest checkpoint the mount serves whole"
"$CKPTCTL" resume-info "$store" run --mount "$mnt" --json >"$tmp/info.json" || fail "resume-info failed"
[ "$(json "$tmp/info.json" 'd["checkpoint"], d["step"], d["path"], [f["path"] for f in d["files"]], d["skipped"]')" = \
	"checkpoint-400 400 $mnt/run/checkpoint-400 ['config.json', 'trainer_state.json'] []" ] ||
	fail "resume-info: $(cat "$tmp/info.json")"
# A file changed behind the store's back: that checkpoint cannot be served.
echo '{"changed": true}' >"$store/data/run/checkpoint-400/config.json"
"$CKPTCTL" resume-info "$store" run --json >"$tmp/info.json" 2>"$tmp/info.err" || fail "resume-info failed"
cat "$tmp/info.err"
[ "$(json "$tmp/info.json" 'd["checkpoint"], d["path"], [s["checkpoint"] for s in d["skipped"]]')" = \
	"checkpoint-300 None ['checkpoint-400']" ] || fail "resume-info with a changed file: $(cat "$tmp/info.json")"
grep -q "checkpoint-400 cannot be served: config.json" "$tmp/info.err" || fail "resume-info did not say why"
rc=0
"$CKPTCTL" resume-info "$store" nosuch 2>/dev/null || rc=$?
[ $rc = 4 ] || fail "resume-info of a series that does not exist exited $rc, not 4"
echo "PASS"
