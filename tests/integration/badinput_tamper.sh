#!/bin/sh
# Files changed behind the store's back after the import: one tensor byte
# flipped with size and mtime kept (only the content hash can tell: the read
# must fail with an error, never return the flipped byte), or grown (the
# identity check must refuse it).  The untouched files are still served.
exec sh "$CKPT_SRCDIR/tests/integration/badinput_run.sh" tamper 0
