import json, socket, ssl, sys, threading
redirect, cert, key = sys.argv[1], sys.argv[2], sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(64)
print(l.getsockname()[1], flush=True)
lock = threading.Lock()
def log(o):
    with lock:
        sys.stderr.write(json.dumps(o) + "\n")
        sys.stderr.flush()
def serve(c):
    log({"event": "connection"})
    try:
        c.settimeout(5)
        c = ctx.wrap_socket(c, server_side=True)
        f = c.makefile("rb")
        while True:
            line = f.readline(65536)
            if not line:
                break
            head = line.decode(errors="replace").rstrip("\r\n")
            headers = []
            while True:
                h = f.readline(65536)
                if h in (b"\r\n", b"\n", b""):
                    break
                n, _, v = h.decode(errors="replace").partition(":")
                headers.append([n.strip(), v.strip()])
            log({"event": "request", "line": head, "headers": headers})
            path = head.split(" ")[1] if head.count(" ") >= 2 else ""
            status, extra, body = "200 OK", "", b"broker-test-ok\n"
            if path.startswith("/redirect"):
                status, extra, body = "302 Found", "Location: " + redirect + "\r\n", b"moved\n"
            elif "info/refs" in path:
                body = ("5" * 40 + "\trefs/heads/main\n").encode()
            c.sendall(("HTTP/1.1 " + status + "\r\nContent-Type: text/plain\r\nContent-Length: "
                       + str(len(body)) + "\r\n" + extra + "\r\n").encode() + body)
    except (OSError, ValueError) as e:
        log({"event": "error", "error": str(e)})
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
