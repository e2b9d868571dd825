"""Where the package finds the programs and libraries it runs over.

Three places, in this order: an environment variable naming the file, the
source tree the package is imported from (`PYTHONPATH=python` in a tree
built in place: ./configure && make), and the installed ones (PATH for
programs, the package's own directory for libraries).  Nothing here runs
anything.
"""

import os
import shutil

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def source_tree():
    """The top of the ckptfs source tree this package is imported from
    (python/ckptfs inside it), or None for an installed package."""
    parent = os.path.dirname(PACKAGE_DIR)
    top = os.path.dirname(parent)
    if os.path.basename(parent) == "python" and os.path.isfile(os.path.join(top, "configure.ac")):
        return top
    return None


def _executable(path):
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def program(name, env_var):
    """The path of program `name` (ckptctl, ckptfs): $env_var when set (it
    must then be an executable), the source tree's build, then PATH.
    Raises FileNotFoundError saying where it looked."""
    named = os.environ.get(env_var)
    if named:
        if _executable(named):
            return named
        raise FileNotFoundError("%s=%s is not an executable" % (env_var, named))
    top = source_tree()
    found = _executable(os.path.join(top, name)) if top else None
    found = found or shutil.which(name)
    if not found:
        raise FileNotFoundError("%s not found: set %s=PATH, build the source tree (make), or install ckptfs"
                                % (name, env_var))
    return found


def library(filename, env_var):
    """The path of shared library `filename`: $env_var when set, then the
    package directory (installed beside the modules), then the source
    tree's build; None when there is none."""
    named = os.environ.get(env_var)
    if named:
        return named if os.path.isfile(named) else None
    top = source_tree()
    for d in [PACKAGE_DIR] + ([top, os.path.join(top, ".libs")] if top else []):
        path = os.path.join(d, filename)
        if os.path.isfile(path):
            return path
    return None
