# Fuzz the journal entry parser and writer: seeds are entries as the store
# writes them (a commit, a compaction, a sweep, one of each line).
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_journal "$CKPT_SRCDIR/tests/fuzz/seeds/journal"
