"""Checks on what a ckptfs mount serves, shared by the integration tests."""

import errno
import mmap
import os
import re


def sole_checkpoint(mnt_series):
    """The one checkpoint directory of a series imported from a plain dir."""
    entries = sorted(os.listdir(mnt_series))
    if len(entries) != 1 or not os.path.isdir(os.path.join(mnt_series, entries[0])):
        raise AssertionError("%s: expected one checkpoint directory, found %s" % (mnt_series, entries))
    return os.path.join(mnt_series, entries[0])


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def read_mmapped(path, private=False):
    """The file's bytes as a loader that maps it sees them: shared, as
    safetensors' safe_open maps; private, as torch.load(mmap=True) maps
    torch.save files (the only kind FUSE allows on direct I/O files)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        flags = mmap.MAP_PRIVATE if private else mmap.MAP_SHARED
        with mmap.mmap(f.fileno(), 0, flags=flags, prot=mmap.PROT_READ) as m:
            return bytes(m)


def flip_byte(path, offset):
    """XORs the byte at offset keeping the file's size and mtime, so that its
    identity is unchanged and only a content hash can tell; twice restores."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x5a]))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def assert_not_served(mnt_path, physical_path=None):
    """A refused file is either absent from the mount or unreadable; whatever
    bytes a failing read returned first must be the physical file's own.
    Returns how it was refused, for the log."""
    name = os.path.basename(mnt_path)
    if name not in os.listdir(os.path.dirname(mnt_path)):
        try:
            os.stat(mnt_path)
        except FileNotFoundError:
            return "absent"
        raise AssertionError("%s: not listed, yet stat() finds it" % mnt_path)
    got = bytearray()
    try:
        with open(mnt_path, "rb", buffering=0) as f:
            while True:
                chunk = f.read(1 << 20)
                if not chunk:
                    break
                got += chunk
    except OSError as e:
        if physical_path is not None:
            with open(physical_path, "rb") as f:
                original = f.read()
            if bytes(got) != original[:len(got)]:
                raise AssertionError("%s: %d bytes served before the error are not the file's"
                                     % (mnt_path, len(got)))
        return "listed, read fails with %s" % errno.errorcode.get(e.errno, e.errno)
    raise AssertionError("%s: a refused file was served (%d bytes read without error)"
                         % (mnt_path, len(got)))


def assert_reported(stderr_text, name, reason=None):
    """stderr of `ckptctl import` names the file, with a reason on the same line."""
    lines = [l for l in stderr_text.splitlines() if name in l]
    if not lines:
        raise AssertionError("import did not report %s; stderr was:\n%s" % (name, stderr_text))
    # The reason is whatever the line says besides the path and the program name.
    def rest(line):
        return re.sub(r"\S*%s\S*|ckptctl|refused|error|warning" % re.escape(name), "", line, flags=re.I)
    if not any(re.search(r"[A-Za-z]{4}", rest(l)) for l in lines):
        raise AssertionError("import reported %s without a reason: %r" % (name, lines))
    if reason and not any(re.search(reason, l, re.I) for l in lines):
        raise AssertionError("import reported %s, but not as %r: %r" % (name, reason, lines))
    return lines[0].strip()
