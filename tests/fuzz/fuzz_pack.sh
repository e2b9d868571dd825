# Fuzz pack records and the chunk decoder: seeds are one record of every
# codec and element size (with the reference chunk of the deltas after it),
# and one with a sparse plane; v2-* seeds have the fixed headers of pack
# versions 1 and 2, v3-* compact ones.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_pack "$CKPT_SRCDIR/tests/fuzz/seeds/pack"
