# Fuzz the JSON reader and writers and the index.json reader/writer.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_json "$CKPT_SRCDIR/tests/fuzz/seeds/json"
