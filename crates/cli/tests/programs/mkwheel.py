import base64, hashlib, sys, zipfile
files = {
    "demo/__init__.py": b"VALUE = 1\n",
    "demo-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: pinfold-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
def rec(data):
    d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={d},{len(data)}"
record = "".join(f"{n},{rec(d)}\n" for n, d in files.items()) + "demo-1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, d in files.items():
        z.writestr(n, d)
    z.writestr("demo-1.0.dist-info/RECORD", record)
