#!/bin/sh
# The packed store's compression study on a real training run.
#
#   bench/compress.sh [WORKDIR]
#
# Trains the small GPT of bench/train_gpt.py with torch 1.13 on CPU (a few
# minutes on 2 cores; skipped when WORKDIR already holds its checkpoints),
# then runs bench/pack_ratio over each series and prints, per scenario, the
# physical/logical ratio of the packed store next to its target,
# the effect of the anchor interval K, decode speeds of an anchor and of a
# chain of K deltas, and compaction throughput.  Build first (`make`).
# Environment: TORCH_PYTHON (default /usr/bin/python3), CKPT_BUILDDIR.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
build=${CKPT_BUILDDIR:-$src}
py=${TORCH_PYTHON:-/usr/bin/python3}
ratio=$build/bench/pack_ratio
[ -x "$ratio" ] || { echo "compress.sh: $ratio not built (run make)" >&2; exit 1; }
work=${1:-${TMPDIR:-/tmp}/ckpt-compress-study}
mkdir -p "$work"

if [ ! -d "$work/frozen" ]; then
	echo "training (bench/train_gpt.py) into $work ..."
	"$py" "$src/bench/train_gpt.py" "$work" >"$work/train.log"
fi

# field LINE KEY: the value of KEY=... in a pack_ratio line
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# check VALUE TARGET: "ok" when VALUE >= TARGET
check() { awk -v v="$1" -v t="$2" 'BEGIN { print (v + 0 >= t + 0) ? "ok" : "MISSED" }'; }
mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1e6 }'; }

# row SCENARIO LINE VERDICT: sizes, ratio and its factors (dedup x chunks
# compressed alone x what deltas add), then the verdict text
row() {
	printf '%-34s %9s %9s %7s  dedup %6s  alone %5s  delta %5s  %s\n' "$1" \
		"$(mb "$(field "$2" logical)")" "$(mb "$(field "$2" physical)")" "$(field "$2" ratio)" \
		"$(field "$2" dedup)" "$(field "$2" compress)" "$(field "$2" delta)" "$3"
}
# target LINE MIN: "target >= MIN ok|MISSED"
target() { echo "target >= $2 $(check "$(field "$1" ratio)" "$2")"; }

full=$("$ratio" "$work/full")
exhaustive=$("$ratio" --exhaustive 1 "$work/full")
plain=$("$ratio" --codecs planes,xor --exhaustive 1 "$work/full")
# The fine-tune resumed from the last full save, which the store holds already.
base=$(ls -d "$work"/full/*/ | tail -n 1)
frozen=$("$ratio" --base "$base" "$work/frozen")
bf16=$("$ratio" "$work/bf16")
tailor=$("$ratio" "$work/tailor")

echo
echo "== packed store: physical/logical on a real training run (MB = 10^6 bytes)"
printf '%-34s %9s %9s %7s\n' scenario logical physical ratio
row "full saves (fp32 + Adam)" "$full" "$(target "$full" 1.25)"
row "  same, every candidate compressed" "$exhaustive" "(codec by estimate: $(field "$full" encode_mbps) MB/s, all tried: $(field "$exhaustive" encode_mbps) MB/s)"
row "  same, XOR + planes + zstd-1 only" "$plain" "(baseline: 1.26x)"
row "frozen fine-tune (top 2 blocks)" "$frozen" "$(target "$frozen" 3)"
row "bf16 model file" "$bf16" "$(target "$bf16" 2)"

# LLMTailor: the policy alone saves logical(full) / logical(tailor); the
# packed store must add 1.3x on top of that.
lf=$(field "$full" logical)
lt=$(field "$tailor" logical)
pt=$(field "$tailor" physical)
policy=$(awk -v a="$lf" -v b="$lt" 'BEGIN { printf "%.3f", a / b }')
packed=$(awk -v a="$lf" -v b="$pt" 'BEGIN { printf "%.3f", a / b }')
want=$(awk -v p="$policy" 'BEGIN { printf "%.3f", p * 1.3 }')
printf '%-34s %9s %9s %7s  policy alone %s  target >= %-6s %s\n' "LLMTailor policy on full saves" \
	"$(mb "$lf")" "$(mb "$pt")" "$packed" "$policy" "$want" "$(check "$packed" "$want")"

echo
echo "== codecs chosen for the full saves (chunks/ratio of their bytes)"
for c in raw planes xor sub; do printf '%s=%s  ' "$c" "$(field "$full" "$c")"; done
echo

echo
echo "== anchor interval K on the full saves (every K-th version of a tensor stored without a reference)"
printf '%-4s %7s\n' K ratio
for k in 1 2 4 8 16; do
	line=$("$ratio" --anchor "$k" "$work/full")
	printf '%-4s %7s\n' "$k" "$(field "$line" ratio)"
done

echo
echo "== decode speed, one thread (MB/s of rebuilt bytes): anchor alone and anchor + K deltas"
printf '%-4s %12s %12s\n' K anchor chain
for k in 1 2 4 8 16; do
	line=$("$ratio" --decode "$k" "$work/full")
	printf '%-4s %12s %12s\n' "$k" "$(field "$line" anchor_mbps)" "$(field "$line" chain_mbps)"
done

echo
echo "== byte planes, one thread (MB/s)"
"$ratio" --planes | while read -r line; do
	printf '%s-byte elements: split %s  join %s\n' "$(field "$line" elem)" \
		"$(field "$line" split_mbps)" "$(field "$line" join_mbps)"
done

echo
echo "== compaction throughput (hash + encode, one thread, MB/s of logical tensor bytes)"
printf 'full %s  frozen %s  bf16 %s   target >= 300\n' "$(field "$full" encode_mbps)" \
	"$(field "$frozen" encode_mbps)" "$(field "$bf16" encode_mbps)"
