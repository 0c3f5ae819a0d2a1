HOST_PID = int(sys.argv[1])
PTRACE_SEIZE, PTRACE_DETACH = 0x4206, 17
child = os.fork()
if child == 0:
    time.sleep(5); os._exit(0)
def attach(pid):
    r, e = sc(101, PTRACE_SEIZE, pid, 0, 0)
    if r == 0: sc(101, PTRACE_DETACH, pid, 0, 0)
    return r, e
r, e = attach(child)
verdict("ptrace own child", e not in DENIED, f"errno={ename(e)}")
os.kill(child, 9); os.waitpid(child, 0)
ppid = os.getppid()
if ppid > 0:
    r, e = attach(ppid)
    print(("ESCAPED" if r == 0 else "refused") + f": ptrace parent {ppid}: errno={ename(e)}")
r, e = attach(HOST_PID)
verdict(f"ptrace host pid {HOST_PID}", r == 0, f"errno={ename(e)}")
