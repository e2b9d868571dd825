# Fuzz the lossy policies' parser (STORE/lossy.conf): seeds are files
# ckptctl lossy writes, with comments, blank lines and extreme values.
exec sh "$CKPT_SRCDIR/tests/fuzz/run.sh" fuzz_lossy_policy "$CKPT_SRCDIR/tests/fuzz/seeds/lossy_policy"
