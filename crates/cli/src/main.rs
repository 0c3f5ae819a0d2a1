//! The `pinfold` binary: the process's start-up, then [`pinfold_cli::run_main`].

// The process starts at the C `main` below, not through std's runtime (see there).
#![cfg_attr(not(test), no_main)]

/// The process's entry point, called by the C runtime: pinfold skips std's start-up, which
/// on every run reads and parses `/proc/self/maps` (glibc's `pthread_getattr_np`) to place a
/// guard page under the main thread's stack, and installs stack-overflow handlers with an
/// alternate signal stack: 41K instructions and a dozen system calls of a `check` that takes
/// about 0.5 ms above a bare process (docs/performance.md). What pinfold needs of that
/// start-up it does here: descriptors 0–2 open (on `/dev/null` when closed, so that no file
/// pinfold opens lands on them), SIGPIPE ignored (a closed pipe is an error to report, as with
/// std), and a panic ending the process with status 101, as std does. `std::env::args` works
/// without the runtime (glibc hands std the arguments through `.init_array`). What is gone: the
/// message std prints when the main thread overflows its stack (the guard page the kernel
/// keeps still stops it: the process dies of SIGSEGV).
#[cfg(not(test))]
#[allow(unsafe_code)]
#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    start_up();
    match std::panic::catch_unwind(pinfold_cli::run_main) {
        Ok(never) => match never {},
        Err(_) => 101,
    }
}

/// std's start-up steps that pinfold keeps (see [`main`]).
#[cfg(not(test))]
#[allow(unsafe_code)]
fn start_up() {
    let mut fds = [0, 1, 2].map(|fd| libc::pollfd { fd, events: 0, revents: 0 });
    // SAFETY: `fds` holds three pollfd entries for the duration of the call.
    if unsafe { libc::poll(fds.as_mut_ptr(), 3, 0) } >= 0 {
        for p in fds.iter().filter(|p| p.revents & libc::POLLNVAL != 0) {
            // SAFETY: a constant C string; the lowest free descriptor, `p.fd`, is the one
            // opened, and it is meant to stay open for the life of the process.
            let fd = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
            if fd != p.fd {
                std::process::abort();
            }
        }
    }
    // SAFETY: setting a signal's disposition to SIG_IGN runs no code of ours.
    let before = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    // A sandboxed command gets SIGPIPE as pinfold's caller left it, not pinfold's own.
    pinfold_sandbox::note_caller_sigpipe(before == libc::SIG_IGN);
}
