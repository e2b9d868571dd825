#!/bin/sh
# Hostile pickles in an imported dir: GLOBALs os.system, posix.system, eval,
# subprocess.getoutput that would each touch a marker file, and nesting a
# million deep.  Nothing may ever run (no marker, neither on import nor on
# reads through the mount) and nothing may crash.
# The import reports each (exit 2); the daemon serves the good files before
# and after failed reads of the bad ones, which never return wrong bytes.
exec sh "$CKPT_SRCDIR/tests/integration/badinput_run.sh" pickle 2
