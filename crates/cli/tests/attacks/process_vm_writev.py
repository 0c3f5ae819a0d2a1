class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
target = ctypes.create_string_buffer(b"AAAA")
src = ctypes.create_string_buffer(b"BBBB")
child = os.fork()
if child == 0:
    for _ in range(200):
        if target.raw[:4] == b"BBBB": os._exit(7)
        time.sleep(0.01)
    os._exit(0)
time.sleep(0.05)
local = iovec(ctypes.cast(src, ctypes.c_void_p), 4)
remote = iovec(ctypes.cast(target, ctypes.c_void_p), 4)
r, e = sc(311, child, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
_, st = os.waitpid(child, 0)
verdict("process_vm_writev into a child", r == 4 or e not in DENIED, f"ret={r} errno={ename(e)} child saw write: {os.WEXITSTATUS(st) == 7}")
