# Fuzz the packed store's parsers (packmaps, file maps, chunk locations):
# seeds are the packmaps of a compacted checkpoint and of a raw-mapped newest one.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_packmap "$CKPT_SRCDIR/tests/fuzz/seeds/packmap"
