for fam, name in [(socket.AF_INET, "AF_INET"), (socket.AF_INET6, "AF_INET6")]:
    for typ, tn in [(socket.SOCK_STREAM, "STREAM"), (socket.SOCK_DGRAM, "DGRAM")]:
        try:
            socket.socket(fam, typ).close(); verdict(f"socket({name}, {tn})", True, "created")
        except OSError as e:
            verdict(f"socket({name}, {tn})", e.errno not in (errno.EPERM, errno.EACCES, errno.EAFNOSUPPORT, errno.ENOSYS), ename(e.errno))
try:
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close(); print("AF_UNIX ok (allowed by design)")
except OSError as e:
    print("NOTE: AF_UNIX refused too:", ename(e.errno))
