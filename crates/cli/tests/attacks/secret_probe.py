import subprocess
a, b, cred = sys.argv[1], sys.argv[2], sys.argv[3]
s = (a + b).encode()
def leak(what, data):
    if s in data:
        print(f"ESCAPED: secret in {what}")
leak("os.environ", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
for v in ("MY_PAT", "ALSO", "ALSO_WRAPPED"):
    if v in os.environ:
        print(f"ESCAPED: variable {v} is set inside")
for argv in (["env"], ["cat", "/proc/self/environ"], ["cat", cred], ["cat", "/proc/self/root" + cred]):
    p = subprocess.run(argv, capture_output=True)
    leak(" ".join(argv), p.stdout + p.stderr)
    print(f"ran: {' '.join(argv)} rc={p.returncode} bytes={len(p.stdout)}")
try:
    os.link(cred, "linked-credential")
    leak("a hard link to the credential file", open("linked-credential", "rb").read())
    print("linked: made a hard link to the credential file")
except OSError as e:
    print(f"refused: hard link to the credential file: errno={ename(e.errno)}")
readable = 0
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for f in ("environ", "cmdline"):
            try:
                data = open(f"/proc/{pid}/{f}", "rb").read()
            except OSError:
                continue
            readable += 1
            leak(f"/proc/{pid}/{f}", data)
print(f"proc files read: {readable}")
files = 0
for root in (os.environ.get("TMPDIR", "/tmp"), os.environ["HOME"], os.getcwd()):
    for dp, dn, fn in os.walk(root):
        for n in fn:
            p = os.path.join(dp, n)
            try:
                data = open(p, "rb").read(1 << 22)
            except OSError:
                continue
            files += 1
            leak(f"file {p}", data)
print(f"files read: {files}")
bundle = os.environ.get("SSL_CERT_FILE", "")
try:
    data = open(bundle, "rb").read()
    leak(f"the CA bundle {bundle}", data)
    if b"PRIVATE KEY" in data:
        print(f"ESCAPED: a private key in the CA bundle {bundle}")
    print(f"bundle: {data.count(b'BEGIN CERTIFICATE')} certificates")
except OSError as e:
    print(f"bundle: unreadable {bundle}: {e}")
