/* The steps bench/floor.c and bench/warm.c share: the kernel's part of a fresh sandbox,
 * done by its init (pid 1 of new user and pid namespaces). Header-only, static functions;
 * each failure prints the step and exits 125, like pinfold's setup failures. */
#ifndef PINFOLD_BENCH_SKELETON_H
#define PINFOLD_BENCH_SKELETON_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x1
struct mount_attr { unsigned long long attr_set, attr_clr, propagation, userns_fd; };
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

static void die(const char *what) { perror(what); _exit(125); }

static void put(const char *file, const char *text) {
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) < 0) die(file);
    close(fd);
}

/* Map uid and gid to themselves (the only mapping an unprivileged user may write), then
 * unshare the mount, ipc, uts and network namespaces, owned by the new user namespace. */
static void skeleton_namespaces(int uid, int gid) {
    char line[64];
    put("/proc/self/setgroups", "deny");
    snprintf(line, sizeof line, "%d %d 1\n", uid, uid);
    put("/proc/self/uid_map", line);
    snprintf(line, sizeof line, "%d %d 1\n", gid, gid);
    put("/proc/self/gid_map", line);
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)) die("unshare");
}

/* A minimal new root at DIR/root (an existing directory): / bound recursively and made
 * read-only (mount_setattr, AT_RECURSIVE), a fresh /proc, pivot_root into it. */
static void skeleton_root(const char *dir) {
    char root[4096], proc[4096];
    snprintf(root, sizeof root, "%s/root", dir);
    snprintf(proc, sizeof proc, "%s/root/proc", dir);
    struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) die("private");
    if (mount("/", root, NULL, MS_BIND | MS_REC, NULL)) die("bind /");
    if (syscall(SYS_mount_setattr, AT_FDCWD, root, AT_RECURSIVE, &ro, sizeof ro)) die("read-only");
    if (mount("proc", proc, "proc", 0, NULL)) die("proc");
    if (chdir(root) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) || chdir("/"))
        die("pivot_root");
}

#endif
