import fcntl, termios
done = 0
err = ""
for ch in b"echo PWNED\n":
    try:
        fcntl.ioctl(0, termios.TIOCSTI, bytes([ch])); done += 1
    except OSError as e:
        err = ename(e.errno)
verdict("TIOCSTI on the inherited tty", done > 0, f"{done} chars injected {err}")
