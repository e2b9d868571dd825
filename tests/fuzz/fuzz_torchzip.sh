# Fuzz tz_read/tz_write: own seeds plus small real torch.save files.
f="$CKPT_FIXTURES/torch2x"
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_torchzip "$CKPT_SRCDIR/tests/fuzz/seeds/torchzip" \
	"$f/burn_reader_float32.pt" "$f/burn_reader_checkpoint.pt" "$f/candle_test.pt" "$f/burn_reader_empty.pt"
