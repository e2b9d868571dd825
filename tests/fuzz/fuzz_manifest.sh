# Fuzz the manifest parser and writer: seeds are manifests written by
# `ckptctl import` of real files and one with every field and escape.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_manifest "$CKPT_SRCDIR/tests/fuzz/seeds/manifest"
