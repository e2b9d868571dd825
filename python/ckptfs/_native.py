"""The package's native part: libckptfs-py.so, C over the same core as
ckptfs and ckptctl, loaded with ctypes (no compiled Python extension, so
one build serves every Python).

It is found as _locate.library() says: $CKPTFS_PY_LIB, the package
directory (where an installed copy lies), then the source tree's build.
Modules with a native core call load() and say what is missing when it
returns None; the pure-Python modules (ctl, emergency, hf) never need it.
"""

import ctypes

from . import _locate

LIBRARY = "libckptfs-py.so"
ENV_VAR = "CKPTFS_PY_LIB"

_lib = None


def path():
    """Where the library is, or None when it is not built or installed."""
    return _locate.library(LIBRARY, ENV_VAR)


def load():
    """The library as a ctypes.CDLL (loaded once per process), or None
    when there is none.  Raises OSError when the file is there but does
    not load."""
    global _lib
    if _lib is None:
        found = path()
        if found is None:
            return None
        _lib = ctypes.CDLL(found)
    return _lib
