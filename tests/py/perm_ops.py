"""File operations as one user, for the permission tests: the same list of
operations runs against a local tree and a ckptfs mount of it, as the same
user, and the two outputs must be equal (tests/integration/perms_*.sh).

    perm_ops.py ROOT OPS_FILE [--umask OCTAL] [--ckptctl PATH --mount]

OPS_FILE holds one operation a line, fields separated by tabs, paths
relative to ROOT.  Each prints one line: the operation, then OK (with what
was found) or the errno's name.  Batching them keeps the test fast: one
process per user and tree.

    stat P             OK uid:gid:type+mode          (lstat)
    read P             OK <bytes read>
    list P             OK name,name,...              (sorted)
    getxattr P NAME    OK (the attribute, or none)   (EACCES and the like otherwise)
    mkdir P MODE       creates a directory (MODE octal; the umask applies)
    create P MODE      creates a file with O_EXCL and writes a line into it
    write P            opens for appending and writes a line
    chmod P MODE / chown P UID GID / utime P
    rename A B
    rmtree P           one line: each entry's result, bottom-up, sorted
    ckptctl_rm S/C     local: rmtree S/C; --mount: ckptctl rm ROOT S/C
    ckptctl_commit S/D FINAL   local: rename S/D S/FINAL; --mount: ckptctl commit ROOT S/D FINAL
"""
import errno
import os
import stat
import subprocess
import sys


def err(e):
    return errno.errorcode.get(e.errno, str(e.errno))


def describe(st):
    kind = "d" if stat.S_ISDIR(st.st_mode) else "f" if stat.S_ISREG(st.st_mode) else "?"
    return "%d:%d:%s%04o" % (st.st_uid, st.st_gid, kind, stat.S_IMODE(st.st_mode))


def rmtree(path):
    """Removes what it can, as rm -r: each entry's result."""
    out = []

    def walk(p, rel):
        try:
            names = sorted(os.listdir(p))
        except OSError as e:
            out.append("%s:list:%s" % (rel, err(e)))
            names = []
        for n in names:
            q = os.path.join(p, n)
            r = rel + "/" + n
            try:
                isdir = stat.S_ISDIR(os.lstat(q).st_mode)
            except OSError as e:
                out.append("%s:lstat:%s" % (r, err(e)))
                continue
            if isdir:
                walk(q, r)
            else:
                try:
                    os.unlink(q)
                    out.append(r + ":OK")
                except OSError as e:
                    out.append("%s:%s" % (r, err(e)))
        try:
            os.rmdir(p)
            out.append(rel + ":OK")
        except OSError as e:
            out.append("%s:%s" % (rel, err(e)))

    walk(path, ".")
    return out


def run(root, op, args, ckptctl, mount):
    p = os.path.join(root, args[0]) if args else root
    if op == "stat":
        return "OK " + describe(os.lstat(p))
    if op == "read":
        with open(p, "rb") as f:
            return "OK %d" % len(f.read())
    if op == "list":
        return "OK " + ",".join(sorted(os.listdir(p)))
    if op == "getxattr":
        try:
            os.getxattr(p, args[1])
        except OSError as e:
            if e.errno not in (errno.ENODATA, errno.ENOTSUP):
                raise
        return "OK"
    if op == "mkdir":
        os.mkdir(p, int(args[1], 8))
        return "OK"
    if op == "create":
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, int(args[1], 8))
        os.write(fd, b"created\n")
        os.close(fd)
        return "OK"
    if op == "write":
        fd = os.open(p, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"written\n")
        os.close(fd)
        return "OK"
    if op == "chmod":
        os.chmod(p, int(args[1], 8))
        return "OK"
    if op == "chown":
        os.chown(p, int(args[1]), int(args[2]))
        return "OK"
    if op == "utime":
        os.utime(p, (1000000000, 1000000000))
        return "OK"
    if op == "rename":
        os.rename(p, os.path.join(root, args[1]))
        return "OK"
    if op == "rmtree":
        return " ".join(rmtree(p))
    if op == "ckptctl_rm":
        if not mount:
            res = rmtree(p)
            return "OK" if all(r.endswith(":OK") for r in res) else "FAILED"
        r = subprocess.run([ckptctl, "rm", root, args[0]], capture_output=True)
        sys.stderr.write(r.stderr.decode(errors="replace"))
        return "OK" if r.returncode == 0 else "FAILED"
    if op == "ckptctl_commit":
        series = os.path.dirname(args[0])
        if not mount:
            try:
                os.rename(p, os.path.join(root, series, args[1]))
                return "OK"
            except OSError:
                return "FAILED"
        r = subprocess.run([ckptctl, "commit", root, args[0], args[1]], capture_output=True)
        sys.stderr.write(r.stderr.decode(errors="replace"))
        return "OK" if r.returncode == 0 else "FAILED"
    raise SystemExit("unknown operation " + op)


def main():
    root, ops = sys.argv[1], sys.argv[2]
    ckptctl, mount = None, False
    rest = sys.argv[3:]
    while rest:
        if rest[0] == "--umask":
            os.umask(int(rest[1], 8))
            rest = rest[2:]
        elif rest[0] == "--ckptctl":
            ckptctl = rest[1]
            rest = rest[2:]
        elif rest[0] == "--mount":
            mount = True
            rest = rest[1:]
        else:
            raise SystemExit("unknown argument " + rest[0])
    with open(ops) as f:
        lines = [ln.rstrip("\n") for ln in f if ln.strip()]
    for ln in lines:
        op, *args = ln.split("\t")
        try:
            res = run(root, op, args, ckptctl, mount)
        except OSError as e:
            res = err(e)
        print("%s\t%s" % (ln, res), flush=True)


if __name__ == "__main__":
    main()
