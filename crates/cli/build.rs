//! Lays out the `pinfold` binary for a fast start: the functions that `check`, `hook` and
//! `exec` run (link-order.txt, made by bench/link-order.sh) go first in its text, so that a
//! short-lived process faults in a few windows of code instead of dozens spread over 7 MB.
//! Only the layout changes, never what runs: a name the file lists that no longer exists is
//! skipped. The option is lld's, the linker Rust uses by default on this target since 1.90;
//! set PINFOLD_NO_LINK_ORDER=1 to build with another linker.

fn main() {
    println!("cargo:rerun-if-changed=link-order.txt");
    println!("cargo:rerun-if-env-changed=PINFOLD_NO_LINK_ORDER");
    let target = std::env::var("TARGET").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu" || std::env::var_os("PINFOLD_NO_LINK_ORDER").is_some() {
        return;
    }
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else { return };
    let file = std::path::Path::new(&dir).join("link-order.txt");
    let Some(file) = file.to_str() else { return };
    // -Xlinker passes the next argument as it is (-Wl, would split a path at its commas).
    println!("cargo:rustc-link-arg-bin=pinfold=-Xlinker");
    println!("cargo:rustc-link-arg-bin=pinfold=--symbol-ordering-file={file}");
    println!("cargo:rustc-link-arg-bin=pinfold=-Xlinker");
    println!("cargo:rustc-link-arg-bin=pinfold=--no-warn-symbol-ordering");
}
