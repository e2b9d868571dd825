"""What a trainer's code or a user's shell does to files, as one transcript:
run once in a local directory and once inside an in-progress checkpoint of
a writable mount, the two transcripts must be equal
(tests/integration/posix_inprogress.sh).

    posix_ops.py ROOT PART

PART is `root` (run as root: every operation, owners included), `user`
(run as another user in ROOT, a directory of mode 1777 that root made:
permissions, sticky bit, owners) or `refused` (the operations a checkpoint
cannot hold: each line says what the call answered, for the test to
compare with the documented refusals).  Each step prints one line: its
name, then OK and what it found, or the errno's name.  Inode numbers and
devices are never printed; "same inode" relations are.
"""
import ctypes
import errno
import os
import socket
import stat
import sys
import time

ROOT, PART = sys.argv[1], sys.argv[2]
os.chdir(ROOT)
out = []
libc = ctypes.CDLL(None, use_errno=True)


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def kind(mode):
    for test, k in ((stat.S_ISREG, "f"), (stat.S_ISDIR, "d"), (stat.S_ISLNK, "l"),
                    (stat.S_ISFIFO, "p"), (stat.S_ISSOCK, "s"), (stat.S_ISCHR, "c"), (stat.S_ISBLK, "b")):
        if test(mode):
            return k
    return "?"


def desc(st, size=True):
    s = "%s%04o %d:%d n%d" % (kind(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_nlink)
    if size and not stat.S_ISDIR(st.st_mode):
        s += " s%d" % st.st_size
    return s


def step(name, fn):
    try:
        r = fn()
        out.append("%s: OK%s" % (name, "" if r is None else " " + str(r)))
    except OSError as e:
        out.append("%s: %s" % (name, err(e)))


def lst(p):
    return desc(os.lstat(p))


def renameat2(a, b, flags):
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def later(p, fn):
    """Whether fn moves p's ctime (and what it answers)."""
    before = os.lstat(p).st_ctime_ns
    time.sleep(0.02)
    r = fn()
    after = os.lstat(p).st_ctime_ns
    return "%s ctime %s" % (r, "moved" if after > before else "kept")


def files_and_opens():
    step("create excl", lambda: os.close(os.open("f", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640)) or lst("f"))
    step("create excl again", lambda: os.open("f", os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o640))
    step("create rdonly", lambda: os.close(os.open("ro", os.O_CREAT | os.O_RDONLY, 0o600)) or lst("ro"))
    step("create wronly", lambda: os.close(os.open("wo", os.O_CREAT | os.O_WRONLY, 0o666)) or lst("wo"))

    def append():
        fd = os.open("f", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"hello ")
        os.write(fd, b"world")
        os.close(fd)
        return open("f", "rb").read()
    step("append", append)

    def trunc():
        fd = os.open("f", os.O_WRONLY | os.O_TRUNC)
        os.write(fd, b"abc")
        os.close(fd)
        return lst("f")
    step("open trunc", trunc)
    step("open directory on a file", lambda: os.open("f", os.O_RDONLY | os.O_DIRECTORY))
    step("open a directory for writing", lambda: os.open(".", os.O_WRONLY))
    step("open missing", lambda: os.open("nothing", os.O_RDONLY))
    step("open under a file", lambda: os.open("f/x", os.O_CREAT | os.O_RDWR, 0o644))
    step("open name too long", lambda: os.open("n" * 256, os.O_CREAT | os.O_RDWR, 0o644))

    def pwrite_read():
        fd = os.open("f", os.O_RDWR)
        os.pwrite(fd, b"XY", 10)
        data = os.pread(fd, 20, 0)
        os.close(fd)
        return "%r %s" % (data, lst("f"))
    step("pwrite past the end", pwrite_read)
    step("mknod regular", lambda: os.mknod("nod", stat.S_IFREG | 0o604) or lst("nod"))
    step("mknod regular exists", lambda: os.mknod("nod", stat.S_IFREG | 0o604))


def attributes():
    step("chmod", lambda: later("f", lambda: os.chmod("f", 0o751)) and lst("f"))
    step("chmod setuid setgid sticky", lambda: os.chmod("f", 0o7755) or lst("f"))
    step("chown", lambda: later("f", lambda: os.chown("f", 65534, 65534)) and lst("f"))
    step("chown keeps setgid of root?", lambda: os.chmod("f", 0o2755) or os.chown("f", 0, 0) or lst("f"))
    step("utimens set", lambda: os.utime("f", ns=(1_000_000_123, 2_000_000_456)) or
         "%d %d" % (os.lstat("f").st_atime_ns, os.lstat("f").st_mtime_ns))
    step("utimens now", lambda: os.utime("f") or (os.lstat("f").st_mtime_ns > 2_000_000_456))

    def omit():
        libc_ts = (ctypes.c_long * 4)(5, 0, 0, (1 << 30) - 2)   # atime 5 s, mtime UTIME_OMIT
        if libc.utimensat(-100, b"f", libc_ts, 0) != 0:
            e = ctypes.get_errno()
            raise OSError(e, os.strerror(e))
        return "%d %s" % (os.lstat("f").st_atime_ns, os.lstat("f").st_mtime_ns > 2_000_000_456)
    step("utimens omit", omit)
    step("truncate grow", lambda: os.truncate("f", 100) or lst("f"))
    step("truncate shrink", lambda: os.truncate("f", 4) or open("f", "rb").read())
    step("truncate negative", lambda: os.truncate("f", -1))

    def ftrunc():
        fd = os.open("f", os.O_RDWR)
        os.ftruncate(fd, 7)
        st = os.fstat(fd)
        os.close(fd)
        return desc(st)
    step("ftruncate", ftrunc)
    step("ftruncate read-only", lambda: os.ftruncate(os.open("f", os.O_RDONLY), 1))

    def falloc():
        fd = os.open("f", os.O_RDWR)
        os.posix_fallocate(fd, 0, 8192)
        st = os.fstat(fd)
        os.close(fd)
        return desc(st)
    step("fallocate", falloc)
    step("mtime moves on write", lambda: later("f", lambda: open("f", "ab").write(b"z")))


def xattrs():
    step("setxattr", lambda: os.setxattr("f", "user.origin", b"step-10") or os.getxattr("f", "user.origin"))
    step("setxattr create exists", lambda: os.setxattr("f", "user.origin", b"x", os.XATTR_CREATE))
    step("setxattr replace missing", lambda: os.setxattr("f", "user.none", b"x", os.XATTR_REPLACE))
    step("setxattr empty", lambda: os.setxattr("f", "user.empty", b"") or os.getxattr("f", "user.empty"))
    step("listxattr", lambda: sorted(n for n in os.listxattr("f") if not n.startswith("user.ckptfs.")))
    step("getxattr missing", lambda: os.getxattr("f", "user.none"))
    step("removexattr", lambda: os.removexattr("f", "user.empty") or
         sorted(n for n in os.listxattr("f") if not n.startswith("user.ckptfs.")))
    step("removexattr missing", lambda: os.removexattr("f", "user.empty"))
    os.mkdir("xd")
    step("xattr on a directory", lambda: os.setxattr("xd", "user.k", b"v") or os.getxattr("xd", "user.k"))


def symlinks():
    step("symlink", lambda: os.symlink("f", "sl") or lst("sl"))
    step("readlink", lambda: os.readlink("sl"))
    step("stat through", lambda: desc(os.stat("sl")))
    step("symlink exists", lambda: os.symlink("g", "sl"))
    step("dangling", lambda: os.symlink("missing", "dl") or os.stat("dl"))
    step("loop", lambda: os.symlink("loop2", "loop1") or os.symlink("loop1", "loop2") or open("loop1"))
    step("open nofollow", lambda: os.open("sl", os.O_RDONLY | os.O_NOFOLLOW))
    step("lchown", lambda: os.lchown("sl", 65534, 65534) or lst("sl"))
    step("lutimes", lambda: os.utime("sl", ns=(3_000_000_000, 4_000_000_000), follow_symlinks=False) or
         "%d" % os.lstat("sl").st_mtime_ns)
    step("symlink to a directory", lambda: os.mkdir("sd") or os.symlink("sd", "sdl") or
         os.close(os.open("sdl/inside", os.O_CREAT | os.O_RDWR, 0o644)) or sorted(os.listdir("sd")))
    step("long target", lambda: os.symlink("t" * 1000, "longl") or len(os.readlink("longl")))
    step("rename a symlink", lambda: os.rename("sl", "sl2") or os.readlink("sl2"))
    step("unlink a symlink", lambda: os.unlink("sl2") or os.path.exists("f"))


def links():
    step("link", lambda: os.link("f", "h") or "%s %s" % (lst("f"), os.lstat("f").st_ino == os.lstat("h").st_ino))
    step("link ctime", lambda: later("f", lambda: os.link("f", "h2")))
    step("link exists", lambda: os.link("f", "h"))
    step("link a directory", lambda: os.link("xd", "xd2"))
    step("write through one", lambda: open("h", "ab").write(b"!") and open("f", "rb").read()[-1:])
    step("unlink one", lambda: os.unlink("f") or lst("h"))
    step("rename link over link", lambda: os.rename("h", "h2") or "%s %s" % (lst("h"), lst("h2")))
    step("link into a subdirectory", lambda: os.mkdir("ld") or os.link("h", "ld/h3") or lst("ld/h3"))
    step("rename back", lambda: os.rename("h", "f") or lst("f"))


def renames():
    for n in ("r1", "r2"):
        with open(n, "w") as fh:
            fh.write(n)
    step("rename over a file", lambda: os.rename("r1", "r2") or open("r2").read())
    os.makedirs("a/b")
    os.mkdir("empty")
    step("rename dir over empty dir", lambda: os.rename("a", "empty") or sorted(os.listdir("empty")))
    os.makedirs("full/x")
    os.mkdir("d2")
    step("rename dir over non-empty", lambda: os.rename("d2", "full"))
    step("rename file over dir", lambda: os.rename("r2", "full"))
    step("rename dir over file", lambda: os.rename("d2", "r2"))
    step("rename into itself", lambda: os.rename("full", "full/x/y"))
    step("rename across directories", lambda: os.rename("r2", "full/x/r") or open("full/x/r").read())
    step("rename ctime", lambda: later("full/x/r", lambda: os.rename("full/x/r", "r3")))
    step("rename noreplace", lambda: renameat2("r3", "f", RENAME_NOREPLACE))
    with open("e1", "w") as fh:
        fh.write("one")
    with open("e2", "w") as fh:
        fh.write("two")
    step("rename exchange", lambda: renameat2("e1", "e2", RENAME_EXCHANGE) or open("e1").read() + open("e2").read())
    step("rename missing", lambda: os.rename("nothing", "x"))
    step("rmdir non-empty", lambda: os.rmdir("full"))
    step("rmdir a file", lambda: os.rmdir("r3"))
    step("unlink a directory", lambda: os.unlink("full"))
    step("rmdir", lambda: os.rmdir("full/x") or sorted(os.listdir("full")))


def open_descriptors():
    fd = os.open("u", os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"hello")
    step("unlink an open file", lambda: os.unlink("u"))
    step("pread after unlink", lambda: os.pread(fd, 5, 0))
    step("write after unlink", lambda: os.pwrite(fd, b"HE", 0) and os.pread(fd, 5, 0))
    step("fstat after unlink", lambda: desc(os.fstat(fd)))
    step("fchmod after unlink", lambda: os.fchmod(fd, 0o600) or desc(os.fstat(fd)))
    step("ftruncate after unlink", lambda: os.ftruncate(fd, 2) or desc(os.fstat(fd)))
    step("fsetxattr after unlink", lambda: os.setxattr(fd, "user.k", b"v") or os.getxattr(fd, "user.k"))
    step("futimens after unlink", lambda: os.utime(fd, ns=(7, 8)) or os.fstat(fd).st_mtime_ns)
    step("reopen through /proc", lambda: open("/proc/self/fd/%d" % fd, "rb").read())
    os.close(fd)
    for n, data in (("old", b"old bytes"), ("new", b"new")):
        with open(n, "wb") as fh:
            fh.write(data)
    fd = os.open("old", os.O_RDONLY)
    step("rename over an open file", lambda: os.rename("new", "old") or open("old", "rb").read())
    step("the open file still reads", lambda: os.pread(fd, 20, 0))
    step("its fstat", lambda: desc(os.fstat(fd)))
    os.close(fd)
    os.mkdir("od")
    dfd = os.open("od", os.O_RDONLY | os.O_DIRECTORY)
    step("rmdir an open directory", lambda: os.rmdir("od"))
    step("list the removed directory", lambda: os.listdir(dfd))
    os.close(dfd)


def long_paths():
    here = os.getcwd()
    comp = "d" * 200

    def deep():
        for _ in range(24):
            os.mkdir(comp)
            os.chdir(comp)
        with open("f", "w") as fh:
            fh.write("deep")
        os.symlink("f", "s")
        os.link("f", "h")
        os.setxattr("f", "user.deep", b"1")
        r = "%d %s %s %s %r" % (len(os.getcwd()) - len(here), lst("f"), os.readlink("s"), lst("h"),
                                os.getxattr("f", "user.deep"))
        os.rename("h", "h2")
        os.unlink("h2")
        os.unlink("s")
        os.unlink("f")
        for _ in range(24):
            os.chdir("..")
            os.rmdir(comp)
        return r
    step("deep tree", deep)
    os.chdir(here)
    step("path relative", lambda: os.mkdir("p1") or os.mkdir("p1/" + "e" * 255) or
         os.close(os.open("p1/" + "e" * 255 + "/" + "f" * 255, os.O_CREAT | os.O_RDWR, 0o600)) or
         lst("p1/" + "e" * 255 + "/" + "f" * 255))


def as_user():
    """ROOT is 1777 and root's; this runs as someone else."""
    step("create", lambda: os.close(os.open("mine", os.O_CREAT | os.O_RDWR, 0o644)) or lst("mine"))
    step("chmod mine", lambda: os.chmod("mine", 0o600) or lst("mine"))
    step("chown mine to root", lambda: os.chown("mine", 0, -1))
    step("chgrp mine to root", lambda: os.chown("mine", -1, 0))
    step("utimens now on mine", lambda: os.utime("mine") is None)
    step("utimens set on mine", lambda: os.utime("mine", ns=(1, 2)) or os.lstat("mine").st_mtime_ns)
    step("unlink root's in sticky", lambda: os.unlink("roots"))
    step("rename root's in sticky", lambda: os.rename("roots", "stolen"))
    step("write root's 0644", lambda: open("roots", "ab"))
    step("read root's 0600", lambda: open("secret", "rb").read())
    step("utimens now on root's", lambda: os.utime("roots"))
    step("chmod root's", lambda: os.chmod("roots", 0o777))
    step("symlink", lambda: os.symlink("mine", "ml") or lst("ml"))
    step("link root's", lambda: os.link("roots", "rl") or lst("rl"))
    step("mkdir", lambda: os.mkdir("md", 0o750) or lst("md"))
    step("setxattr on root's", lambda: os.setxattr("roots", "user.k", b"v"))
    step("setxattr on mine", lambda: os.setxattr("mine", "user.k", b"v") or os.getxattr("mine", "user.k"))
    step("trusted xattr", lambda: os.setxattr("mine", "trusted.k", b"v"))
    step("unlink mine", lambda: os.unlink("mine"))


def refused():
    step("mkfifo", lambda: os.mkfifo("fifo"))
    step("mknod char", lambda: os.mknod("chr", stat.S_IFCHR | 0o600, os.makedev(1, 3)))
    step("mknod block", lambda: os.mknod("blk", stat.S_IFBLK | 0o600, os.makedev(7, 0)))
    s = socket.socket(socket.AF_UNIX)
    step("socket bind", lambda: s.bind("sock"))
    s.close()
    with open("x", "w"):
        pass
    step("trusted xattr", lambda: os.setxattr("x", "trusted.k", b"v"))
    step("security xattr", lambda: os.setxattr("x", "security.k", b"v"))


if PART == "root":
    os.umask(0o022)
    files_and_opens()
    attributes()
    xattrs()
    symlinks()
    links()
    renames()
    open_descriptors()
    long_paths()
elif PART == "user":
    os.umask(0o022)
    as_user()
elif PART == "refused":
    refused()
else:
    sys.exit("unknown part " + PART)
print("\n".join(out))
