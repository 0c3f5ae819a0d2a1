import ctypes, errno, os, sys, socket, struct, time
print("PINFOLD-TEST-STARTED", flush=True)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def sc(nr, *args):
    a = [ctypes.c_long(x) if isinstance(x, int) else x for x in args]
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *a)
    return r, (ctypes.get_errno() if r == -1 else 0)
def ename(e):
    return errno.errorcode.get(e, str(e)) if e else "OK"
DENIED = (errno.EPERM, errno.EACCES, errno.ENOSYS)
def verdict(desc, reached, detail):
    print(("ESCAPED: " if reached else "refused: ") + desc + ": " + detail, flush=True)
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x20000, 0x10000000, 0x40000000
def probe_privileged(desc, call):
    """Run call() in a forked child that first tries to get its own user+mount+net namespace, so a
    call that reaches the kernel cannot touch the host's mounts. Reached = errno not in
    EPERM/EACCES/ENOSYS: the syscall got past the permission checks."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        u, ue = sc(272, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET)
        try:
            ret, e = call()
        except Exception as x:
            ret, e = -1, errno.EPERM
            print("exception", x, flush=True)
        os.write(w, f"{ret} {e} {ue}".encode())
        os._exit(0)
    os.close(w)
    data = os.read(r, 200).decode()
    os.waitpid(pid, 0)
    ret, e, ue = map(int, data.split())
    verdict(desc, e not in DENIED, f"ret={ret} errno={ename(e)} (unshare first: {ename(ue)})")
