//! The adversarial suite of the process sandbox, run again with `pinfold exec
//! --backend=container`: the same attacks, the same controls, the same look at the host
//! afterwards, in the test image (the host's own bash, python3, coreutils, git, curl) on a
//! Podman service the tests start. As root: the engine's socket is root's, and whoever can
//! reach it is root (see docs/backends.md); an unprivileged user without it is refused.
//! Cases that cannot apply to a container are listed below, each with why. Then the
//! container's own guarantees: limits, the runtime, cleanup, refusals.

use std::time::{Duration, Instant};

use crate::support::container::{containers, engine, gvisor_engine, toolbox_image};
use crate::support::sandbox::{Fx, on_backend};
use crate::support::{Run, TIMEOUT, User, run_cmd};

/// `#[test] fn case()` running `topic::case` in a container: as root through root's engine,
/// and as uid 65534 through a rootless Podman of its own.
macro_rules! in_container {
    ($($topic:ident :: $case:ident),* $(,)?) => {$(
        mod $case {
            use super::*;
            #[test]
            fn root() {
                on_backend("container", || crate::$topic::$case(User::Root))
            }
            #[test]
            fn nobody() {
                on_backend("container", || crate::$topic::$case(User::Nobody))
            }
        }
    )*};
}

mod suite {
    use super::*;
    in_container!(
        // Writes: through links, the protected paths inside the roots.
        sandbox_writes::write_through_planted_symlink,
        sandbox_writes::write_through_hardlink_to_own_outside_file,
        sandbox_writes::git_dir_replaced_by_symlink_before_start,
        sandbox_writes::git_config_write,
        sandbox_writes::git_hooks_existing_write,
        sandbox_writes::git_hooks_new_file,
        sandbox_writes::pinfold_config_write,
        sandbox_writes::pinfold_config_new_default_preset,
        sandbox_writes::pinfold_config_new_under_working_dir,
        sandbox_writes::planted_policy_file_in_a_subdirectory,
        sandbox_writes::audit_ledger_out_of_reach,
        sandbox_writes::shell_rc_files_default_preset,
        sandbox_writes::deny_path_created_after_start,
        sandbox_writes::deny_glob_write,
        sandbox_writes::git_dir_rename,
        sandbox_writes::git_dir_delete,
        sandbox_writes::git_init_refused,
        // Reads and secrets.
        sandbox_reads::read_secrets_direct,
        sandbox_reads::read_secrets_via_proc_paths,
        sandbox_reads::read_secrets_via_symlink,
        sandbox_reads::read_secrets_via_hardlink,
        sandbox_reads::secrets_scrubbed_from_environment,
        // The kernel: privileges, other processes.
        sandbox_kernel::privileges_no_new_privs_no_caps,
        sandbox_kernel::process_vm_writev_refused,
        sandbox_kernel::kill_host_pid,
        sandbox_kernel::nested_user_namespace,
        sandbox_kernel::mount_family_syscalls,
        sandbox_kernel::setns_refused,
        // The network off.
        sandbox_network::net_curl_and_dev_tcp,
        sandbox_network::net_udp_sendto_and_ipv6,
        sandbox_network::net_dns_query,
        sandbox_network::abstract_unix_socket,
        sandbox_network::container_engine_sockets_hidden,
        // The network through the egress proxy: allowlist, records, credentials.
        egress_allowlist::allowed_host_is_forwarded_and_recorded,
        egress_allowlist::bypassing_the_proxy_reaches_nothing,
        egress_allowlist::udp_and_dns_reach_nothing,
        egress_credentials::credential_injected_only_for_the_endpoint,
        egress_credentials::credential_never_enters_the_sandbox,
        // Processes and the command line.
        sandbox_processes::no_orphans_after_exit,
        sandbox_exec::exit_status_passthrough,
        sandbox_exec::exit_127_for_missing_command,
        sandbox_exec::stdin_passthrough,
        sandbox_exec::report_json_written,
        sandbox_exec::flag_write_grants_a_path,
        sandbox_exec::flag_deny_write_and_deny_read,
        // Ordinary work.
        sandbox_exec::work_git_commit_existing_repo,
        sandbox_exec::work_tmpdir_writable,
    );
}

// Not run in a container, and why:
//
// - `sandbox_writes::write_outside_roots`: the fixture's HOME and outside directory lie under
//   /tmp, which a container has as its own tmpfs (and Podman adds one on /var/tmp), so the
//   writes it expects to fail succeed there and vanish with the container.
//   `writes_outside_the_roots_never_reach_the_host` checks what matters, the host.
// - `sandbox_reads::read_secrets_via_inherited_fd`: the command is started by the engine, not
//   by pinfold; no descriptor of pinfold's caller reaches it (stdio is relayed over the API).
// - `sandbox_processes::dies_with_parent`, `signals_forwarded`: covered for the container by
//   `a_killed_pinfold_leaves_no_container` and `signals_reach_the_command` below.
// - `sandbox_exec::flag_cwd`, `work_make`, `work_python_pycache`, `worktree_*`,
//   `planted_*_names_no_writable_root`: they run host programs or paths the test image does
//   not carry (make, a second work tree outside the project).
// - `sandbox_kernel::io_uring_refused`, `ptrace_refused`, `tiocsti_injection` and the
//   process backend's own machinery (`reexec_helper_confines_too`, Landlock probes): a
//   container's seccomp profile is the engine's, not pinfold's; what they guard, the host,
//   the writes and reads cases above check from the host.
// - `sandbox_kernel::proc_mem_of_parent_and_host`: the command's parent is the engine's init
//   inside the container (catatonit), as the command's uid, without capabilities, holding
//   nothing of pinfold's or the host's; its memory is readable as a process's own child's
//   would be. Host processes are out of sight (`kill_host_pid`: a pid namespace of its own).
// - As uid 65534: the engine's socket is root's here. `an_unprivileged_user_without_the_socket_is_refused`
//   checks the refusal.

/// The preset the container tests run under: the test policy's own, with backend and image.
fn container_policy(fx: &Fx, extra: &str) -> std::path::PathBuf {
    let p = fx.base.join("container.toml");
    fx.put(
        &p,
        &format!(
            "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n\n[sandbox.c]\nbackend = \"container\"\nimage = \"{}\"\nfs.write.allow = [\".\"]\n{extra}",
            toolbox_image()
        ),
    );
    fx.own();
    p
}

fn exec_with(fx: &Fx, policy: &std::path::Path, host: &str, argv: &[&str]) -> Run {
    let mut full = vec![crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(policy), "--".into()];
    full.extend(argv.iter().map(|s| s.to_string()));
    let mut c = fx.cmd(&full);
    c.env("DOCKER_HOST", host);
    run_cmd(c, full.join(" "), None, TIMEOUT)
}

/// `pids` holds: a fork bomb stops at the limit, the host is untouched, pinfold returns.
#[test]
fn a_fork_bomb_stops_at_pids() {
    let fx = Fx::new(User::Root, "a_fork_bomb_stops_at_pids");
    let policy = container_policy(&fx, "pids = 64\n");
    let bomb = "import os, time\nkids = 0\nwhile kids < 500:\n    try:\n        pid = os.fork()\n    except OSError as e:\n        print('refused after', kids, e.strerror); break\n    if pid == 0:\n        time.sleep(30); os._exit(0)\n    kids += 1\nprint('forked', kids)\n";
    let r = exec_with(&fx, &policy, &engine().host, &["python3", "-c", bomb]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let forked: u32 = r.stdout.split_whitespace().nth(2).and_then(|n| n.parse().ok()).unwrap_or(u32::MAX);
    assert!(r.stdout.starts_with("refused after") && forked < 64, "the limit did not hold: {}", r.show());
}

/// `cpus` becomes the container's CPU quota (a fraction too: the ledger records it as text).
#[test]
fn cpus_become_the_cpu_quota() {
    let fx = Fx::new(User::Root, "cpus_become_the_cpu_quota");
    let policy = container_policy(&fx, "cpus = 0.5\n");
    let r = exec_with(&fx, &policy, &engine().host, &["bash", "-c", "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let n: Vec<i64> = r.stdout.split_whitespace().filter_map(|x| x.parse().ok()).collect();
    assert!(n.len() == 2 && n[0] * 2 == n[1], "a quota of half the period: {}", r.show());
}

/// Writes outside the writable roots never reach the host: not the home, not /var/tmp, not
/// /etc, not a directory beside the project.
#[test]
fn writes_outside_the_roots_never_reach_the_host() {
    let fx = Fx::new(User::Root, "writes_outside_the_roots_never_reach_the_host");
    let policy = container_policy(&fx, "");
    let name = format!("pinfold-escape-{}", std::process::id());
    let targets = [fx.home.join(&name), fx.out.join(&name), std::path::PathBuf::from("/var/tmp").join(&name), std::path::PathBuf::from("/etc").join(&name)];
    let script = targets.iter().map(|t| format!("mkdir -p {0}; touch {1}", Fx::s(t.parent().unwrap()), Fx::s(t))).collect::<Vec<_>>().join(" 2>/dev/null; ");
    let r = exec_with(&fx, &policy, &engine().host, &["bash", "-c", &format!("{script} 2>/dev/null; echo done")]);
    assert!(r.stdout.contains("done"), "{}", r.show());
    for t in &targets {
        assert!(!t.exists(), "{} reached the host: {}", t.display(), r.show());
    }
    // The project is writable, and there it lands.
    let r = exec_with(&fx, &policy, &engine().host, &["bash", "-c", "echo kept > kept.txt"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(std::fs::read_to_string(fx.proj.join("kept.txt")).unwrap_or_default(), "kept\n");
}

/// A rootless engine on cgroup v1 (this machine) cannot hold `pids`, `memory` or `cpus`:
/// the run is refused, not run without them. Without limits the same user's run goes ahead.
#[test]
fn limits_a_rootless_engine_cannot_hold_are_refused() {
    let fx = Fx::new(User::Nobody, "limits_a_rootless_engine_cannot_hold_are_refused");
    let host = &crate::support::container::rootless_engine().host;
    // (The same image name as root's engine has, imported into this one.)
    crate::support::container::toolbox_image_for(User::Nobody);
    for limit in ["pids = 64\n", "memory = \"64MiB\"\n", "cpus = 0.5\n"] {
        let policy = container_policy(&fx, limit);
        let r = exec_with(&fx, &policy, host, &["bash", "-c", "touch ran"]);
        assert_eq!(r.code, Some(125), "{limit}: {}", r.show());
        assert!(r.stderr.contains("cannot enforce") && r.stderr.contains("hint:"), "{limit}: {}", r.show());
        assert!(!fx.proj.join("ran").exists(), "{limit}: the command ran without its limit");
    }
    let policy = container_policy(&fx, "");
    let r = exec_with(&fx, &policy, host, &["bash", "-c", "touch ran"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(fx.proj.join("ran").exists(), "{}", r.show());
}

/// `memory` holds: a process that grows past it is killed, and the run says so.
#[test]
fn memory_over_the_limit_is_killed_and_reported() {
    let fx = Fx::new(User::Root, "memory_over_the_limit_is_killed_and_reported");
    let policy = container_policy(&fx, "memory = \"32MiB\"\n");
    let report = fx.base.join("report.json");
    let mut full = vec![crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(&policy), "--report".into(), Fx::s(&report), "--".into()];
    full.extend(["python3", "-c", "x = bytearray(256 << 20); print('survived')"].iter().map(|s| s.to_string()));
    let mut c = fx.cmd(&full);
    c.env("DOCKER_HOST", &engine().host);
    let r = run_cmd(c, full.join(" "), None, TIMEOUT);
    assert_eq!(r.code, Some(137), "{}", r.show());
    assert!(!r.stdout.contains("survived"), "{}", r.show());
    assert!(r.stderr.contains("went over its memory limit (32 MiB)"), "{}", r.show());
    let text = std::fs::read_to_string(&report).expect("report");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    let c = if json["container"].is_object() { &json["container"] } else { &json["sandbox"]["container"] };
    assert_eq!(c["memory"], 32 << 20, "{json:#}");
    assert!(c["memory_killed"].is_string(), "{json:#}");
    // The image ID is the one the engine resolved the name to.
    let id = std::process::Command::new("podman").args(["image", "inspect", "--format", "{{.Id}}", crate::support::container::toolbox_image()]).output().unwrap();
    let id = String::from_utf8_lossy(&id.stdout).trim().to_string();
    assert!(id.len() == 64 && c["image_id"].as_str().is_some_and(|i| i.trim_start_matches("sha256:") == id), "{id} {json:#}");
    // Under the limit the same program runs.
    let r = exec_with(&fx, &policy, &engine().host, &["python3", "-c", "x = bytearray(4 << 20); print('fits')"]);
    assert_eq!((r.code, r.stdout.trim()), (Some(0), "fits"), "{}", r.show());
}

/// A runtime the engine would not use is refused before anything runs (Podman 4.3's
/// Docker-compatible API takes the field and ignores it); on a service that runs runsc the
/// command runs under gVisor's kernel.
#[test]
fn the_runtime_is_the_one_asked_for_or_nothing_runs() {
    let fx = Fx::new(User::Root, "the_runtime_is_the_one_asked_for_or_nothing_runs");
    let policy = container_policy(&fx, "runtime = \"runsc\"\n");
    let r = exec_with(&fx, &policy, &engine().host, &["bash", "-c", "touch ran"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("would run the container with the runtime `runc`, not `runsc`") && r.stderr.contains("hint:"), "{}", r.show());
    assert!(!fx.proj.join("ran").exists(), "the command ran under the wrong runtime");
    let r = exec_with(&fx, &policy, &gvisor_engine().host, &["bash", "-c", "cat /proc/version; touch ran"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(!r.stdout.contains(&std::fs::read_to_string("/proc/version").unwrap()), "the host's kernel answered: {}", r.show());
    assert!(fx.proj.join("ran").exists(), "{}", r.show());
    // Too few pids for gVisor's own threads: refused with the number to give.
    let policy = container_policy(&fx, "runtime = \"runsc\"\npids = 32\n");
    let r = exec_with(&fx, &policy, &gvisor_engine().host, &["true"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("pids = 32 is too few for runsc"), "{}", r.show());
}

/// `pinfold exec -c POLICY -- bash -c SCRIPT` started in the background (stdio closed), once
/// the script has made `marker` in the project.
fn spawn_until_started(fx: &Fx, policy: &std::path::Path, script: &str, marker: &str) -> std::process::Child {
    let full = vec![crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(policy), "--".into(), "bash".into(), "-c".into(), script.to_string()];
    let mut c = fx.cmd(&full);
    c.env("DOCKER_HOST", &engine().host).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let child = c.spawn().expect("spawn pinfold");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !fx.proj.join(marker).exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

/// pinfold killed with SIGKILL mid-run: its reaper removes the container.
#[test]
fn a_killed_pinfold_leaves_no_container() {
    let fx = Fx::new(User::Root, "a_killed_pinfold_leaves_no_container");
    let policy = container_policy(&fx, "");
    let mut child = spawn_until_started(&fx, &policy, "touch started; sleep 300", "started");
    let prefix = format!("pinfold-{}-", child.id());
    assert_eq!(containers(engine(), &prefix).len(), 1, "no container while it runs");
    // The bind sources are staged while it runs (root's engine resolves paths in this mount
    // namespace): the project among them.
    let staged = stage_mounts(&fx);
    let proj = fx.proj.file_name().map(|n| format!("/{} ", n.to_string_lossy())).unwrap_or_default();
    assert!(staged.iter().any(|l| l.contains(&proj)), "the project is not staged: {staged:#?}");
    child.kill().expect("SIGKILL pinfold");
    child.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !containers(engine(), &prefix).is_empty() {
        assert!(Instant::now() < deadline, "the container outlived pinfold by 60 s: {:?}", containers(engine(), &prefix));
        std::thread::sleep(Duration::from_millis(200));
    }
    // Its staging helper saw pinfold's end of the socket close and removed its mounts.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !stage_mounts(&fx).is_empty() || !stage_dirs(&fx).is_empty() {
        assert!(Instant::now() < deadline, "staging mounts outlived pinfold: {:#?} {:?}", stage_mounts(&fx), stage_dirs(&fx));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(fx.proj.join("started").exists(), "the project lost its files");
    // The seccomp profile it handed Podman stays (no destructor ran); the next run removes it.
    let profiles = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(fx.run_dir.join("pinfold"))
            .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("seccomp-")).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    assert_eq!(profiles().len(), 1, "the control: a killed run leaves its profile: {:?}", profiles());
    let r = exec_with(&fx, &policy, &engine().host, &["true"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(profiles(), Vec::<String>::new(), "the next run removes the dead run's profile");
}

/// SIGTERM to pinfold reaches the command in the container, which can answer it.
#[test]
fn signals_reach_the_command() {
    let fx = Fx::new(User::Root, "signals_reach_the_command");
    let policy = container_policy(&fx, "");
    let mut child = spawn_until_started(&fx, &policy, "trap 'echo got-term > term.txt; exit 7' TERM; touch started; while :; do sleep 0.1; done", "started");
    assert!(std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(7), "{status:?}");
    assert_eq!(std::fs::read_to_string(fx.proj.join("term.txt")).unwrap_or_default().trim(), "got-term");
}

/// pinfold and its reaper killed together (a session or cgroup kill): the container stays,
/// and the next run's reaper removes it, since its pinfold is gone. (Found: the container
/// stayed up, and later runs left it.)
#[test]
fn a_container_whose_pinfold_and_reaper_died_is_removed_by_the_next_run() {
    let fx = Fx::new(User::Root, "a_container_whose_pinfold_and_reaper_died_is_removed_by_the_next_run");
    let policy = container_policy(&fx, "");
    let mut child = spawn_until_started(&fx, &policy, "touch started2; sleep 300", "started2");
    let prefix = format!("pinfold-{}-", child.id());
    // The reaper: pinfold's child running `container-reap`.
    let kids = std::fs::read_to_string(format!("/proc/{}/task/{}/children", child.id(), child.id())).unwrap_or_default();
    let reaper: Vec<i32> = kids
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("container-reap")))
        .collect();
    assert_eq!(reaper.len(), 1, "one reaper among pinfold's children {kids:?}");
    // And the helper holding the staged bind sources.
    let stager: Vec<i32> = kids
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|p| std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| String::from_utf8_lossy(&c).contains("container-stage")))
        .collect();
    assert_eq!(stager.len(), 1, "one staging helper among pinfold's children {kids:?}");
    std::process::Command::new("kill").args(["-KILL", &reaper[0].to_string(), &stager[0].to_string()]).status().unwrap();
    child.kill().expect("SIGKILL pinfold");
    child.wait().expect("reap");
    let left = stage_dirs(&fx);
    assert_eq!(left.len(), 1, "the control: the killed helper leaves its staging directory: {left:?}");
    // (No control here that the container outlives them: any run of the parallel suite may
    // already have swept it, as it should. Without the sweep it stayed: `sleep 300` ran on.)
    let r = exec_with(&fx, &policy, &engine().host, &["true"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    let deadline = Instant::now() + Duration::from_secs(60);
    while !containers(engine(), &prefix).is_empty() {
        assert!(Instant::now() < deadline, "the next run did not remove the dead run's container: {:?}", containers(engine(), &prefix));
        std::thread::sleep(Duration::from_millis(200));
    }
    // The next run's staging helper unbound and removed the dead one's (never emptying it:
    // the project is whole).
    assert_eq!(stage_dirs(&fx), Vec::<String>::new(), "the dead run's staging directory stayed");
    assert_eq!(stage_mounts(&fx), Vec::<String>::new(), "the dead run's staging mounts stayed");
    assert!(fx.proj.join("started2").exists(), "the project lost its files");
}

/// The run directory's staging directories (`stage-…`).
fn stage_dirs(fx: &Fx) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fx.run_dir.join("pinfold"))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("stage-")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// This mount namespace's mounts on a staging point of the case's run directory.
fn stage_mounts(fx: &Fx) -> Vec<String> {
    let at = format!(" {}/stage-", fx.run_dir.join("pinfold").display());
    std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default().lines().filter(|l| l.contains(&at)).map(str::to_string).collect()
}

/// The network is off or through the egress proxy. `on` is refused, and so is the proxy on
/// runsc (gVisor's network stack would not be the namespace that holds the proxy): nothing
/// runs.
#[test]
fn open_network_and_the_proxy_on_runsc_are_refused() {
    let fx = Fx::new(User::Root, "open_network_and_the_proxy_on_runsc_are_refused");
    for (net, host, want) in [
        ("network.allow = true\n", &engine().host, "unfiltered"),
        ("network.allow = true\nnetwork.hosts = [\"example.test\"]\nruntime = \"runsc\"\n", &gvisor_engine().host, "not reachable from a container on runsc"),
    ] {
        let policy = container_policy(&fx, net);
        let r = exec_with(&fx, &policy, host, &["bash", "-c", "touch ran"]);
        assert_eq!(r.code, Some(125), "{net}: {}", r.show());
        assert!(r.stderr.contains(want) && r.stderr.contains("hint:"), "{net}: {}", r.show());
        assert!(!fx.proj.join("ran").exists(), "{net}: the command ran");
    }
}

/// No image, an image the engine lacks, no engine: each a refusal with what to do.
#[test]
fn what_is_missing_is_said() {
    let fx = Fx::new(User::Root, "what_is_missing_is_said");
    let p = fx.base.join("noimage.toml");
    fx.put(&p, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n[sandbox.c]\nbackend = \"container\"\nfs.write.allow = [\".\"]\n");
    let r = exec_with(&fx, &p, &engine().host, &["true"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("no image") && r.stderr.contains("set `image`"), "{}", r.show());
    let p = fx.base.join("missing.toml");
    fx.put(&p, "[defaults]\naction = \"allow\"\nsandbox = \"c\"\n[sandbox.c]\nbackend = \"container\"\nimage = \"localhost/no-such-image:0\"\n");
    let r = exec_with(&fx, &p, &engine().host, &["true"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("the image `localhost/no-such-image:0` is not in") && r.stderr.contains("pinfold image import"), "{}", r.show());
    let policy = container_policy(&fx, "");
    let r = exec_with(&fx, &policy, &format!("unix://{}", fx.base.join("no.sock").display()), &["true"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("does not answer") || r.stderr.contains("cannot connect"), "{}", r.show());
    let r = exec_with(&fx, &policy, "tcp://127.0.0.1:2375", &["true"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("not a unix socket"), "{}", r.show());
}

/// uid 65534 cannot reach root's engine socket: refused, nothing runs, no other backend
/// stands in.
#[test]
fn an_unprivileged_user_without_the_socket_is_refused() {
    let fx = Fx::new(User::Nobody, "an_unprivileged_user_without_the_socket_is_refused");
    let policy = container_policy(&fx, "");
    let r = exec_with(&fx, &policy, &engine().host, &["bash", "-c", "touch ran"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("the container backend cannot run here"), "{}", r.show());
    assert!(!fx.proj.join("ran").exists());
}

/// An engine in whose mount namespace this user may not mount (root's engine reached by
/// another user, as through Docker's `docker` group): pinfold cannot pin the bind sources
/// where the engine resolves them, so it refuses and nothing runs; with `--allow-degraded`
/// the command runs and the report says what is missing.
#[test]
fn an_engine_pinfold_cannot_stage_for_is_refused_unless_degraded() {
    let fx = Fx::new(User::Nobody, "an_engine_pinfold_cannot_stage_for_is_refused_unless_degraded");
    let policy = container_policy(&fx, "");
    // A relay of this (root) test process's, which uid 65534 may reach: the process serving
    // the socket is root's, in the host's namespaces.
    let relay = fx.base.join("relay.sock");
    relay_to(&relay, std::path::Path::new(engine().host.trim_start_matches("unix://")));
    fx.own();
    let host = format!("unix://{}", relay.display());
    let r = exec_with(&fx, &policy, &host, &["bash", "-c", "touch ran"]);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("cannot pin the bind sources") && r.stderr.contains("--allow-degraded"), "{}", r.show());
    assert!(!fx.proj.join("ran").exists(), "the command ran");
    let report = fx.base.join("report.json");
    let mut full = vec![crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(&policy), "--allow-degraded".into(), "--report".into(), Fx::s(&report), "--".into()];
    full.extend(["bash", "-c", "touch ran"].map(String::from));
    let mut c = fx.cmd(&full);
    c.env("DOCKER_HOST", &host);
    let r = run_cmd(c, full.join(" "), None, TIMEOUT);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(fx.proj.join("ran").exists(), "the degraded run did not run");
    let text = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(text.contains("bind sources by path"), "the report does not say the sources went by path: {text}");
}

/// Accept on `at` and pass each connection through to the socket `to`, both ways.
fn relay_to(at: &std::path::Path, to: &std::path::Path) {
    use std::os::unix::net::{UnixListener, UnixStream};
    let l = UnixListener::bind(at).expect("bind the relay");
    let to = to.to_path_buf();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let Ok(up) = UnixStream::connect(&to) else { continue };
            let (mut a, mut b) = (c.try_clone().expect("clone"), up.try_clone().expect("clone"));
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut a, &mut b);
                let _ = b.shutdown(std::net::Shutdown::Write);
            });
            let (mut c, mut up) = (c, up);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut up, &mut c);
                let _ = c.shutdown(std::net::Shutdown::Write);
            });
        }
    });
}

// --- containers kept between runs (`pinfold exec --keep-container`, as `pinfold serve` passes) ---

fn kept_exec(fx: &Fx, policy: &std::path::Path, name: &str, report: &std::path::Path, argv: &[&str]) -> (Run, serde_json::Value) {
    let mut full = vec![crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(policy), "--keep-container".into(), name.into(), "--report".into(), Fx::s(report), "--".into()];
    full.extend(argv.iter().map(|s| s.to_string()));
    let mut c = fx.cmd(&full);
    c.env("DOCKER_HOST", &kept_engine(fx.user).host);
    let r = run_cmd(c, full.join(" "), None, TIMEOUT);
    let rep = std::fs::read_to_string(report).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(serde_json::Value::Null);
    (r, rep)
}

/// The engine a case's user reaches, with the test image imported.
fn kept_engine(u: User) -> &'static crate::support::container::Engine {
    crate::support::container::toolbox_image_for(u);
    crate::support::container::engine_for(u)
}

/// The containers kept under `name` (`pinfold-kept-NAME-…`) in root's engine.
fn kept_containers(name: &str) -> Vec<String> {
    containers(engine(), &format!("pinfold-kept-{name}-"))
}

/// Removes the containers kept under a name when the test ends, passed or failed.
struct Removed(String, User);

impl Drop for Removed {
    fn drop(&mut self) {
        let e = kept_engine(self.1);
        for c in containers(e, &format!("pinfold-kept-{}-", self.0)) {
            let _ = std::process::Command::new("podman").args(["--url", &e.host, "rm", "-f", &c]).output();
        }
    }
}

/// The second run enters the container the first made (its /tmp is still there), with every
/// guarantee a one-shot container has: no capabilities, no-new-privileges, the seccomp
/// profile (setuid bits refused), writes outside the roots never reaching the host, the
/// hidden path hidden. A run whose policy would make another container (another limit)
/// runs in a fresh one, which is kept in the old one's place.
#[test]
fn a_kept_container_is_entered_again_with_every_guarantee() {
    let fx = Fx::new(User::Root, "a_kept_container_is_entered_again_with_every_guarantee");
    std::fs::create_dir_all(fx.home.join(".ssh")).unwrap();
    std::fs::write(fx.home.join(".ssh/id_test"), "SECRET-KEY\n").unwrap();
    let policy = container_policy(&fx, &format!("fs.read.deny = [{:?}]\n", Fx::s(&fx.home.join(".ssh"))));
    let name = format!("every-{}", std::process::id());
    let _removed = Removed(name.clone(), fx.user);
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r1.json"), &["bash", "-c", "echo one > /tmp/left-by-one; echo first > first.txt"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!((rep["container"]["kept"].as_str(), rep["container"]["kept_made"].as_bool()), (Some(name.as_str()), Some(true)), "{rep}");
    assert_eq!(kept_containers(&name).len(), 1, "the container stays after the run");
    let escape = fx.home.join(format!("pinfold-kept-escape-{}", std::process::id()));
    let script = format!(
        "cat /tmp/left-by-one; grep -E 'NoNewPrivs|CapEff' /proc/self/status; cat {key} 2>&1 | head -1; \
         touch {escape} 2>/dev/null; touch s; chmod u+s s 2>/dev/null && echo SETUID; echo second > second.txt; exit 5",
        key = Fx::s(&fx.home.join(".ssh/id_test")),
        escape = Fx::s(&escape)
    );
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r2.json"), &["bash", "-c", &script]);
    assert_eq!(r.code, Some(5), "the command's own exit status: {}", r.show());
    assert_eq!((rep["container"]["kept"].as_str(), rep["container"].get("kept_made")), (Some(name.as_str()), None), "entered, not made: {rep}");
    assert!(r.stdout.starts_with("one\n"), "the first run's /tmp: {}", r.show());
    assert!(r.stdout.contains("NoNewPrivs:\t1") && r.stdout.contains("CapEff:\t0000000000000000"), "{}", r.show());
    assert!(!r.stdout.contains("SECRET-KEY") && !r.stdout.contains("SETUID"), "{}", r.show());
    // (The touch lands in the container's /tmp, a tmpfs; the host's home is untouched.)
    assert!(!escape.exists(), "a write reached the home directory");
    assert_eq!(std::fs::metadata(fx.proj.join("s")).map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o6000).unwrap_or(1), 0);
    assert_eq!(std::fs::read_to_string(fx.proj.join("second.txt")).unwrap_or_default(), "second\n");
    // Another limit: another container, made in the old one's place.
    let other = container_policy(&fx, "pids = 500\n");
    let (r, rep) = kept_exec(&fx, &other, &name, &fx.base.join("r3.json"), &["bash", "-c", "test -e /tmp/left-by-one && echo SAME || echo fresh"]);
    assert_eq!(r.stdout.trim(), "fresh", "{}", r.show());
    assert_eq!(rep["container"]["kept_made"].as_bool(), Some(true), "{rep}");
    assert_eq!(kept_containers(&name).len(), 1, "the old one is removed: {:?}", kept_containers(&name));
}

/// pinfold killed during a run in a kept container takes the container along (its reaper
/// removes it): the command is not left running where nobody watches. The next run makes a
/// fresh one. SIGTERM reaches a command in a kept container, as in a one-shot one.
#[test]
fn a_kept_run_killed_takes_its_container_and_signals_reach_it() {
    let fx = Fx::new(User::Root, "a_kept_run_killed_takes_its_container_and_signals_reach_it");
    let policy = container_policy(&fx, "");
    let name = format!("kill-{}", std::process::id());
    let _removed = Removed(name.clone(), fx.user);
    let spawn = |script: &str| {
        let argv = [crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(&policy), "--keep-container".into(), name.clone(), "--".into(), "bash".into(), "-c".into(), script.to_string()];
        let mut c = fx.cmd(&argv);
        c.env("DOCKER_HOST", &engine().host).stdin(std::process::Stdio::null()).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
        c.spawn().expect("spawn pinfold")
    };
    let wait_for = |f: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !fx.proj.join(f).exists() {
            assert!(Instant::now() < deadline, "the command never started");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let mut child = spawn("trap 'echo got-term > term.txt; exit 7' TERM; touch started; while :; do sleep 0.1; done");
    wait_for("started");
    assert!(std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(7), "{status:?}");
    assert_eq!(std::fs::read_to_string(fx.proj.join("term.txt")).unwrap_or_default().trim(), "got-term");
    assert_eq!(kept_containers(&name).len(), 1, "a run that ended keeps the container");
    let mut child = spawn("touch started2; sleep 300");
    wait_for("started2");
    child.kill().expect("SIGKILL pinfold");
    child.wait().expect("reap");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !kept_containers(&name).is_empty() {
        assert!(Instant::now() < deadline, "the kept container outlived its killed run by 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r.json"), &["true"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(rep["container"]["kept_made"].as_bool(), Some(true), "{rep}");
}

/// What a run leaves running in a kept container does not outlive the run: a process in the
/// background, one in a new session that ignores SIGTERM, one holding the run's stdin, one the
/// command made with `clone(CLONE_PARENT)` (the child of the engine's monitor, outside the
/// container: found by an outside attack, it stole the next command's stdin). Once
/// pinfold returns, none writes in the project (found: a leftover rewrote files after the
/// run's checks, and took the next command's stdin), and the next run sees none of them.
#[test]
fn nothing_a_kept_run_leaves_running_outlives_it_root() {
    nothing_a_kept_run_leaves_running_outlives_it(User::Root)
}

#[test]
fn nothing_a_kept_run_leaves_running_outlives_it_nobody() {
    nothing_a_kept_run_leaves_running_outlives_it(User::Nobody)
}

fn nothing_a_kept_run_leaves_running_outlives_it(u: User) {
    let fx = Fx::new(u, "nothing_a_kept_run_leaves_running_outlives_it");
    let policy = container_policy(&fx, "");
    let name = format!("left-{}", std::process::id());
    let _removed = Removed(name.clone(), fx.user);
    let leave = "(sleep 1.5; echo late > late.txt) & \
                 setsid bash -c 'trap \"\" TERM HUP; sleep 1.5; echo late > late2.txt' </dev/null >/dev/null 2>&1 & \
                 (cat > stolen.txt) & \
                 ( ( sleep 1.5; echo late > late3.txt ) & ) ; echo left; \
                 exec python3 -c 'import ctypes, os, time; r = ctypes.CDLL(None).syscall(56, 0x8000 | 17, 0, 0, 0, 0); \
                 r == 0 and (time.sleep(1.5), open(\"late4.txt\", \"w\").write(\"late\"), os._exit(0))'";
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r1.json"), &["bash", "-c", leave]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(rep["container"]["kept_made"].as_bool(), Some(true), "{rep}");
    std::thread::sleep(Duration::from_millis(2500));
    for f in ["late.txt", "late2.txt", "late3.txt", "late4.txt"] {
        assert!(!fx.proj.join(f).exists(), "{f}: a process of the first run wrote after it ended");
    }
    let (r, rep) = kept_exec(
        &fx,
        &policy,
        &name,
        &fx.base.join("r2.json"),
        &["bash", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"],
    );
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(rep["container"].get("kept_made").is_none(), "entered: {rep}");
    assert!(!r.stdout.contains("sleep") && !r.stdout.contains("cat") && !r.stdout.contains("python3"), "processes of the first run are still there:\n{}", r.stdout);
    assert!(r.stdout.contains("container-keep"), "the keeper is not listed (the listing proves nothing):\n{}", r.stdout);
    assert_eq!(std::fs::read_to_string(fx.proj.join("stolen.txt")).unwrap_or_default(), "", "the leftover read input");
}

/// A write-deny path that did not exist when the kept container was made stays unwritable
/// from the second run on (found: its placeholder was removed as the first run ended, and the
/// kernel unbound it in the container); a hidden path that did not exist stays hidden when
/// the user fills it in later; and when the user removes a placeholder on the host, the next
/// run does not enter the container that lost its bind: it makes another.
#[test]
fn deny_paths_that_did_not_exist_hold_for_the_kept_containers_life_root() {
    deny_paths_that_did_not_exist_hold_for_the_kept_containers_life(User::Root)
}

#[test]
fn deny_paths_that_did_not_exist_hold_for_the_kept_containers_life_nobody() {
    deny_paths_that_did_not_exist_hold_for_the_kept_containers_life(User::Nobody)
}

fn deny_paths_that_did_not_exist_hold_for_the_kept_containers_life(u: User) {
    let fx = Fx::new(u, "deny_paths_that_did_not_exist_hold_for_the_kept_containers_life");
    let policy = container_policy(&fx, "fs.write.deny = [\"later.txt\"]\nfs.read.deny = [\"later.env\"]\n");
    let name = format!("deny-{}", std::process::id());
    let _removed = Removed(name.clone(), fx.user);
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r1.json"), &["true"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(rep["container"]["kept_made"].as_bool(), Some(true), "{rep}");
    let attempt = "echo pwned > later.txt; rm -f later.txt; mv later.txt x 2>/dev/null; true";
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r2.json"), &["bash", "-c", attempt]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(rep["container"].get("kept_made").is_none(), "entered: {rep}");
    assert_eq!(std::fs::read_to_string(fx.proj.join("later.txt")).unwrap_or_default(), "", "the write-deny path was written: {}", r.show());
    // The user fills in the hidden file on the host (the policy now covers a file with
    // content: another container, or this one, but never the content).
    std::fs::write(fx.proj.join("later.env"), "SECRET=1\n").expect("write later.env");
    let (r, _) = kept_exec(&fx, &policy, &name, &fx.base.join("r3.json"), &["bash", "-c", "cat later.env; true"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert!(!r.stdout.contains("SECRET"), "the hidden file was read: {}", r.show());
    // The user removes the placeholder on the host: the kernel unbinds it in the container.
    std::fs::remove_file(fx.proj.join("later.txt")).expect("rm the placeholder");
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r4.json"), &["bash", "-c", "echo pwned > later.txt; true"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(rep["container"]["kept_made"].as_bool(), Some(true), "the container that lost its bind was entered: {rep}");
    assert!(rep["container"]["kept_replaced"].as_str().is_some_and(|w| w.contains("nothing is mounted at") && w.contains("later.txt")), "{rep}");
    assert_eq!(std::fs::read_to_string(fx.proj.join("later.txt")).unwrap_or_default(), "", "the write-deny path was written: {}", r.show());
}

/// A container made to look like a kept one (its name, its label) is never entered: a run
/// enters only the container whose ID its record holds.
#[test]
fn a_container_pinfold_did_not_make_is_not_entered() {
    let fx = Fx::new(User::Root, "a_container_pinfold_did_not_make_is_not_entered");
    let policy = container_policy(&fx, "");
    let name = format!("foreign-{}", std::process::id());
    let _removed = Removed(name.clone(), fx.user);
    let made = std::process::Command::new("podman")
        .args([
            "--url", &engine().host, "run", "-d", "--name", &format!("pinfold-kept-{name}-00000000"), "--label", &format!("dev.pinfold.kept={name}"),
            "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "-v", &format!("{}:/foreign", Fx::s(&fx.home)), toolbox_image(), "sleep", "300",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let (r, rep) = kept_exec(&fx, &policy, &name, &fx.base.join("r.json"), &["bash", "-c", "test -e /foreign && echo FOREIGN; test -e /.pinfold-keeper && echo ours"]);
    assert_eq!(r.code, Some(0), "{}", r.show());
    assert_eq!(r.stdout.trim(), "ours", "{}", r.show());
    assert_eq!(rep["container"]["kept_made"].as_bool(), Some(true), "{rep}");
}
