import socket, ssl, sys, threading, time
root, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = None
if cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen()
print(l.getsockname()[1], flush=True)
def serve(c):
    try:
        if ctx:
            c = ctx.wrap_socket(c, server_side=True)
        head = c.recv(4096).decode(errors="replace").split("\r\n")[0]
        c.sendall(b"HTTP/1.0 200 OK\r\n\r\nheld-open-body\n")
        print(f'served "{head}"', file=sys.stderr, flush=True)
        time.sleep(30)
    except OSError as e:
        print(f"error {e}", file=sys.stderr, flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
