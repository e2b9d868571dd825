#!/bin/sh
# Runs one fuzz target over its seed inputs for a bounded time.
#   run.sh TARGET SEED_PATH...
# FUZZ_SECONDS (default 15) bounds the mutation phase; with a libFuzzer
# build the same budget is passed as -max_total_time.
set -u
target=$1; shift
bin="${CKPT_BUILDDIR:-.}/tests/fuzz/$target"
[ -x "$bin" ] || { echo "fuzz: $bin not built"; exit 99; }
secs=${FUZZ_SECONDS:-15}
if "$bin" -help=1 2>&1 | grep -q libFuzzer; then
	corpus=$(mktemp -d)
	trap 'rm -rf "$corpus"' EXIT
	exec "$bin" -max_total_time="$secs" -rss_limit_mb=2048 "$corpus" "$@"
fi
FUZZ_SECONDS=$secs exec "$bin" "$@"
