//! A network namespace of the test's own, for tests whose targets are not loopback.
//!
//! A test that proves a guard against the cloud metadata address, a private address or a
//! "public" one must not aim at the real ones: should the guard regress, its packets would go
//! to the machine's network or to the metadata service of the cloud it runs in. Instead the
//! test moves its thread into a fresh network namespace ([`TestNet::enter`]) whose only
//! interface is loopback, with [`ADDRESSES`] given to it, and starts its listeners there. What
//! the test (and every process and thread it starts from then on) sends to those addresses
//! reaches the test's own listeners and nothing else: the namespace has no other interface and
//! no route. A guard's proof is then positive: a control run without the guard reaches the
//! listener, the guarded run leaves it untouched.
//!
//! Only the calling thread moves (`unshare(CLONE_NEWNET)` acts on one thread); threads and
//! processes it starts afterwards inherit the namespace, so a tokio runtime built after
//! `enter` runs in it too. Dropping the [`TestNet`] moves the thread back. Needs
//! `CAP_SYS_ADMIN` (the test suites run as root) and the `ip` command (iproute2).
//!
//! `.ci/check-test-addresses` accepts these addresses only in this file and in files that
//! use it (`netns::`); everywhere else test code names loopback or reserved names.

use std::fs::File;
use std::marker::PhantomData;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::process::Command;

/// The cloud metadata address (AWS, GCP, Azure, OpenStack).
pub const METADATA: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// The name GCP gives it; the tests' own hosts file maps it to [`METADATA`].
pub const METADATA_NAME: &str = "metadata.google.internal";
/// The AWS IPv6 metadata address.
pub const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
/// A private (RFC 1918) address, as a LAN service would have.
pub const PRIVATE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);
/// A "public" address: TEST-NET-2 (RFC 5737), documentation only, never routed anywhere.
pub const PUBLIC: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);
/// Where a test runs its own DNS responder, also from TEST-NET-2.
pub const RESOLVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 53);

/// Every address [`TestNet::enter`] gives to the namespace's loopback interface.
pub const ADDRESSES: [IpAddr; 5] = [
    IpAddr::V4(METADATA),
    IpAddr::V6(METADATA_V6),
    IpAddr::V4(PRIVATE),
    IpAddr::V4(PUBLIC),
    IpAddr::V4(RESOLVER),
];

/// The calling thread's stay in a network namespace it made; see the module docs.
#[derive(Debug)]
pub struct TestNet {
    /// The namespace the thread came from, to go back to.
    home: File,
    /// The namespace's inode (`/proc/thread-self/ns/net`), for messages.
    pub inode: u64,
    /// Moving threads moves namespaces: this value stays on the thread that entered.
    _thread: PhantomData<*const ()>,
}

impl TestNet {
    /// Move the calling thread into a new network namespace: loopback up, [`ADDRESSES`] on it,
    /// no other interface, no route off it. Panics with the reason when any step fails.
    pub fn enter() -> TestNet {
        let home = File::open("/proc/thread-self/ns/net").expect("open /proc/thread-self/ns/net");
        let home_inode = home.metadata().expect("stat the network namespace").ino();
        sys::unshare_net().unwrap_or_else(|e| {
            panic!(
                "this test makes its own network namespace (unshare(CLONE_NEWNET)) and needs \
                 CAP_SYS_ADMIN: run it as root, as CI does: {e}"
            )
        });
        let net = TestNet {
            home,
            inode: std::fs::metadata("/proc/thread-self/ns/net")
                .expect("stat the new network namespace")
                .ino(),
            _thread: PhantomData,
        };
        assert_ne!(
            net.inode, home_inode,
            "unshare(CLONE_NEWNET) left the thread where it was"
        );
        ip(&["link", "set", "lo", "up"]);
        for a in ADDRESSES {
            let prefix = if a.is_ipv4() { 32 } else { 128 };
            ip(&["addr", "add", &format!("{a}/{prefix}"), "dev", "lo"]);
        }
        // Verify, don't trust: addresses on loopback only (a kernel with tunnel modules loaded
        // adds their fallback devices, down and without addresses, to every namespace), every
        // address there, and no default route.
        let addrs = ip(&["-o", "addr", "show"]);
        assert!(
            addrs
                .lines()
                .all(|l| l.split_whitespace().nth(1) == Some("lo")),
            "the test's network namespace must have addresses on loopback only:\n{addrs}"
        );
        for a in ADDRESSES {
            assert!(
                addrs.contains(&format!(" {a}/")),
                "{a} is not on the namespace's loopback:\n{addrs}"
            );
        }
        for family in ["-4", "-6"] {
            let routes = ip(&[family, "route", "show", "default"]);
            assert!(
                routes.trim().is_empty(),
                "a default route in the test's namespace: {routes}"
            );
        }
        net
    }
}

impl Drop for TestNet {
    fn drop(&mut self) {
        if let Err(e) = sys::setns_net(self.home.as_raw_fd()) {
            // The thread would stay in the test's namespace; the next test on it must not.
            if !std::thread::panicking() {
                panic!("cannot move the test thread back to its network namespace: {e}");
            }
        }
    }
}

/// `ip ARGS…` in the calling thread's namespace; its stdout, or a panic naming the command.
fn ip(args: &[&str]) -> String {
    let o = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run `ip {}` (iproute2 installed?): {e}", args.join(" ")));
    assert!(
        o.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The two system calls, one `unsafe` block each; neither touches memory of ours.
#[allow(unsafe_code)]
mod sys {
    use std::io;

    pub fn unshare_net() -> io::Result<()> {
        // SAFETY: unshare(2) takes only flags; CLONE_NEWNET changes the calling thread's
        // network namespace and nothing in this process's memory.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    pub fn setns_net(fd: i32) -> io::Result<()> {
        // SAFETY: `fd` is an open namespace file the caller owns for the duration of the call;
        // setns(2) only reads it.
        if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}
