# Fuzz pack records and the chunk decoder: seeds are one record of every
# codec and element size (with the reference chunk of the deltas after it),
# and one with a sparse plane.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_pack "$CKPT_SRCDIR/tests/fuzz/seeds/pack"
