U4, U6, T6 = (int(a) for a in sys.argv[1:4])
for fam, addr in [(socket.AF_INET, ("127.0.0.1", U4)), (socket.AF_INET6, ("::1", U6))]:
    try:
        s = socket.socket(fam, socket.SOCK_DGRAM); s.sendto(b"exfil", addr); print("sent", addr)
    except OSError as e:
        print("udp error", addr, ename(e.errno))
try:
    s = socket.create_connection(("::1", T6), timeout=3); s.sendall(b"x"); print("tcp6 connected")
except OSError as e:
    print("tcp6 error", e)
