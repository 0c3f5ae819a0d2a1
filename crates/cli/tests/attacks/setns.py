def join_mnt():
    fd = os.open("/proc/self/ns/mnt", os.O_RDONLY)
    r = sc(308, fd, CLONE_NEWNS)
    os.close(fd)
    return r
def join_net():
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    r = sc(308, fd, CLONE_NEWNET)
    os.close(fd)
    return r
probe_privileged("setns mnt", join_mnt)
probe_privileged("setns net", join_net)
