# Fuzz the DCP .metadata parser, checker and merger.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_dcp_metadata "$CKPT_SRCDIR/tests/fuzz/seeds/dcp"
