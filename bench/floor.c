/* The kernel's floor for `pinfold exec -- true`: only the namespace and mount steps every run
 * of a fresh sandbox must pay, with no policy, no Landlock, no seccomp, no placeholders and no
 * ledger. bench/exec.sh times it beside pinfold and bubblewrap, so the ratio pinfold/bwrap can
 * be read against what the kernel itself costs on this machine.
 *
 *   floor 1   clone into new user + pid namespaces; init maps its ids, unshares mount, ipc,
 *             uts and network namespaces, forks /bin/true, waits, reports the status on a pipe
 *   floor 2   the same plus a minimal new root: / bound recursively and made read-only
 *             (mount_setattr, AT_RECURSIVE), a fresh /proc, pivot_root into it
 *
 * Build: gcc -O2 -static -o floor bench/floor.c (needs a scratch directory as argv[2]).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MOUNT_ATTR_RDONLY
#define MOUNT_ATTR_RDONLY 0x1
struct mount_attr { unsigned long long attr_set, attr_clr, propagation, userns_fd; };
#endif
#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

static int mode, uid, gid, report[2];
static const char *scratch;
static char stack[1 << 16];

static void die(const char *what) { perror(what); _exit(125); }

static void put(const char *file, const char *text) {
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) < 0) die(file);
    close(fd);
}

static int init(void *arg) {
    (void)arg;
    char line[64];
    put("/proc/self/setgroups", "deny");
    snprintf(line, sizeof line, "%d %d 1\n", uid, uid);
    put("/proc/self/uid_map", line);
    snprintf(line, sizeof line, "%d %d 1\n", gid, gid);
    put("/proc/self/gid_map", line);
    if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET)) die("unshare");
    if (mode >= 2) {
        char root[4096], proc[4096];
        snprintf(root, sizeof root, "%s/root", scratch);
        snprintf(proc, sizeof proc, "%s/root/proc", scratch);
        struct mount_attr ro = { .attr_set = MOUNT_ATTR_RDONLY };
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) die("private");
        if (mount("/", root, NULL, MS_BIND | MS_REC, NULL)) die("bind /");
        if (syscall(SYS_mount_setattr, AT_FDCWD, root, AT_RECURSIVE, &ro, sizeof ro)) die("read-only");
        if (mount("proc", proc, "proc", 0, NULL)) die("proc");
        if (chdir(root) || syscall(SYS_pivot_root, ".", ".") || umount2(".", MNT_DETACH) || chdir("/"))
            die("pivot_root");
    }
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        char *argv[] = { "/bin/true", NULL };
        execv(argv[0], argv);
        _exit(127);
    }
    int status = 0;
    if (waitpid(child, &status, 0) < 0) die("waitpid");
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (write(report[1], &code, sizeof code) < 0) die("report");
    _exit(code);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: floor 1|2 SCRATCH_DIR\n"); return 2; }
    mode = atoi(argv[1]);
    scratch = argv[2];
    uid = getuid();
    gid = getgid();
    if (mode >= 2) {
        char root[4096];
        snprintf(root, sizeof root, "%s/root", scratch);
        mkdir(root, 0700);
    }
    if (pipe2(report, O_CLOEXEC)) die("pipe");
    pid_t pid = clone(init, stack + sizeof stack, CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, NULL);
    if (pid < 0) die("clone");
    close(report[1]);
    /* Like pinfold, return at the command's end, not after the namespaces' teardown. */
    int code = 125;
    if (read(report[0], &code, sizeof code) != sizeof code) return 125;
    return code;
}
