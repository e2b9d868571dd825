# Fuzz a file's import (classification, zip, pickle, walk, layers, hashing):
# real torch.save and safetensors files as seeds, plus the torchzip seeds.
f="$CKPT_FIXTURES"
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_ingest "$CKPT_SRCDIR/tests/fuzz/seeds/torchzip" \
	"$f/torch2x/burn_reader_checkpoint.pt" "$f/torch2x/burn_reader_parameter.pt" \
	"$f/torch2x/burn_reader_bfloat16.pt" "$f/torch2x/candle_test.pt" \
	"$f/torch2x/burn_reader_simple_legacy.pt" "$f/safetensors/burn_multi_layer.safetensors"
