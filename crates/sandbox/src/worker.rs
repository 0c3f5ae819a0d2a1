//! Run a piece of pinfold's own work in a forked process that cannot take its caller down.
//!
//! An agent's hook must always answer in the agent's protocol: a crash, an abort, an
//! exhausted stack or memory, or a hang in the judging code must never end the hook process
//! with a status the agent reads as "go ahead" (Claude Code runs the call on any exit status
//! but 0 and 2). [`run`] forks a worker that does the work with its standard output on a
//! pipe, under a memory limit, and waits for it until a deadline. The caller, a small guard,
//! sees how the worker ended ([`Ended`]) and passes its output on only when it finished.

use std::io;
use std::os::fd::AsRawFd;
use std::time::Instant;

use crate::sys;

/// What a worker may use.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// When the worker is killed if it has not ended.
    pub deadline: Instant,
    /// Its address-space limit in bytes (`RLIMIT_AS`): past it allocation fails, and a Rust
    /// allocation failure aborts the worker.
    pub memory: u64,
    /// The most standard output kept; more kills the worker.
    pub max_output: usize,
}

/// How a worker ended.
#[derive(Debug)]
pub enum Ended {
    /// It exited with `code`, having written `output` to its standard output.
    Exited { code: i32, output: Vec<u8> },
    /// A signal killed it (`SIGSEGV` for an overflowed stack, `SIGABRT` for an abort or a
    /// failed allocation, `SIGKILL` from outside).
    Signalled { signal: i32 },
    /// It had not ended by the deadline and was killed.
    TimedOut,
    /// It wrote more than [`Limits::max_output`] and was killed.
    TooMuchOutput,
}

/// Fork a worker that runs `work` with standard output on a pipe and exits with the status
/// `work` returns; wait for it within `limits`.
///
/// The caller must be single-threaded: the worker is a fork that goes on running Rust (it
/// does not exec), so no other thread may hold a lock at the moment of the fork. Standard
/// input and error are shared with the caller.
pub fn run(work: impl FnOnce() -> i32, limits: &Limits) -> io::Result<Ended> {
    // Whatever the caller's buffer holds is the caller's to write, not the worker's.
    {
        use std::io::Write;
        std::io::stdout().flush()?;
    }
    let (read_end, write_end) = sys::pipe()?;
    let pid = sys::fork()?;
    if pid == 0 {
        // The worker. Nothing here may return into the caller's code.
        drop(read_end);
        if sys::setrlimit(libc::RLIMIT_AS, limits.memory).is_err() || sys::dup2(write_end.as_raw_fd(), 1).is_err() {
            sys::exit_now(125);
        }
        drop(write_end);
        let code = work();
        use std::io::Write;
        let flushed = std::io::stdout().flush().is_ok();
        sys::exit_now(if flushed { code } else { 125 });
    }
    drop(write_end);
    let ended = watch(pid, &read_end, limits, true);
    if !matches!(ended, Ok(Ended::Exited { .. } | Ended::Signalled { .. })) {
        // Timed out, too much output, or the watch itself failed: the worker must not
        // outlive the answer.
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
    }
    ended
}

/// Read the worker's output and wait for it to end, until the deadline.
fn watch(pid: libc::pid_t, out: &std::os::fd::OwnedFd, limits: &Limits, use_pidfd: bool) -> io::Result<Ended> {
    // A pidfd says when the worker ends. Without one (a kernel before 5.3, or valgrind,
    // which does not know the call), the worker is asked every few milliseconds instead.
    let exited = match use_pidfd.then(|| sys::pidfd_open(pid)) {
        Some(Ok(fd)) => Some(fd),
        Some(Err(e)) if e.raw_os_error() != Some(libc::ENOSYS) => return Err(e),
        _ => None,
    };
    sys::set_nonblocking(out.as_raw_fd())?;
    let mut output = Vec::new();
    let mut open = true;
    loop {
        let left = limits.deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(Ended::TimedOut);
        }
        // Round up so that a wait never spins on a sub-millisecond remainder.
        let mut ms = left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
        let mut fds: Vec<i32> = Vec::with_capacity(2);
        if open {
            fds.push(out.as_raw_fd());
        }
        match &exited {
            Some(fd) => fds.push(fd.as_raw_fd()),
            None => ms = ms.min(5),
        }
        let ready = sys::poll_read(&fds, ms)?;
        if open && ready[0] {
            open = drain(out, &mut output)?;
            if output.len() > limits.max_output {
                return Ok(Ended::TooMuchOutput);
            }
        }
        let status = if exited.is_some() {
            if !ready[ready.len() - 1] {
                continue;
            }
            match sys::waitpid(pid, 0)? {
                Some((_, status)) => status,
                None => return Err(io::Error::other("the worker ended but waitpid reported nothing")),
            }
        } else {
            match sys::waitpid(pid, libc::WNOHANG)? {
                Some((_, status)) => status,
                None => continue,
            }
        };
        // Ended: what it wrote before is in the pipe (a process it left behind may hold the
        // write end open, so read what is there, not until end of file).
        drain(out, &mut output)?;
        if output.len() > limits.max_output {
            return Ok(Ended::TooMuchOutput);
        }
        return Ok(if libc::WIFEXITED(status) {
            Ended::Exited { code: libc::WEXITSTATUS(status), output }
        } else {
            Ended::Signalled { signal: libc::WTERMSIG(status) }
        });
    }
}

/// Read what the pipe holds now; `false` at end of file.
fn drain(fd: &std::os::fd::OwnedFd, into: &mut Vec<u8>) -> io::Result<bool> {
    use std::io::Read;
    let mut f = std::fs::File::from(fd.try_clone()?);
    let mut buf = [0u8; 64 * 1024];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => into.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Read standard input to its end, at most `max` bytes (`Ok(None)` past that), until
/// `deadline` (an error then): the guard's own read of an agent's payload.
pub fn read_stdin(max: usize, deadline: Instant) -> io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut data = Vec::new();
    let mut buf = [0u8; 64 * 1024];
    let mut stdin = std::io::stdin().lock();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "standard input did not end in time"));
        }
        let ms = left.as_millis().saturating_add(1).min(i32::MAX as u128) as i32;
        if !sys::poll_read(&[0], ms)?[0] {
            continue;
        }
        match stdin.read(&mut buf) {
            Ok(0) => return Ok(Some(data)),
            Ok(n) => {
                data.extend_from_slice(&buf[..n]);
                if data.len() > max {
                    return Ok(None);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits(secs: u64) -> Limits {
        Limits { deadline: Instant::now() + Duration::from_secs(secs), memory: 1 << 30, max_output: 1 << 20 }
    }

    #[test]
    fn output_and_status_pass_through() {
        let e = run(
            || {
                use std::io::Write;
                // Not `println!`: the test harness captures that per thread.
                std::io::stdout().write_all(b"answer\n").map_or(1, |()| 7)
            },
            &limits(10),
        )
        .unwrap();
        match e {
            Ended::Exited { code, output } => {
                assert_eq!(code, 7);
                assert_eq!(output, b"answer\n");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_crash_an_abort_and_a_hang_are_reported() {
        // A stack overflow: SIGSEGV in pinfold, which starts without std's handler; the test
        // harness has it, and it aborts.
        #[allow(unconditional_recursion)]
        fn deep(n: u64) -> u64 {
            let a = [n; 64];
            std::hint::black_box(&a);
            deep(n + 1) + a[3]
        }
        match run(|| deep(0) as i32, &limits(10)).unwrap() {
            Ended::Signalled { signal } => assert!(signal == libc::SIGSEGV || signal == libc::SIGABRT, "{signal}"),
            other => panic!("{other:?}"),
        }
        match run(|| std::process::abort(), &limits(10)).unwrap() {
            Ended::Signalled { signal } => assert_eq!(signal, libc::SIGABRT),
            other => panic!("{other:?}"),
        }
        match run(|| sys::kill(std::process::id() as i32, libc::SIGKILL).map_or(1, |()| 0), &limits(10)).unwrap() {
            Ended::Signalled { signal } => assert_eq!(signal, libc::SIGKILL),
            other => panic!("{other:?}"),
        }
        let short = Limits { deadline: Instant::now() + Duration::from_millis(300), ..limits(0) };
        let t = Instant::now();
        match run(
            || {
                std::thread::sleep(Duration::from_secs(30));
                0
            },
            &short,
        )
        .unwrap()
        {
            Ended::TimedOut => assert!(t.elapsed() < Duration::from_secs(5)),
            other => panic!("{other:?}"),
        }
    }

    /// Without a pidfd (valgrind answers ENOSYS) the worker is watched by polling.
    #[test]
    fn without_a_pidfd_the_worker_is_polled() {
        for (code, sleep_ms) in [(3, 0), (4, 50)] {
            let (read_end, write_end) = sys::pipe().unwrap();
            let pid = sys::fork().unwrap();
            if pid == 0 {
                drop(read_end);
                use std::io::Write;
                let mut f = std::fs::File::from(write_end);
                let _ = f.write_all(b"done");
                std::thread::sleep(Duration::from_millis(sleep_ms));
                sys::exit_now(code);
            }
            drop(write_end);
            match watch(pid, &read_end, &limits(10), false).unwrap() {
                Ended::Exited { code: c, output } => {
                    assert_eq!(c, code);
                    assert_eq!(output, b"done");
                }
                other => panic!("{other:?}"),
            }
        }
        let (read_end, write_end) = sys::pipe().unwrap();
        let pid = sys::fork().unwrap();
        if pid == 0 {
            drop(read_end);
            std::thread::sleep(Duration::from_secs(30));
            sys::exit_now(0);
        }
        drop(write_end);
        let short = Limits { deadline: Instant::now() + Duration::from_millis(200), ..limits(0) };
        assert!(matches!(watch(pid, &read_end, &short, false).unwrap(), Ended::TimedOut));
        let _ = sys::kill(pid, libc::SIGKILL);
        let _ = sys::waitpid(pid, 0);
    }

    #[test]
    fn memory_past_the_limit_ends_the_worker() {
        // Zeroed memory is mapped lazily: without the limit this would succeed untouched.
        let small = Limits { memory: 3 << 30, ..limits(30) };
        match run(
            || {
                let v: Vec<u8> = vec![0; 8 << 30];
                i32::from(v[v.len() - 1])
            },
            &small,
        )
        .unwrap()
        {
            Ended::Signalled { signal } => assert_eq!(signal, libc::SIGABRT),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn too_much_output_ends_the_worker() {
        let small = Limits { max_output: 1000, ..limits(30) };
        let e = run(
            || {
                use std::io::Write;
                let mut o = std::io::stdout().lock();
                loop {
                    if o.write_all(&[b'x'; 4096]).is_err() {
                        return 0;
                    }
                }
            },
            &small,
        )
        .unwrap();
        assert!(matches!(e, Ended::TooMuchOutput), "{e:?}");
    }
}
