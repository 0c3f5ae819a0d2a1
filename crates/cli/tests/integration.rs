//! Every test of the `pinfold` binary, in one test binary (linked once): each file below is a
//! topic, named by what its tests prove, and `support/` is the fixture they share. The programs
//! the tests run (attack scripts inside the sandbox, servers and helpers on the host) are files
//! too, in `attacks/` and `programs/`, read with `include_str!`.
//!
//! Run one topic with `cargo test -p pinfold --test integration TOPIC::` (say `sandbox_reads::`),
//! one case with its name (`write_outside_roots`). The `sandbox_*` and `egress_*` topics run as
//! root (CI does): they run each case as root and as uid 65534.

#[macro_use]
mod support;

// The command line: help, verdicts, errors, exit codes, the policy cache.
mod cli;
// `pinfold hook` for each agent, `init`, `doctor`, `import`.
mod agents;
mod hook;
// The hook and exec under hostile input: huge, endless, crashing, hanging, broken pipes.
mod robust;
mod redteam;
mod fuzzed;
// The audit ledger: what each command records, and `pinfold audit`.
mod record;
mod audit;
// `pinfold exec` against attacks, each with a control that shows the attack works without it.
mod sandbox_writes;
// `pinfold undo` after real runs.
mod undo;
mod sandbox_reads;
mod sandbox_kernel;
mod sandbox_processes;
mod sandbox_network;
mod sandbox_exec;
// The same attacks on the gVisor backend.
mod sandbox_gvisor;
mod sandbox_container;
mod image;
// What outside attacks on the backends found, on each backend.
mod backend_findings;
mod control_files;
// `pinfold exec` with a host allowlist: the egress proxy and the credential broker.
mod egress_allowlist;
mod egress_tools;
mod egress_credentials;
// `pinfold serve`: the governed server over real HTTP on loopback.
mod serve;
// MCP on the server: /mcp over HTTP, and `pinfold mcp` over stdio.
mod serve_mcp;
// The dashboard in a real headless Chromium.
mod serve_dashboard;
