#!/bin/sh
# Bad torch.save files in an imported dir: truncated, bit-flipped (tensor data
# with a stale CRC, data.pkl with a stale CRC, an invalid opcode with a good
# CRC), wrong magic, empty, lengths that claim gigabytes in the pickle and in
# the zip directory.
# The import reports each (exit 2); the daemon serves the good files before
# and after failed reads of the bad ones, which never return wrong bytes.
exec sh "$CKPT_SRCDIR/tests/integration/badinput_run.sh" torch 2
