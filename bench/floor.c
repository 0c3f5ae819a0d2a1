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
#include "skeleton.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

static int mode, uid, gid, report[2];
static const char *scratch;
static char stack[1 << 16];

static int init(void *arg) {
    (void)arg;
    skeleton_namespaces(uid, gid);
    if (mode >= 2) skeleton_root(scratch);
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
