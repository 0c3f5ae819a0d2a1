def attempt(name, f):
    try:
        print(f'RESULT {name} OK {f()}')
    except OSError as e:
        print(f'RESULT {name} {ename(e.errno)}')
def bind(fam, host):
    s = socket.socket(fam); s.bind((host, 0)); s.listen(); return s.getsockname()[1]
def connect(fam, host, port):
    s = socket.socket(fam); s.settimeout(3); s.connect((host, port)); s.close(); return port
attempt('bind4', lambda: bind(socket.AF_INET, '127.0.0.1'))
attempt('bind6', lambda: bind(socket.AF_INET6, '::1'))
attempt('connect4-closed', lambda: connect(socket.AF_INET, '127.0.0.1', 9))
attempt('connect6-closed', lambda: connect(socket.AF_INET6, '::1', 9))
lsock = socket.socket()
try:
    lsock.listen(); port = lsock.getsockname()[1]
    print(f'RESULT autobind-listen OK {port}')
    attempt('connect-autobound', lambda: connect(socket.AF_INET, '127.0.0.1', port))
except OSError as e:
    print(f'RESULT autobind-listen {ename(e.errno)}')
if len(sys.argv) > 1:
    attempt('connect-proxy', lambda: connect(socket.AF_INET, '127.0.0.1', int(sys.argv[1])))
