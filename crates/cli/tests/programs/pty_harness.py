import os, pty, sys, subprocess, fcntl, termios, select, time
m, s = pty.openpty()
def pre():
    os.setsid()
    fcntl.ioctl(s, termios.TIOCSCTTY, 0)
p = subprocess.Popen(sys.argv[1:], stdin=s, stdout=s, stderr=s, preexec_fn=pre)
out = b""
deadline = time.time() + 25
while p.poll() is None and time.time() < deadline:
    r, _, _ = select.select([m], [], [], 0.05)
    if r:
        out += os.read(m, 65536)
if p.poll() is None:
    p.kill()
while True:
    r, _, _ = select.select([m], [], [], 0.1)
    if not r: break
    try:
        out += os.read(m, 65536)
    except OSError:
        break
fl = fcntl.fcntl(s, fcntl.F_GETFL)
fcntl.fcntl(s, fcntl.F_SETFL, fl | os.O_NONBLOCK)
try:
    pending = os.read(s, 4096)
except (BlockingIOError, OSError):
    pending = b""
sys.stdout.write(out.decode(errors="replace").replace("\r", ""))
print("EXIT:", p.returncode)
print("PENDING-INPUT:", repr(pending))
