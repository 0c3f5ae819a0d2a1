//! What this kernel can enforce.

use serde::Serialize;

use crate::sys;

/// The kernel's answer for each layer.
#[derive(Debug, Clone, Serialize)]
pub struct Availability {
    /// Landlock ABI version, asked from the kernel (0: none or disabled).
    pub landlock_abi: i64,
    /// Unprivileged (or, as root, any) user namespaces can be created.
    pub user_namespaces: bool,
    /// Why not, when they cannot (sysctl, AppArmor).
    pub user_namespaces_why: Option<String>,
    /// seccomp filters are available.
    pub seccomp: bool,
    /// Network namespaces can be created inside a user namespace.
    pub network_namespaces: bool,
}

impl Availability {
    /// Every layer pinfold relies on is there.
    pub fn supported(&self) -> bool {
        self.landlock_abi >= 1 && self.user_namespaces && self.seccomp && self.network_namespaces
    }

    /// Missing layers, each with how to fix it.
    pub fn problems(&self) -> Vec<(&'static str, String, String)> {
        let mut v = Vec::new();
        if self.landlock_abi < 1 {
            v.push((
                "Landlock",
                "the kernel reports no Landlock ABI".to_string(),
                "use Linux 5.13 or newer with CONFIG_SECURITY_LANDLOCK=y and `landlock` in the lsm= boot parameter".to_string(),
            ));
        }
        if !self.user_namespaces {
            v.push((
                "user namespaces",
                self.user_namespaces_why.clone().unwrap_or_else(|| "creating one failed".into()),
                "set kernel.unprivileged_userns_clone=1 (Debian) or kernel.apparmor_restrict_unprivileged_userns=0 (Ubuntu), or user.max_user_namespaces > 0".to_string(),
            ));
        }
        if !self.seccomp {
            v.push(("seccomp", "the kernel has no seccomp filters".to_string(), "use a kernel built with CONFIG_SECCOMP_FILTER=y".to_string()));
        }
        if self.user_namespaces && !self.network_namespaces {
            v.push(("network namespaces", "creating one failed".to_string(), "use a kernel built with CONFIG_NET_NS=y".to_string()));
        }
        v
    }
}

/// Ask the kernel. Creates (and discards) a user and network namespace in a short-lived
/// child process, so the caller's own namespaces never change.
pub fn probe() -> Availability {
    let landlock_abi = sys::landlock_abi();
    let seccomp = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
        .map(|s| s.contains("errno"))
        .unwrap_or(false);
    let (user_namespaces, network_namespaces, why) = userns_probe();
    Availability { landlock_abi, user_namespaces, user_namespaces_why: why, seccomp, network_namespaces }
}

/// Try `unshare(CLONE_NEWUSER)` and then `unshare(CLONE_NEWNET)` in a child process running
/// our own helper (`/proc/self/exe __sandbox-helper probe`), which only makes the calls.
fn userns_probe() -> (bool, bool, Option<String>) {
    let out = std::process::Command::new("/proc/self/exe")
        .arg(crate::HELPER_ARG)
        .arg("probe")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) => {
            let s = String::from_utf8_lossy(&o.stdout);
            let user = s.contains("user=ok");
            let net = s.contains("net=ok");
            let why = s.lines().find_map(|l| l.strip_prefix("user=")).filter(|w| *w != "ok").map(|w| {
                let mut w = w.to_string();
                if std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").is_ok_and(|v| v.trim() == "1") {
                    w.push_str(" (AppArmor restricts unprivileged user namespaces)");
                }
                if std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone").is_ok_and(|v| v.trim() == "0") {
                    w.push_str(" (kernel.unprivileged_userns_clone is 0)");
                }
                w
            });
            (user, net, why)
        }
        Err(e) => (false, false, Some(format!("cannot run the probe: {e}"))),
    }
}

/// The probe's child side: report what unshare answers.
pub(crate) fn probe_child() -> i32 {
    match sys::unshare(libc::CLONE_NEWUSER) {
        Ok(()) => {
            println!("user=ok");
            match sys::unshare(libc::CLONE_NEWNET) {
                Ok(()) => println!("net=ok"),
                Err(e) => println!("net={e}"),
            }
        }
        Err(e) => println!("user={e}"),
    }
    0
}
