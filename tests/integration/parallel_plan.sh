#!/bin/sh
# examples/parallel_plan.py: the paper's recovery layout for the GPUs left,
# worked out by hand from its rule (TP as large as divides the attention
# heads and the GPUs, then PP as large as divides what is left, DP the rest),
# with the optional --layers and --max-tp limits.
. "$CKPT_SRCDIR/tests/integration/lib.sh"
PY=python3
command -v $PY >/dev/null 2>&1 || PY=$TORCH_PYTHON
plan() { PYTHONDONTWRITEBYTECODE=1 $PY "$CKPT_SRCDIR/examples/parallel_plan.py" "$@"; }
expect() {
	want=$1
	shift
	got=$(plan "$@") || fail "parallel_plan.py $* failed"
	[ "$got" = "$want" ] || fail "parallel_plan.py $*: $got, expected $want"
	echo "$*: $got"
}
expect "TP=4 PP=1 DP=1" --gpus 4 --heads 32
expect "TP=1 PP=3 DP=1" --gpus 3 --heads 32
expect "TP=2 PP=3 DP=1" --gpus 6 --heads 32
expect "TP=2 PP=1 DP=3" --gpus 6 --heads 32 --layers 4
expect "TP=4 PP=2 DP=1" --gpus 8 --heads 12 --layers 2
expect "TP=4 PP=1 DP=2" --gpus 8 --heads 12 --layers 3
expect "TP=4 PP=2 DP=1" --gpus 8 --heads 32 --max-tp 4
expect "TP=1 PP=7 DP=1" --gpus 7 --heads 32
expect "TP=1 PP=1 DP=7" --gpus 7 --heads 32 --layers 24
expect "TP=1 PP=1 DP=1" --gpus 1 --heads 5
expect '{"gpus": 6, "tp": 2, "pp": 3, "dp": 1}' --gpus 6 --heads 32 --json
expect "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 3" --gpus 6 --heads 32 --megatron
plan --gpus 0 --heads 32 2>/dev/null && fail "0 GPUs accepted"
echo PASS
