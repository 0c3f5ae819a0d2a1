params = (ctypes.c_ubyte * 120)()
r, e = sc(425, 8, ctypes.byref(params))
if r >= 0: os.close(r)
verdict("io_uring_setup", not (r < 0 and e in (errno.EPERM, errno.ENOSYS)), f"ret={r} errno={ename(e)}")
