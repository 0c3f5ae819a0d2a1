/* The kernel's floor for a *pre-warmed* sandbox: what a short-lived client pays to run one
 * command in a sandbox skeleton that was made ahead of time, beside bench/floor.c, which pays
 * for making a fresh one on every run.
 *
 *   warm serve DIR          listen on DIR/spare.sock (before entering any namespace), then
 *                           clone into new user + pid namespaces and build the same skeleton as
 *                           `floor 2`: ids mapped, mount, ipc, uts and network namespaces
 *                           unshared, / bound recursively and made read-only (mount_setattr,
 *                           AT_RECURSIVE), a fresh /proc, pivot_root. The skeleton's init
 *                           detaches (setsid, stdio to /dev/null) and sends a readiness byte;
 *                           `serve` returns once it has it, so the skeleton is then waiting in
 *                           accept(). It serves exactly one job and exits.
 *   warm run DIR -- CMD...  the client: connect to DIR/spare.sock, send its stdin, stdout and
 *                           stderr (SCM_RIGHTS) and CMD's argv, read the 4-byte exit status,
 *                           exit with it. 125 if no skeleton answers.
 *
 * The job: init checks the peer's uid (SO_PEERCRED) against its own, forks CMD with the
 * client's fds as 0/1/2 (inside the namespaces, after pivot_root, cwd /), waits for it and
 * writes the status (exit code, or 128 + signal) back on the connection. CMD gets init's
 * environment, not the client's; a real design would pass cwd and environment too.
 *
 * Build: gcc -O2 -static -o warm bench/warm.c (DIR must be writable; DIR/root is the
 * mount point of the new root, as SCRATCH/root is for floor).
 */
#include "skeleton.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#define MAX_ARGS 4096           /* bytes of NUL-separated argv a job may carry */

static int uid, gid, ready[2], listener;
static const char *dir;
static char stack[1 << 16];

static void sock_path(struct sockaddr_un *addr, const char *d) {
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (snprintf(addr->sun_path, sizeof addr->sun_path, "%s/spare.sock", d)
        >= (int)sizeof addr->sun_path) {
        fprintf(stderr, "warm: socket path too long: %s/spare.sock\n", d);
        exit(125);
    }
}

static int full_read(int fd, void *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        got += n;
    }
    return 0;
}

/* ---- serve: the skeleton's init, pid 1 of its namespaces ---- */

/* One job on the accepted connection; returns only on a malformed or foreign request. */
static void job(int conn) {
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) || (int)peer.uid != (int)getuid())
        return;                 /* another uid, as seen from this user namespace (where any
                                 * unmapped uid shows as 65534): refuse */

    /* Message: u32 length, then that many bytes of NUL-terminated argv strings; the first
     * segment carries the three fds. A stream socket may split it, so read the rest after. */
    char buf[MAX_ARGS + 1];
    uint32_t size = 0;
    union { struct cmsghdr h; char space[CMSG_SPACE(3 * sizeof(int))]; } control;
    struct iovec iov[2] = { { &size, sizeof size }, { buf, MAX_ARGS } };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2,
                          .msg_control = control.space, .msg_controllen = sizeof control.space };
    ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
    if (n < (ssize_t)sizeof size || size == 0 || size > MAX_ARGS) return;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS
        || c->cmsg_len != CMSG_LEN(3 * sizeof(int)))
        return;
    int fds[3];
    memcpy(fds, CMSG_DATA(c), sizeof fds);
    size_t have = n - sizeof size;
    if (have > size) return;
    if (have < size && full_read(conn, buf + have, size - have)) return;
    if (buf[size - 1] != '\0') return;
    buf[size] = '\0';

    char *argv[MAX_ARGS / 2 + 1];
    int argc = 0;
    for (char *p = buf; p < buf + size; p += strlen(p) + 1) argv[argc++] = p;
    argv[argc] = NULL;

    pid_t child = fork();
    if (child < 0) return;
    if (child == 0) {
        /* fds[] are >= 3 (0-2 are /dev/null here) and close-on-exec; dup2 clears that. */
        for (int i = 0; i < 3; i++)
            if (dup2(fds[i], i) < 0) _exit(126);
        execvp(argv[0], argv);
        fprintf(stderr, "warm: %s: %s\n", argv[0], strerror(errno));
        _exit(errno == ENOENT ? 127 : 126);
    }
    for (int i = 0; i < 3; i++) close(fds[i]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (write(conn, &code, sizeof code) < 0) return;
}

static int init(void *arg) {
    (void)arg;
    close(ready[0]);
    /* Detach: a session of its own, stdin and stdout to /dev/null now; stderr too, once
     * the skeleton is built, so that setup errors still reach the `serve` caller. */
    if (setsid() < 0) die("setsid");
    int null = open("/dev/null", O_RDWR);
    if (null < 0 || dup2(null, 0) < 0 || dup2(null, 1) < 0) die("/dev/null");

    skeleton_namespaces(uid, gid);
    skeleton_root(dir);

    if (dup2(null, 2) < 0) die("/dev/null");
    if (null > 2) close(null);
    if (write(ready[1], "R", 1) != 1) _exit(125);
    close(ready[1]);

    int conn;
    while ((conn = accept4(listener, NULL, NULL, SOCK_CLOEXEC)) < 0)
        if (errno != EINTR) _exit(125);
    close(listener);            /* exactly one job: later clients get ECONNREFUSED */
    job(conn);
    _exit(0);
}

static int serve(void) {
    uid = getuid();
    gid = getgid();
    char root[4096];
    snprintf(root, sizeof root, "%s/root", dir);
    if (mkdir(root, 0700) && errno != EEXIST) die(root);

    struct sockaddr_un addr;
    sock_path(&addr, dir);
    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0) die("socket");
    unlink(addr.sun_path);      /* a previous skeleton's socket, long closed */
    /* Mode 0600: connect() needs write permission, so other uids (bar root) are stopped by
     * the kernel. SO_PEERCRED alone is not enough when the skeleton's uid is the overflow
     * uid (65534): inside the skeleton every unmapped uid reads as 65534 too. */
    mode_t mask = umask(077);
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr)) die(addr.sun_path);
    umask(mask);
    if (listen(listener, 1)) die("listen");

    if (pipe2(ready, O_CLOEXEC)) die("pipe");
    pid_t pid = clone(init, stack + sizeof stack, CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD, NULL);
    if (pid < 0) die("clone");
    close(ready[1]);
    close(listener);
    char byte;
    if (read(ready[0], &byte, 1) != 1) {
        fprintf(stderr, "warm: the skeleton failed before it was ready\n");
        return 125;
    }
    return 0;                   /* init lives on, reparented, waiting in accept() */
}

/* ---- run: the client ---- */

static int run(char **cmd, int count) {
    char buf[MAX_ARGS];
    uint32_t size = 0;
    for (int i = 0; i < count; i++) {
        size_t len = strlen(cmd[i]) + 1;
        if (size + len > MAX_ARGS) { fprintf(stderr, "warm: argv too long\n"); return 125; }
        memcpy(buf + size, cmd[i], len);
        size += len;
    }

    struct sockaddr_un addr;
    sock_path(&addr, dir);
    int conn = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (conn < 0) die("socket");
    if (connect(conn, (struct sockaddr *)&addr, sizeof addr)) {
        fprintf(stderr, "warm: no skeleton at %s: %s\n", addr.sun_path, strerror(errno));
        return 125;
    }
    /* Hand our fds only to a skeleton of our own uid. */
    struct ucred peer;
    socklen_t len = sizeof peer;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &peer, &len) || (int)peer.uid != (int)getuid()) {
        fprintf(stderr, "warm: %s belongs to another uid\n", addr.sun_path);
        return 125;
    }

    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = i;
        if (fcntl(i, F_GETFD) < 0 && (fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
            die("/dev/null");
    }
    union { struct cmsghdr h; char space[CMSG_SPACE(sizeof fds)]; } control;
    memset(&control, 0, sizeof control);
    struct iovec iov[2] = { { &size, sizeof size }, { buf, size } };
    struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2,
                          .msg_control = control.space, .msg_controllen = sizeof control.space };
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(c), fds, sizeof fds);
    ssize_t sent = sendmsg(conn, &msg, MSG_NOSIGNAL);
    if (sent < (ssize_t)sizeof size) die("sendmsg");
    /* Unix stream sockets take a message this small whole; finish it if not. */
    for (size_t off = sent; off < sizeof size + size;) {
        size_t at = off - sizeof size;
        ssize_t n = send(conn, buf + at, size - at, MSG_NOSIGNAL);
        if (n < 0) die("send");
        off += n;
    }

    int code;
    if (full_read(conn, &code, sizeof code)) {
        fprintf(stderr, "warm: the skeleton closed the connection without a status\n");
        return 125;
    }
    return code;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "serve")) {
        dir = argv[2];
        return serve();
    }
    if (argc >= 5 && !strcmp(argv[1], "run") && !strcmp(argv[3], "--")) {
        dir = argv[2];
        return run(argv + 4, argc - 4);
    }
    fprintf(stderr, "usage: warm serve DIR | warm run DIR -- CMD...\n");
    return 2;
}
