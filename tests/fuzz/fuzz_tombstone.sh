# Fuzz the tombstone parser and writer: seeds are tombstones as the store
# writes them.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_tombstone "$CKPT_SRCDIR/tests/fuzz/seeds/tombstone"
