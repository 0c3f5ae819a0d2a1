HOST_PID = int(sys.argv[1])
def readmem(pid):
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                rng, perms = line.split()[:2]
                if perms.startswith("r"):
                    start = int(rng.split("-")[0], 16); break
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as m:
            m.seek(start)
            return len(m.read(16)) > 0, "read"
    except Exception as x:
        return False, repr(x)
ok, d = readmem(HOST_PID)
verdict(f"read /proc/{HOST_PID}/mem (host process)", ok, d)
pp = os.getppid()
if pp > 0:
    ok, d = readmem(pp)
    print(("ESCAPED" if ok else "refused") + f": read /proc/{pp}/mem (parent): {d}")
