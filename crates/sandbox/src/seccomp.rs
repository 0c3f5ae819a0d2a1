//! The seccomp layer: a deny-list of kernel surface a confined command never needs.
//!
//! Why a deny-list: an allow-list must know every system call every build tool makes
//! (compilers, JVMs, node, go…), and a missing entry breaks builds — the sandbox then gets
//! switched off. The list below instead removes what only attacks need: other processes'
//! memory, new namespaces and mounts, kernel keyrings, BPF, module loading, io_uring (which
//! bypasses seccomp for the operations it performs), terminal injection, setuid and setgid
//! bits on files, and — when the
//! network is off — every socket family but local ones. The filter is built from [`RULES`]
//! (reviewed data, a reason per entry) and a unit test runs the compiled program on sample
//! calls to check it matches the data.
//!
//! Architecture: the filter allows only native x86_64 calls. The x32 ABI (numbers with bit
//! 30 set, which would otherwise slip past every number below) and 32-bit `int 0x80` calls
//! (another numbering) get `ENOSYS`; 32-bit programs cannot run inside the sandbox.
//!
//! Why emitted here rather than by seccompiler (0.5.0, the pure-Rust compiler): it emits one
//! comparison per system call in a chain, not a search; one match action per filter (we
//! return `EPERM`, `ENOSYS` and `EAFNOSUPPORT`); `KILL_PROCESS` for a foreign architecture;
//! and it cannot test a range of numbers, so x32 calls could not be refused. The details are
//! in `docs/design/own-code.md`.

use serde::Serialize;

/// What a rule does when it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Action {
    /// Fail with this errno.
    Errno(i32),
}

/// When a rule matches, beyond the system call number.
#[derive(Debug, Clone, Copy)]
pub enum Cond {
    /// Always.
    Always,
    /// The low 32 bits of argument `arg` have any bit of `mask` set.
    AnyBit { arg: u8, mask: u32 },
    /// The low 32 bits of argument `arg` equal one of `values`.
    OneOf { arg: u8, values: &'static [u32] },
    /// The low 32 bits of argument `arg` equal none of `values`.
    NoneOf { arg: u8, values: &'static [u32] },
}

/// One reviewed entry of the filter.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub name: &'static str,
    pub nr: i64,
    pub cond: Cond,
    pub action: Action,
    /// Only when the network is off.
    pub network_off_only: bool,
    pub why: &'static str,
}

const EPERM: Action = Action::Errno(libc::EPERM);
const ENOSYS: Action = Action::Errno(libc::ENOSYS);

/// Namespace flags of `clone`/`unshare`.
const NS_FLAGS: u32 = (libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP
    | 0x80 /* CLONE_NEWTIME */) as u32;

/// S_ISUID | S_ISGID.
const SETID: u32 = 0o6000;
const SETID_MODE_ARG1: Cond = Cond::AnyBit { arg: 1, mask: SETID };
const SETID_MODE_ARG2: Cond = Cond::AnyBit { arg: 2, mask: SETID };

const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;

const fn always(name: &'static str, nr: i64, why: &'static str) -> Rule {
    Rule { name, nr, cond: Cond::Always, action: EPERM, network_off_only: false, why }
}

/// The filter, as data. Order does not matter: at most one rule per system call applies.
pub static RULES: &[Rule] = &[
    always("io_uring_setup", libc::SYS_io_uring_setup, "io_uring performs reads, writes and connects that seccomp never sees"),
    always("io_uring_enter", libc::SYS_io_uring_enter, "io_uring (see io_uring_setup)"),
    always("io_uring_register", libc::SYS_io_uring_register, "io_uring (see io_uring_setup)"),
    always("ptrace", libc::SYS_ptrace, "attaching to another process controls it entirely"),
    always("process_vm_readv", libc::SYS_process_vm_readv, "reads another process's memory"),
    always("process_vm_writev", libc::SYS_process_vm_writev, "writes another process's memory"),
    always("mount", libc::SYS_mount, "mounts could undo the read-only view of the file system"),
    always("umount2", libc::SYS_umount2, "unmounting would reveal what the sandbox hides"),
    always("pivot_root", libc::SYS_pivot_root, "changing the root could undo the sandbox's view"),
    always("open_tree", libc::SYS_open_tree, "new mount API: detached copies of mounts"),
    always("move_mount", libc::SYS_move_mount, "new mount API"),
    always("fsopen", libc::SYS_fsopen, "new mount API"),
    always("fsconfig", libc::SYS_fsconfig, "new mount API"),
    always("fsmount", libc::SYS_fsmount, "new mount API"),
    always("fspick", libc::SYS_fspick, "new mount API: reconfigures existing mounts"),
    always("mount_setattr", libc::SYS_mount_setattr, "could clear read-only on mounts"),
    always("setns", libc::SYS_setns, "joining another namespace leaves the sandbox's"),
    always("keyctl", libc::SYS_keyctl, "kernel keyrings hold credentials and are shared across the sandbox boundary"),
    always("add_key", libc::SYS_add_key, "kernel keyrings"),
    always("request_key", libc::SYS_request_key, "kernel keyrings"),
    always("bpf", libc::SYS_bpf, "BPF programs are kernel attack surface"),
    always("kexec_load", libc::SYS_kexec_load, "replaces the running kernel"),
    always("kexec_file_load", libc::SYS_kexec_file_load, "replaces the running kernel"),
    always("init_module", libc::SYS_init_module, "loads kernel code"),
    always("finit_module", libc::SYS_finit_module, "loads kernel code"),
    always("delete_module", libc::SYS_delete_module, "unloads kernel code"),
    always("userfaultfd", libc::SYS_userfaultfd, "a common ingredient of kernel exploits"),
    always("perf_event_open", libc::SYS_perf_event_open, "kernel attack surface and side channels"),
    always("open_by_handle_at", libc::SYS_open_by_handle_at, "opens files by handle, around the mount tree"),
    always("name_to_handle_at", libc::SYS_name_to_handle_at, "file handles (see open_by_handle_at)"),
    always("acct", libc::SYS_acct, "process accounting writes files as the kernel"),
    always("swapon", libc::SYS_swapon, "system administration"),
    always("swapoff", libc::SYS_swapoff, "system administration"),
    always("reboot", libc::SYS_reboot, "system administration"),
    always("quotactl", libc::SYS_quotactl, "system administration"),
    Rule { name: "clone3", nr: libc::SYS_clone3, cond: Cond::Always, action: ENOSYS, network_off_only: false,
        why: "its flags are in memory seccomp cannot read; ENOSYS makes libc fall back to clone, whose flags are checked" },
    Rule { name: "clone", nr: libc::SYS_clone, cond: Cond::AnyBit { arg: 0, mask: NS_FLAGS }, action: EPERM, network_off_only: false,
        why: "new namespaces (a new user namespace gives back every capability)" },
    Rule { name: "unshare", nr: libc::SYS_unshare, cond: Cond::AnyBit { arg: 0, mask: NS_FLAGS }, action: EPERM, network_off_only: false,
        why: "new namespaces" },
    Rule { name: "ioctl", nr: libc::SYS_ioctl, cond: Cond::OneOf { arg: 1, values: &[TIOCSTI, TIOCLINUX] }, action: EPERM, network_off_only: false,
        why: "TIOCSTI/TIOCLINUX push keystrokes into a terminal the user reads commands from" },
    // Setuid and setgid bits: a file the command owns may get them without any capability,
    // and one made by a sandbox run as root is a setuid-root program left on the host for
    // whoever runs it after (inside the sandbox no_new_privs already makes them inert).
    // Every call that sets a mode is refused when the mode has either bit.
    Rule { name: "chmod", nr: libc::SYS_chmod, cond: SETID_MODE_ARG1, action: EPERM, network_off_only: false,
        why: "setuid/setgid bits: a setuid program left in the project for the host to run" },
    Rule { name: "fchmod", nr: libc::SYS_fchmod, cond: SETID_MODE_ARG1, action: EPERM, network_off_only: false, why: "setuid/setgid bits (see chmod)" },
    Rule { name: "fchmodat", nr: libc::SYS_fchmodat, cond: SETID_MODE_ARG2, action: EPERM, network_off_only: false, why: "setuid/setgid bits (see chmod)" },
    Rule { name: "fchmodat2", nr: libc::SYS_fchmodat2, cond: SETID_MODE_ARG2, action: EPERM, network_off_only: false, why: "setuid/setgid bits (see chmod)" },
    Rule { name: "open", nr: libc::SYS_open, cond: SETID_MODE_ARG2, action: EPERM, network_off_only: false,
        why: "setuid/setgid bits in the mode a file is created with (see chmod)" },
    Rule { name: "openat", nr: libc::SYS_openat, cond: Cond::AnyBit { arg: 3, mask: SETID }, action: EPERM, network_off_only: false,
        why: "setuid/setgid bits in the mode a file is created with (see chmod)" },
    Rule { name: "creat", nr: libc::SYS_creat, cond: SETID_MODE_ARG1, action: EPERM, network_off_only: false,
        why: "setuid/setgid bits in the mode a file is created with (see chmod)" },
    Rule { name: "mknod", nr: libc::SYS_mknod, cond: SETID_MODE_ARG1, action: EPERM, network_off_only: false,
        why: "setuid/setgid bits in the mode a file is made with (see chmod)" },
    Rule { name: "mknodat", nr: libc::SYS_mknodat, cond: SETID_MODE_ARG2, action: EPERM, network_off_only: false,
        why: "setuid/setgid bits in the mode a file is made with (see chmod)" },
    Rule { name: "openat2", nr: libc::SYS_openat2, cond: Cond::Always, action: ENOSYS, network_off_only: false,
        why: "its mode is in memory seccomp cannot read; ENOSYS makes callers fall back to openat, whose mode is checked" },
    Rule { name: "socket", nr: libc::SYS_socket, cond: Cond::NoneOf { arg: 0, values: &[libc::AF_UNIX as u32, libc::AF_NETLINK as u32] }, action: Action::Errno(libc::EAFNOSUPPORT), network_off_only: true,
        why: "network off: only local sockets (unix; netlink, which sees only the sandbox's empty network namespace)" },
    Rule { name: "socketpair", nr: libc::SYS_socketpair, cond: Cond::NoneOf { arg: 0, values: &[libc::AF_UNIX as u32] }, action: Action::Errno(libc::EAFNOSUPPORT), network_off_only: true,
        why: "network off: local socket pairs only" },
];

// Classic BPF, as the kernel's seccomp expects it.
pub(crate) const BPF_LD_W_ABS: u16 = 0x20;
pub(crate) const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
pub(crate) const BPF_JSET_K: u16 = 0x45;
#[cfg(test)]
const BPF_JA: u16 = 0x05;
pub(crate) const BPF_RET_K: u16 = 0x06;

pub(crate) const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
pub(crate) const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_BIT: u32 = 0x4000_0000;

pub(crate) const OFF_NR: u32 = 0;
pub(crate) const OFF_ARCH: u32 = 4;
pub(crate) const fn off_arg_low(i: u8) -> u32 {
    16 + 8 * i as u32
}

pub(crate) fn ins(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

fn ret(a: Action) -> libc::sock_filter {
    let Action::Errno(e) = a;
    ins(BPF_RET_K, 0, 0, RET_ERRNO | (e as u32 & 0xffff))
}

/// Compile the rules that apply (all, or those for network-off too) into a BPF program.
///
/// After the architecture checks, the program is a binary search over the system call
/// numbers that have rules (`jge` splits), ending in short leaves that test each number and
/// its arguments: a call costs about log2(rules) comparisons rather than one per rule, and
/// the kernel's install-time emulation (which finds the numbers it may allow without running
/// the filter at all) walks as few instructions per number.
pub fn compile(network_off: bool) -> Vec<libc::sock_filter> {
    let mut p = vec![
        ins(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
        ins(BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
        ret(ENOSYS),
        ins(BPF_LD_W_ABS, 0, 0, OFF_NR),
        ins(BPF_JGE_K, 0, 1, X32_BIT),
        ret(ENOSYS),
    ];
    let mut rules: Vec<&Rule> = RULES.iter().filter(|r| network_off || !r.network_off_only).collect();
    rules.sort_by_key(|r| r.nr);
    p.extend(search(&rules));
    p
}

/// Rules a leaf tests one after the other; above this, the range is split in two.
const LEAF: usize = 3;

/// The search over `rules` (sorted by number, one rule per number), with the number loaded.
/// Every path ends in a `ret`; jumps are relative, so subtrees are placed as built.
fn search(rules: &[&Rule]) -> Vec<libc::sock_filter> {
    if rules.len() <= LEAF {
        let mut out = Vec::new();
        for r in rules {
            let block = check_args(r);
            out.push(ins(BPF_JEQ_K, 0, jump(block.len()), r.nr as u32));
            out.extend(block);
        }
        out.push(ins(BPF_RET_K, 0, 0, RET_ALLOW));
        return out;
    }
    let mid = rules.len() / 2;
    let low = search(&rules[..mid]);
    let high = search(&rules[mid..]);
    // nr >= the first number of the upper half: skip the lower half.
    let mut out = vec![ins(BPF_JGE_K, jump(low.len()), 0, rules[mid].nr as u32)];
    out.extend(low);
    out.extend(high);
    out
}

/// A relative jump: classic BPF has 8 bits for it.
fn jump(n: usize) -> u8 {
    u8::try_from(n).expect("the seccomp program's jumps fit in 8 bits")
}

/// What follows a matched number: the rule's action, or its argument test, each path ending
/// in a `ret`.
fn check_args(r: &Rule) -> Vec<libc::sock_filter> {
    let allow = ins(BPF_RET_K, 0, 0, RET_ALLOW);
    match r.cond {
        Cond::Always => vec![ret(r.action)],
        Cond::AnyBit { arg, mask } => {
            vec![ins(BPF_LD_W_ABS, 0, 0, off_arg_low(arg)), ins(BPF_JSET_K, 0, 1, mask), ret(r.action), allow]
        }
        Cond::OneOf { arg, values } => {
            // Equal to one: jump over the remaining checks and the allow, to the ret.
            let n = values.len();
            let mut b = vec![ins(BPF_LD_W_ABS, 0, 0, off_arg_low(arg))];
            b.extend(values.iter().enumerate().map(|(i, v)| ins(BPF_JEQ_K, jump(n - i), 0, *v)));
            b.push(allow);
            b.push(ret(r.action));
            b
        }
        Cond::NoneOf { arg, values } => {
            // Equal to one: allowed, jump over the remaining checks and the ret.
            let n = values.len();
            let mut b = vec![ins(BPF_LD_W_ABS, 0, 0, off_arg_low(arg))];
            b.extend(values.iter().enumerate().map(|(i, v)| ins(BPF_JEQ_K, jump(n - i), 0, *v)));
            b.push(ret(r.action));
            b.push(allow);
            b
        }
    }
}

/// Names of the rules in force, for the report.
pub fn rule_names(network_off: bool) -> Vec<&'static str> {
    RULES.iter().filter(|r| network_off || !r.network_off_only).map(|r| r.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions `compile` emits.
    fn run(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        run_counted(prog, arch, nr, args).0
    }

    /// The decision and how many instructions it took.
    fn run_counted(prog: &[libc::sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> (u32, usize) {
        let mut data = [0u8; 64];
        data[0..4].copy_from_slice(&nr.to_le_bytes());
        data[4..8].copy_from_slice(&arch.to_le_bytes());
        for (i, a) in args.iter().enumerate() {
            data[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        let mut a: u32 = 0;
        let mut pc = 0usize;
        let mut steps = 0;
        loop {
            let i = prog[pc];
            pc += 1;
            steps += 1;
            match i.code {
                BPF_LD_W_ABS => a = u32::from_le_bytes(data[i.k as usize..i.k as usize + 4].try_into().unwrap()),
                BPF_JEQ_K => pc += if a == i.k { i.jt } else { i.jf } as usize,
                BPF_JGE_K => pc += if a >= i.k { i.jt } else { i.jf } as usize,
                BPF_JSET_K => pc += if a & i.k != 0 { i.jt } else { i.jf } as usize,
                BPF_JA => pc += i.k as usize,
                BPF_RET_K => return (i.k, steps),
                c => panic!("unexpected opcode {c:#x}"),
            }
        }
    }

    /// The first compiler: a linear program, one test per rule in order. Kept as the
    /// reference the search layout must agree with.
    fn compile_linear(network_off: bool) -> Vec<libc::sock_filter> {
        let mut p = vec![
            ins(BPF_LD_W_ABS, 0, 0, OFF_ARCH),
            ins(BPF_JEQ_K, 1, 0, AUDIT_ARCH_X86_64),
            ret(ENOSYS),
            ins(BPF_LD_W_ABS, 0, 0, OFF_NR),
            ins(BPF_JGE_K, 0, 1, X32_BIT),
            ret(ENOSYS),
        ];
        for r in RULES.iter().filter(|r| network_off || !r.network_off_only) {
            let nr = r.nr as u32;
            match r.cond {
                Cond::Always => {
                    p.push(ins(BPF_JEQ_K, 0, 1, nr));
                    p.push(ret(r.action));
                }
                Cond::AnyBit { arg, mask } => {
                    // jeq nr ? next : skip 4 | ld arg | jset mask ? ret : reload | ret | ld nr
                    p.push(ins(BPF_JEQ_K, 0, 4, nr));
                    p.push(ins(BPF_LD_W_ABS, 0, 0, off_arg_low(arg)));
                    p.push(ins(BPF_JSET_K, 0, 1, mask));
                    p.push(ret(r.action));
                    p.push(ins(BPF_LD_W_ABS, 0, 0, OFF_NR));
                }
                Cond::OneOf { arg, values } => {
                    let n = values.len() as u8;
                    p.push(ins(BPF_JEQ_K, 0, n + 4, nr));
                    p.push(ins(BPF_LD_W_ABS, 0, 0, off_arg_low(arg)));
                    for (i, v) in values.iter().enumerate() {
                        // Equal: jump to the ret (past the remaining checks and the `ja`).
                        p.push(ins(BPF_JEQ_K, n - i as u8, 0, *v));
                    }
                    p.push(ins(BPF_JA, 0, 0, 1));
                    p.push(ret(r.action));
                    p.push(ins(BPF_LD_W_ABS, 0, 0, OFF_NR));
                }
                Cond::NoneOf { arg, values } => {
                    let n = values.len() as u8;
                    p.push(ins(BPF_JEQ_K, 0, n + 3, nr));
                    p.push(ins(BPF_LD_W_ABS, 0, 0, off_arg_low(arg)));
                    for (i, v) in values.iter().enumerate() {
                        // Equal: allowed, jump past the ret to the reload.
                        p.push(ins(BPF_JEQ_K, n - i as u8, 0, *v));
                    }
                    p.push(ret(r.action));
                    p.push(ins(BPF_LD_W_ABS, 0, 0, OFF_NR));
                }
            }
        }
        p.push(ins(BPF_RET_K, 0, 0, RET_ALLOW));
        p
    }

    fn errno(e: i32) -> u32 {
        RET_ERRNO | e as u32
    }

    #[test]
    fn the_program_matches_the_rules() {
        for net_off in [true, false] {
            let p = compile(net_off);
            let x = AUDIT_ARCH_X86_64;
            for r in RULES {
                let applies = net_off || !r.network_off_only;
                let Action::Errno(e) = r.action;
                let (hit, miss): ([u64; 6], [u64; 6]) = match r.cond {
                    Cond::Always => ([0; 6], [0; 6]),
                    Cond::AnyBit { arg, mask } => {
                        let mut h = [0; 6];
                        h[arg as usize] = u64::from(mask & mask.wrapping_neg());
                        (h, [0; 6])
                    }
                    Cond::OneOf { arg, values } => {
                        let mut h = [0; 6];
                        h[arg as usize] = u64::from(*values.last().unwrap());
                        let mut m = [0; 6];
                        m[arg as usize] = 0x1234;
                        (h, m)
                    }
                    Cond::NoneOf { arg, values } => {
                        let mut h = [0; 6];
                        h[arg as usize] = 2; // AF_INET, in no allow list here
                        let mut m = [0; 6];
                        m[arg as usize] = u64::from(values[0]);
                        (h, m)
                    }
                };
                let got = run(&p, x, r.nr as u32, hit);
                let want = if applies { errno(e) } else { RET_ALLOW };
                assert_eq!(got, want, "{} (network off: {net_off})", r.name);
                if !matches!(r.cond, Cond::Always) {
                    assert_eq!(run(&p, x, r.nr as u32, miss), RET_ALLOW, "{} should allow {:?}", r.name, miss);
                }
            }
            // Ordinary calls pass; high bits of an ioctl request do not hide TIOCSTI.
            for nr in [libc::SYS_read, libc::SYS_write, libc::SYS_openat, libc::SYS_execve, libc::SYS_connect] {
                assert_eq!(run(&p, x, nr as u32, [0; 6]), RET_ALLOW);
            }
            assert_eq!(run(&p, x, libc::SYS_ioctl as u32, [1, 0xffff_ffff_0000_5412, 0, 0, 0, 0]), errno(libc::EPERM));
            // x32 and foreign architectures get ENOSYS whatever the number.
            assert_eq!(run(&p, x, X32_BIT | libc::SYS_read as u32, [0; 6]), errno(libc::ENOSYS));
            assert_eq!(run(&p, 0x4000_0003 /* AUDIT_ARCH_I386 */, 0, [0; 6]), errno(libc::ENOSYS));
            // Namespaces through clone flags; a plain fork-like clone passes.
            assert_eq!(run(&p, x, libc::SYS_clone as u32, [libc::CLONE_NEWUSER as u64, 0, 0, 0, 0, 0]), errno(libc::EPERM));
            assert_eq!(run(&p, x, libc::SYS_clone as u32, [libc::SIGCHLD as u64, 0, 0, 0, 0, 0]), RET_ALLOW);
            // Modes: setgid alone and setuid with ordinary bits are refused; 0755 and a mode
            // whose setuid bit is only in the high half (not a mode the kernel reads) pass.
            let at = libc::AT_FDCWD as u32 as u64;
            assert_eq!(run(&p, x, libc::SYS_fchmodat as u32, [at, 0, 0o2755, 0, 0, 0]), errno(libc::EPERM));
            assert_eq!(run(&p, x, libc::SYS_openat as u32, [at, 0, (libc::O_CREAT | libc::O_WRONLY) as u64, 0o4755, 0, 0]), errno(libc::EPERM));
            assert_eq!(run(&p, x, libc::SYS_openat as u32, [at, 0, (libc::O_CREAT | libc::O_WRONLY) as u64, 0o755, 0, 0]), RET_ALLOW);
            assert_eq!(run(&p, x, libc::SYS_fchmod as u32, [3, 0o755, 0, 0, 0, 0]), RET_ALLOW);
            let unix = run(&p, x, libc::SYS_socket as u32, [libc::AF_UNIX as u64, 1, 0, 0, 0, 0]);
            assert_eq!(unix, RET_ALLOW);
            let inet6 = run(&p, x, libc::SYS_socket as u32, [libc::AF_INET6 as u64, 2, 0, 0, 0, 0]);
            assert_eq!(inet6, if net_off { errno(libc::EAFNOSUPPORT) } else { RET_ALLOW });
        }
    }

    /// The search layout decides exactly as the linear program did, for every system call
    /// number 0..=500 (and x32 and foreign-architecture ones), with argument values that
    /// hit and miss every conditional rule.
    #[test]
    fn the_search_decides_as_the_linear_program() {
        let mut values: Vec<u64> = vec![0, 1, 2, 3, 10, 16, 17, 0x1234, 0xffff_ffff, 0xffff_ffff_0000_0000, u64::MAX];
        for r in RULES {
            match r.cond {
                Cond::Always => {}
                Cond::AnyBit { mask, .. } => {
                    values.extend((0..32).map(|b| 1u64 << b));
                    values.push(u64::from(mask));
                    values.push(u64::from(!mask));
                    values.push(0xffff_ffff_0000_0000 | u64::from(mask));
                }
                Cond::OneOf { values: v, .. } | Cond::NoneOf { values: v, .. } => {
                    for x in v {
                        values.extend([u64::from(*x), u64::from(*x) + 1, u64::from(*x) - 1, 0xdead_0000_0000_0000 | u64::from(*x)]);
                    }
                }
            }
        }
        values.extend(0..=45); // every address family
        values.sort_unstable();
        values.dedup();
        let x = AUDIT_ARCH_X86_64;
        for net_off in [true, false] {
            let new = compile(net_off);
            let old = compile_linear(net_off);
            let mut calls = 0;
            for arch in [x, 0x4000_0003 /* i386 */, 0xc000_00b7 /* aarch64 */, 0] {
                for nr in (0..=500u32).chain([X32_BIT, X32_BIT | 1, X32_BIT | 16, X32_BIT | 41, u32::MAX, 0x8000_0000]) {
                    let plain = [0u64; 6];
                    assert_eq!(run(&new, arch, nr, plain), run(&old, arch, nr, plain), "nr {nr} arch {arch:#x} net_off {net_off}");
                    calls += 1;
                    if arch != x || !RULES.iter().any(|r| r.nr as u32 == nr && !matches!(r.cond, Cond::Always)) {
                        continue;
                    }
                    for slot in 0..6 {
                        for v in &values {
                            let mut args = [0x5555_5555_5555_5555u64; 6];
                            args[slot] = *v;
                            assert_eq!(run(&new, arch, nr, args), run(&old, arch, nr, args), "nr {nr} args {args:x?} net_off {net_off}");
                            calls += 1;
                        }
                    }
                }
            }
            assert!(calls > 4 * 500);
            // Far fewer instructions per call than the linear program's worst case.
            let worst = |p: &[libc::sock_filter]| (0..=500).map(|nr| run_counted(p, x, nr, [0; 6]).1).max().unwrap();
            let (w_new, w_old) = (worst(&new), worst(&old));
            assert!(w_new <= 20 && 2 * w_new < w_old, "at most {w_new} instructions per call, {w_old} before");
        }
    }

    #[test]
    fn one_rule_per_system_call() {
        let mut nrs: Vec<i64> = RULES.iter().map(|r| r.nr).collect();
        nrs.sort_unstable();
        let n = nrs.len();
        nrs.dedup();
        assert_eq!(nrs.len(), n, "the search layout assumes at most one rule per number");
    }

    #[test]
    fn jumps_stay_in_range() {
        let p = compile(true);
        for (i, ins) in p.iter().enumerate() {
            if matches!(ins.code, BPF_JEQ_K | BPF_JGE_K | BPF_JSET_K) {
                assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len());
            }
        }
        assert!(p.len() < 4096);
    }
}
