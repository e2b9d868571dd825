#!/bin/sh
# Bad safetensors files in an imported dir: short, truncated, trailing bytes,
# garbled or non-UTF-8 header, huge or overlong header length, a hole in the
# offsets, an unknown dtype, a shape that does not match its bytes.
# The import reports each (exit 2); the daemon serves the good files before
# and after failed reads of the bad ones, which never return wrong bytes.
exec sh "$CKPT_SRCDIR/tests/integration/badinput_run.sh" safetensors 2
