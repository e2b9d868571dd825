# Fuzz the pickle VM and emitter from real data.pkl files and hostile samples.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_pickle "$CKPT_SRCDIR/tests/fuzz/seeds/pickle"
