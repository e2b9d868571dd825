# Fuzz st_header_len/st_parse/st_layout: own seeds plus two small real files.
f="$CKPT_FIXTURES/safetensors"
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_safetensors "$CKPT_SRCDIR/tests/fuzz/seeds/safetensors" \
	"$f/burn_multi_layer.safetensors" "$f/candle_jfk_codes.safetensors"
