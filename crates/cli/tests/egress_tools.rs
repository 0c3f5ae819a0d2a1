//! Real clients through the egress proxy: `git ls-remote` over HTTPS (`CONNECT`), `pip
//! download` over HTTP, and `cargo fetch` from a local sparse registry (HTTP and HTTPS), each
//! against a server on loopback, each refused when its port is not listed. Fixture:
//! `support/egress.rs`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;


use crate::support::egress::*;
use crate::support::*;

root_only!(git_ls_remote_over_https_through_connect, pip_download_from_a_local_index);

// ---------------------------------------------------------------------------------------------
// Real tools: git over HTTPS (CONNECT), pip over HTTP
// ---------------------------------------------------------------------------------------------

/// `git ls-remote https://127.0.0.1:PORT/repo.git` inside, through `CONNECT`, against a
/// bare repository served by python3's http.server over TLS (a certificate for IP 127.0.0.1
/// from a CA made here with openssl, given to git as `GIT_SSL_CAINFO`). git prints the
/// branch's commit; the server logged the dumb-HTTP requests; the records are allowed
/// `connect`s. With the port not listed, git fails and the server logs nothing.
fn git_ls_remote_over_https_through_connect(u: User) {
    let w = World::new(u, "git_ls_remote_over_https_through_connect");
    let pki = test_pki(&w.base);

    // A bare repository with one commit, prepared for dumb HTTP.
    let www = w.base.join("www");
    let git = |args: &[&str]| {
        let o = Command::new("git")
            .args(args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &w.base)
            .envs([
                ("GIT_AUTHOR_NAME", "t"),
                ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
                ("GIT_COMMITTER_NAME", "t"),
                ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
            ])
            .output()
            .expect("run git");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let bare = www.join("repo.git");
    let work = w.base.join("work");
    git(&[
        "init",
        "-q",
        "--bare",
        "-b",
        "main",
        &bare.display().to_string(),
    ]);
    git(&["init", "-q", "-b", "main", &work.display().to_string()]);
    fs::write(work.join("README"), "over the egress proxy\n").expect("write");
    let wd = work.display().to_string();
    git(&["-C", &wd, "add", "README"]);
    git(&["-C", &wd, "commit", "-q", "-m", "initial"]);
    let head = git(&["-C", &wd, "rev-parse", "HEAD"]);
    git(&["-C", &wd, "push", "-q", &bare.display().to_string(), "main"]);
    git(&["-C", &bare.display().to_string(), "update-server-info"]);
    w.own();

    let srv = PyServer::start(
        &www,
        Some((&pki.join("srv.pem"), &pki.join("srv.key"))),
        w.base.join("git-server.log"),
    );
    let ca = pki.join("ca.pem").display().to_string();
    let url = format!("https://127.0.0.1:{}/repo.git", srv.port);
    let ls = argv(&["git", "ls-remote", &url]);

    let policy = w.policy(&[lo(srv.port)]);
    let r = w.exec_env(&policy, &ls, &[("GIT_SSL_CAINFO", &ca)]);
    let reqs = srv.requests();
    assert!(
        r.code == Some(0)
            && r.stdout.contains(&format!("{head}\trefs/heads/main"))
            && reqs.iter().any(|l| l.contains("GET /repo.git/info/refs")),
        "{}: git ls-remote over HTTPS through the proxy must list {head}\n  server log: {reqs:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        !egress.is_empty()
            && egress.iter().all(|e| e["outcome"] == "allowed"
                && e["protocol"] == "connect"
                && e["port"] == srv.port)
            && egress
                .iter()
                .all(|e| e["bytes_down"].as_u64().unwrap_or(0) > 0),
        "{}: expected allowed connect records with bytes: {egress:#?}",
        w.label()
    );

    let before = srv.requests().len();
    let policy = w.policy(&[lo(1)]);
    let r = w.exec_env(&policy, &ls, &[("GIT_SSL_CAINFO", &ca)]);
    let after = srv.requests();
    assert!(
        r.code != Some(0) && after.len() == before && r.stderr.contains("403"),
        "{}: with the port not listed, git must fail with the proxy's 403 and the server see nothing\n  server log: {after:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        !egress.is_empty()
            && egress
                .iter()
                .all(|e| e["outcome"] == "refused" && e["protocol"] == "connect"),
        "{}: {egress:#?}",
        w.label()
    );
}

/// `pip download --no-deps --index-url http://127.0.0.1:PORT/simple demo -d out` inside,
/// through the proxy (HTTP forward), against a python3 http.server serving a PEP 503 index with
/// a hand-made wheel. The wheel lands in the project, byte for byte; the server logged the
/// index and file requests; the records are allowed. With the port not listed, pip fails and
/// the server logs nothing.
fn pip_download_from_a_local_index(u: User) {
    let w = World::new(u, "pip_download_from_a_local_index");
    let idx = w.base.join("index");
    let wheel = idx.join("files/demo-1.0-py3-none-any.whl");
    fs::create_dir_all(wheel.parent().expect("parent")).expect("mkdir");
    fs::create_dir_all(idx.join("simple/demo")).expect("mkdir");
    let mk = w.base.join("mkwheel.py");
    fs::write(&mk, MKWHEEL_PY).expect("write");
    let o = Command::new(PY)
        .arg(&mk)
        .arg(&wheel)
        .output()
        .expect("run python3");
    assert!(
        o.status.success(),
        "make the wheel: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bytes = fs::read(&wheel).expect("read the wheel");
    let sha = {
        let o = Command::new("sha256sum")
            .arg(&wheel)
            .output()
            .expect("sha256sum");
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .expect("a digest")
            .to_string()
    };
    fs::write(
        idx.join("simple/demo/index.html"),
        format!("<!DOCTYPE html>\n<html><body><a href=\"/files/demo-1.0-py3-none-any.whl#sha256={sha}\">demo-1.0-py3-none-any.whl</a></body></html>\n"),
    )
    .expect("write the index");
    w.own();
    let srv = PyServer::start(&idx, None, w.base.join("pip-server.log"));

    let pip = argv(&[
        PY,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--no-cache-dir",
        "--disable-pip-version-check",
        "--index-url",
        &format!("http://127.0.0.1:{}/simple", srv.port),
        "demo",
        "-d",
        "out",
    ]);
    // No pip configuration from the host (find-links, certificates).
    let env = [("PIP_CONFIG_FILE", "/dev/null")];
    let policy = w.policy(&[lo(srv.port)]);
    let r = w.exec_env(&policy, &pip, &env);
    let got = fs::read(w.proj.join("out/demo-1.0-py3-none-any.whl")).ok();
    let reqs = srv.requests();
    assert!(
        r.code == Some(0)
            && got.as_deref() == Some(&bytes[..])
            && reqs.iter().any(|l| l.contains("GET /simple/demo/"))
            && reqs
                .iter()
                .any(|l| l.contains("GET /files/demo-1.0-py3-none-any.whl")),
        "{}: pip download through the proxy must save the wheel in the project\n  server log: {reqs:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        egress.len() >= 2
            && egress
                .iter()
                .all(|e| e["outcome"] == "allowed" && e["port"] == srv.port),
        "{}: expected allowed records for the index and the file: {egress:#?}",
        w.label()
    );

    fs::remove_dir_all(w.proj.join("out")).expect("remove out");
    let before = srv.requests().len();
    let policy = w.policy(&[lo(1)]);
    let mut pip_fast = pip.clone();
    pip_fast.splice(3..3, argv(&["--retries", "0", "--timeout", "3"]));
    let r = w.exec_env(&policy, &pip_fast, &env);
    let after = srv.requests();
    assert!(
        r.code != Some(0)
            && after.len() == before
            && !w.proj.join("out/demo-1.0-py3-none-any.whl").exists(),
        "{}: with the port not listed, pip must fail and the server see nothing\n  server log: {after:?}\n{}",
        w.label(),
        r.show()
    );
    let (egress, _) = w.run_records();
    assert!(
        !egress.is_empty() && egress.iter().all(|e| e["outcome"] == "refused"),
        "{}: {egress:#?}",
        w.label()
    );
}

// ---------------------------------------------------------------------------------------------
// A Rust client: cargo from a local sparse registry
// ---------------------------------------------------------------------------------------------

both_users!(cargo_fetch_from_a_local_sparse_registry);

/// A `.crate` (gzip'd tar of `NAME-VERS/Cargo.toml` and `NAME-VERS/src/lib.rs`), written to
/// `argv[1]`.
const MKCRATE_PY: &str = include_str!("programs/mkcrate.py");

/// Where a sparse index keeps a crate's entry (cargo's layout).
fn sparse_index_path(name: &str) -> String {
    let n = name.to_lowercase();
    match n.len() {
        1 => format!("1/{n}"),
        2 => format!("2/{n}"),
        3 => format!("3/{}/{n}", &n[..1]),
        _ => format!("{}/{}/{n}", &n[..2], &n[2..4]),
    }
}

/// The Rust toolchain as the case's user reaches it inside: the directory to put first on
/// `PATH` and the variables it needs. As root that is the `cargo` on the test's `PATH` (the
/// rustup proxy, given `RUSTUP_HOME`, since the world's `HOME` is not the real one). uid 65534
/// cannot use a toolchain under a home it cannot traverse (`/root` is 0700): then the real
/// `bin/cargo`, `bin/rustc` and `lib/*.so*` (all cargo needs; it runs `rustc -vV`) are hard
/// linked (copied across filesystems) into a root-owned 0755 directory outside the world,
/// which `World::own` would otherwise hand to uid 65534, originals and all.
struct Toolchain {
    path: String,
    env: Vec<(String, String)>,
    how: String,
    _links: Option<tempfile::TempDir>,
}

fn cargo_toolchain(u: User) -> Toolchain {
    let host_path = std::env::var_os("PATH").unwrap_or_default();
    let cargo = std::env::split_paths(&host_path)
        .map(|d| d.join("cargo"))
        .find(|f| f.is_file())
        .expect("cargo on the test's PATH");
    let dir = cargo.parent().expect("parent").to_path_buf();
    let out = |prog: &Path, args: &[&str]| {
        let o = Command::new(prog)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{} {args:?}: {e}", prog.display()));
        assert!(
            o.status.success(),
            "{} {args:?}: {}",
            prog.display(),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    let rustup = dir.join("rustup");
    let proxy = rustup.is_file() && fs::canonicalize(&cargo).ok() == fs::canonicalize(&rustup).ok();
    let real_bin = if proxy {
        PathBuf::from(out(&rustup, &["which", "cargo"]))
    } else {
        fs::canonicalize(&cargo).expect("canonicalize cargo")
    }
    .parent()
    .expect("parent")
    .to_path_buf();
    let reachable = |p: &Path| {
        p.ancestors()
            .all(|d| fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 != 0))
    };
    let s = |p: &Path| p.display().to_string();
    if u == User::Root && proxy {
        let mut env = vec![
            ("RUSTUP_HOME".to_string(), out(&rustup, &["show", "home"])),
            ("RUSTUP_AUTO_INSTALL".to_string(), "0".to_string()),
        ];
        if let Ok(t) = std::env::var("RUSTUP_TOOLCHAIN") {
            env.push(("RUSTUP_TOOLCHAIN".into(), t));
        }
        let how = format!("the rustup proxy {} ({env:?})", s(&cargo));
        return Toolchain {
            path: s(&dir),
            env,
            how,
            _links: None,
        };
    }
    if u == User::Root || reachable(&real_bin) {
        return Toolchain {
            path: s(&real_bin),
            env: Vec::new(),
            how: format!("the toolchain's own {}", s(&real_bin)),
            _links: None,
        };
    }
    let root = real_bin.parent().expect("the toolchain's root");
    let links = tempfile::Builder::new()
        .prefix("pinfold-egress-toolchain-")
        .tempdir_in("/tmp")
        .expect("temp dir under /tmp");
    let put = |from: &Path, to: &Path| {
        if fs::hard_link(from, to).is_err() {
            fs::copy(from, to).unwrap_or_else(|e| panic!("copy {} to {}: {e}", s(from), s(to)));
        }
    };
    fs::create_dir_all(links.path().join("bin")).expect("mkdir");
    fs::create_dir_all(links.path().join("lib")).expect("mkdir");
    for b in ["cargo", "rustc"] {
        put(&real_bin.join(b), &links.path().join("bin").join(b));
    }
    for e in fs::read_dir(root.join("lib"))
        .expect("read the toolchain's lib")
        .flatten()
    {
        let n = e.file_name();
        if n.to_string_lossy().contains(".so") && e.path().is_file() {
            put(&e.path(), &links.path().join("lib").join(&n));
        }
    }
    for d in ["", "bin", "lib"] {
        fs::set_permissions(links.path().join(d), fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    Toolchain {
        path: s(&links.path().join("bin")),
        env: Vec::new(),
        how: format!(
            "links in {} to {} (not reachable by uid 65534)",
            s(links.path()),
            s(root)
        ),
        _links: Some(links),
    }
}

/// A Rust client: `cargo fetch` inside, no `--offline`, for a project that
/// depends on `demo = { version = "1", registry = "local" }` with `.cargo/config.toml` naming
/// `sparse+http://127.0.0.1:PORT/index/` (a python3 http.server serving `config.json`, the
/// index entry at cargo's sparse path `de/mo/demo` with the `.crate`'s sha256, and the
/// `.crate` made here with python3's tarfile), then the same over `sparse+https://` (a TLS
/// server with the openssl-made test CA as `CARGO_HTTP_CAINFO`, so through `CONNECT`).
/// `CARGO_HOME` is in the project, fresh for each run. Each runs first as a control on the
/// host, which must fetch. Inside, the same toolchain answers (`cargo --version`), the
/// `.crate` lands byte for byte in `CARGO_HOME/registry/cache`, `Cargo.lock` holds its
/// checksum, the server logged the config, index and download requests, and the records are
/// `allowed` for `127.0.0.1:PORT`. With the port not listed, cargo fails (`403`) with nothing
/// cached, the server logs no request, and the records are `refused`.
fn cargo_fetch_from_a_local_sparse_registry(u: User) {
    let w = World::new(u, "cargo_fetch_from_a_local_sparse_registry");
    let tc = cargo_toolchain(u);
    let pki = test_pki(&w.base);
    let ca = pki.join("ca.pem").display().to_string();
    let (name, vers) = ("demo", "1.0.0");

    // The registry's files; `config.json` is written once the server has a port.
    let reg = |scheme: &str| -> (PathBuf, Vec<u8>, String) {
        let root = w.base.join(format!("registry-{scheme}"));
        let krate = root.join(format!("dl/{name}/{vers}/download"));
        fs::create_dir_all(krate.parent().expect("parent")).expect("mkdir");
        let mk = w.base.join("mkcrate.py");
        fs::write(&mk, MKCRATE_PY).expect("write");
        let o = Command::new(PY)
            .arg(&mk)
            .arg(&krate)
            .args([name, vers])
            .output()
            .expect("run python3");
        assert!(
            o.status.success(),
            "make the .crate: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let o = Command::new("sha256sum")
            .arg(&krate)
            .output()
            .expect("sha256sum");
        let sha = String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .expect("a digest")
            .to_string();
        let entry = root.join("index").join(sparse_index_path(name));
        fs::create_dir_all(entry.parent().expect("parent")).expect("mkdir");
        fs::write(
            &entry,
            format!(
                "{{\"name\":\"{name}\",\"vers\":\"{vers}\",\"deps\":[],\"cksum\":\"{sha}\",\"features\":{{}},\"yanked\":false}}\n"
            ),
        )
        .expect("write the index entry");
        (root, fs::read(&krate).expect("read the .crate"), sha)
    };

    w.put(
        &w.proj.join("Cargo.toml"),
        format!(
            "[package]\nname = \"user\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{name} = {{ version = \"1\", registry = \"local\" }}\n"
        )
        .as_bytes(),
    );
    w.put(&w.proj.join("src/lib.rs"), b"pub use demo::answer;\n");
    let script = w.bash(
        "fetch",
        "echo \"toolchain: $(cargo --version) / $(rustc --version)\"\ncargo fetch",
    );

    for scheme in ["http", "https"] {
        let (root, bytes, sha) = reg(scheme);
        w.own();
        let tls = (scheme == "https").then(|| (pki.join("srv.pem"), pki.join("srv.key")));
        let srv = PyServer::start(
            &root,
            tls.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
            w.base.join(format!("cargo-{scheme}-server.log")),
        );
        let base = format!("{scheme}://127.0.0.1:{}", srv.port);
        fs::write(
            root.join("index/config.json"),
            format!("{{\"dl\": \"{base}/dl/{{crate}}/{{version}}/download\", \"api\": null}}\n"),
        )
        .expect("write config.json");
        w.put(
            &w.proj.join(".cargo/config.toml"),
            format!("[registries.local]\nindex = \"sparse+{base}/index/\"\n").as_bytes(),
        );
        let label = format!("{} ({scheme}; cargo: {})", w.label(), tc.how);
        let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tc.path);
        // Each run: a fresh CARGO_HOME in the project and no Cargo.lock.
        let run_env = |home: &str, extra: &[(&str, &str)]| -> Vec<(String, String)> {
            let _ = fs::remove_file(w.proj.join("Cargo.lock"));
            let mut v: Vec<(String, String)> = tc.env.clone();
            v.push(("PATH".into(), path.clone()));
            v.push(("CARGO_HOME".into(), w.proj.join(home).display().to_string()));
            v.push(("CARGO_HTTP_CAINFO".into(), ca.clone()));
            v.extend(extra.iter().map(|(k, x)| (k.to_string(), x.to_string())));
            v
        };
        let cached = |home: &str| -> Vec<(PathBuf, Vec<u8>)> {
            let cache = w.proj.join(home).join("registry/cache");
            fs::read_dir(&cache)
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|d| {
                    let f = d.path().join(format!("{name}-{vers}.crate"));
                    fs::read(&f).ok().map(|b| (f, b))
                })
                .collect()
        };

        // The control, on the host without pinfold.
        let env = run_env(&format!("control-{scheme}-home"), &[]);
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let c = run_cmd(w.cmd(&script, &env_ref), script.join(" "), None, TIMEOUT);
        let toolchain_line = c
            .stdout
            .lines()
            .find(|l| l.starts_with("toolchain: cargo "))
            .map(str::to_string);
        assert!(
            c.code == Some(0)
                && toolchain_line.is_some()
                && cached(&format!("control-{scheme}-home")).len() == 1,
            "{label}: CONTROL FAILED: on the host cargo must fetch from the local registry\n  server log: {:?}\n{}",
            srv.requests(),
            c.show()
        );
        let toolchain_line = toolchain_line.expect("checked");

        // Inside, the port listed.
        let before = srv.requests().len();
        let home = format!("inside-{scheme}-home");
        let env = run_env(&home, &[]);
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let policy = w.policy(&[lo(srv.port)]);
        let r = w.exec_env(&policy, &script, &env_ref);
        let reqs = srv.requests()[before..].to_vec();
        let got = cached(&home);
        let lock = fs::read_to_string(w.proj.join("Cargo.lock")).unwrap_or_default();
        assert!(
            r.started()
                && r.code == Some(0)
                && r.stdout.lines().any(|l| l == toolchain_line)
                && got.len() == 1
                && got[0].1 == bytes
                && lock.contains(&format!("name = \"{name}\""))
                && lock.contains(&format!("checksum = \"{sha}\""))
                && reqs.iter().any(|l| l.contains("GET /index/config.json "))
                && reqs
                    .iter()
                    .any(|l| l.contains(&format!("GET /index/{} ", sparse_index_path(name))))
                && reqs
                    .iter()
                    .any(|l| l.contains(&format!("GET /dl/{name}/{vers}/download "))),
            "{label}: cargo fetch through the proxy must put the .crate in CARGO_HOME/registry/cache \
             (same toolchain as the control: {toolchain_line:?})\n  cached: {:?}\n  Cargo.lock: {lock:?}\n  server log: {reqs:?}\n{}",
            got.iter().map(|(p, b)| (p, b.len())).collect::<Vec<_>>(),
            r.show()
        );
        let (egress, _) = w.run_records();
        let protocol = if scheme == "http" { "http" } else { "connect" };
        let addr = lo(srv.port);
        assert!(
            !egress.is_empty()
                && egress.iter().all(|e| e["outcome"] == "allowed"
                    && e["protocol"] == protocol
                    && e["host"] == "127.0.0.1"
                    && e["port"] == srv.port
                    && e["addr"] == addr.as_str()
                    && e["bytes_down"].as_u64().unwrap_or(0) > 0),
            "{label}: expected allowed {protocol} records for {addr} with bytes: {egress:#?}",
        );

        // Inside, the port not listed.
        let before = srv.requests().len();
        let home = format!("blocked-{scheme}-home");
        let env = run_env(&home, &[("CARGO_NET_RETRY", "0")]);
        let env_ref: Vec<(&str, &str)> =
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let policy = w.policy(&[lo(1)]);
        let r = w.exec_env(&policy, &script, &env_ref);
        let after = srv.requests();
        assert!(
            r.started()
                && r.code != Some(0)
                && r.stderr.contains("403")
                && after.len() == before
                && cached(&home).is_empty(),
            "{label}: with the port not listed, cargo must fail with the proxy's 403, nothing \
             cached, and the server see nothing\n  server log: {after:?}\n{}",
            r.show()
        );
        let (egress, _) = w.run_records();
        assert!(
            !egress.is_empty() && egress.iter().all(|e| e["outcome"] == "refused"),
            "{label}: {egress:#?}"
        );
    }
}
