import struct, time
name = sys.argv[1]
resolver = sys.argv[2]
query = b'\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00' + b''.join(bytes([len(p)]) + p.encode() for p in name.split('.')) + b'\x00\x00\x01\x00\x01'
t0 = time.monotonic()
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(1)
    s.sendto(query, (resolver, 53))
    print(f'sent: dns query to {resolver}:53 left sendto')
    print('ESCAPED: dns answer', s.recvfrom(512))
except OSError as e:
    print(f'refused: dns {resolver}:53: errno={ename(e.errno)} {e}')
try:
    print('ESCAPED: resolver', socket.getaddrinfo(name, 80))
except OSError as e:
    print(f'refused: resolver: {e}')
print(f'took {time.monotonic() - t0:.2f} s')
