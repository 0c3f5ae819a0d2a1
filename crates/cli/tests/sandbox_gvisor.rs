//! The adversarial suite of the process sandbox, run again with `pinfold exec
//! --backend=gvisor`: the same attacks, the same controls, the same look at the host
//! afterwards, each as root and as uid 65534 (runsc rootless, in pinfold's user namespace).
//! Cases that cannot apply to gVisor are listed at the end of this file, each with why.

use crate::support::User;
use crate::support::sandbox::on_backend;

/// `mod case { root(), nobody() }` running `topic::case` on gVisor.
macro_rules! on_gvisor {
    ($($topic:ident :: $case:ident),* $(,)?) => {$(
        mod $case {
            #[test]
            fn root() {
                super::on_backend("gvisor", || crate::$topic::$case(super::User::Root))
            }
            #[test]
            fn nobody() {
                super::on_backend("gvisor", || crate::$topic::$case(super::User::Nobody))
            }
        }
    )*};
}

on_gvisor!(
    // Writes: outside the roots, through links, the protected paths inside them.
    sandbox_writes::write_outside_roots,
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
    sandbox_writes::worktree_common_git_dir_protected,
    sandbox_writes::planted_git_file_names_no_writable_root,
    sandbox_writes::planted_commondir_names_no_writable_root,
    // Reads and secrets.
    sandbox_reads::read_secrets_direct,
    sandbox_reads::read_secrets_via_proc_paths,
    sandbox_reads::read_secrets_via_symlink,
    sandbox_reads::read_secrets_via_hardlink,
    sandbox_reads::read_secrets_via_inherited_fd,
    sandbox_reads::secrets_scrubbed_from_environment,
    // The kernel: privileges, namespaces, mounts, other processes.
    sandbox_kernel::privileges_no_new_privs_no_caps,
    sandbox_kernel::process_vm_writev_refused,
    sandbox_kernel::proc_mem_of_parent_and_host,
    sandbox_kernel::kill_host_pid,
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
    // Processes: nothing outlives the run, signals reach the command.
    sandbox_processes::no_orphans_after_exit,
    sandbox_processes::dies_with_parent,
    sandbox_processes::signals_forwarded,
    // The command line: exit statuses, stdin, the report.
    sandbox_exec::exit_status_passthrough,
    sandbox_exec::exit_127_for_missing_command,
    sandbox_exec::stdin_passthrough,
    sandbox_exec::report_json_written,
    sandbox_exec::flag_write_grants_a_path,
    sandbox_exec::flag_deny_write_and_deny_read,
    sandbox_exec::flag_cwd,
    // Ordinary work.
    sandbox_exec::work_git_commit_existing_repo,
    sandbox_exec::work_make,
    sandbox_exec::work_tmpdir_writable,
);

// Not run on gVisor, and why:
//
// - `sandbox_kernel::nested_user_namespace`, `mount_family_syscalls`, `setns_refused`: their
//   scripts count any answer but EPERM/ENOSYS as a call that reached the kernel, which on the
//   process backend means past the seccomp filter. Under gVisor every call reaches gVisor's
//   kernel by design and none reaches the host's: `unshare -U` succeeds in gVisor's own user
//   namespaces, `pivot_root` answers EINVAL and `setns` ENOTSUP before they look at
//   capabilities. What those cases guard, the host's mount tree and namespaces, the writes and
//   reads cases above check from the host.
// - `sandbox_kernel::io_uring_refused`, `ptrace_refused`, `tiocsti_injection`: the same; gVisor
//   answers these calls itself (ptrace of the sandbox's own processes works, inside gVisor).
//   `process_vm_writev_refused` and `proc_mem_of_parent_and_host` run: their targets are on the
//   host, which gVisor cannot see.
// - `sandbox_exec::work_python_pycache`: its script runs GNU `ls` on a named path, and Debian
//   12's runsc (release 20221219) answers `statx` with `AT_NO_AUTOMOUNT` with EINVAL, so GNU
//   `ls -l`, `stat` and `cp -a` fail on it (programs that call stat(2), Python and Rust among
//   them, work). docs/backends.md lists it.
// - `sandbox_writes::reexec_helper_confines_too`, `sandbox_kernel::missing_landlock_refuses_clearly`
//   and the like test the process backend's own machinery.

use crate::support::sandbox::Fx;
use crate::support::{Run, TIMEOUT, run_cmd};

/// Without runsc the gvisor backend refuses (125, what is missing, how to fix it) and runs
/// nothing: no fallback to the process backend.
fn no_runsc_no_run(u: User) {
    let mut fx = Fx::new(u, "no_runsc_no_run");
    fx.env.insert("PINFOLD_RUNSC".into(), fx.base.join("no-such-runsc").display().to_string());
    let argv = fx.sh_script("mark", "touch ran");
    let r = fx.exec(&["--backend=gvisor"], &argv);
    assert_eq!(r.code, Some(125), "{}", r.show());
    assert!(r.stderr.contains("the gvisor backend cannot run here") && r.stderr.contains("hint:"), "{}", r.show());
    assert!(!fx.proj.join("ran").exists(), "the command ran anyway");
    // With runsc found again (on PATH), the same call runs: the refusal was for want of it.
    fx.env.remove("PINFOLD_RUNSC");
    let r: Run = run_cmd(fx.cmd(&fx.exec_argv(&["--backend=gvisor"], &["true".into()])), "exec".into(), None, TIMEOUT);
    assert_eq!(r.code, Some(0), "runsc is installed on this machine: {}", r.show());
}

/// A preset naming an unknown backend is a configuration error at its line and column.
fn unknown_backend_in_a_preset(u: User) {
    let fx = Fx::new(u, "unknown_backend_in_a_preset");
    let policy = fx.base.join("bad.toml");
    fx.put(&policy, "[defaults]\naction = \"allow\"\nsandbox = \"s\"\n\n[sandbox.s]\nbackend = \"vmware\"\nfs.write.allow = [\".\"]\n");
    fx.own();
    let argv = vec![crate::support::pinfold_bin(), "exec".into(), "-c".into(), Fx::s(&policy), "--".into(), "true".into()];
    let r = run_cmd(fx.cmd(&argv), "exec".into(), None, TIMEOUT);
    assert_ne!(r.code, Some(0), "{}", r.show());
    assert!(r.stderr.contains("bad.toml:6:11") && r.stderr.contains("unknown backend `vmware`") && r.stderr.contains("process, gvisor"), "{}", r.show());
}

mod refusals {
    use super::*;
    #[test]
    fn no_runsc_no_run_root() {
        no_runsc_no_run(User::Root)
    }
    #[test]
    fn no_runsc_no_run_nobody() {
        no_runsc_no_run(User::Nobody)
    }
    #[test]
    fn unknown_backend_in_a_preset_root() {
        unknown_backend_in_a_preset(User::Root)
    }
}
