#!/usr/bin/env bash
# Whole-process timing of `pinfold exec -- true` beside bare `true` and bubblewrap doing the
# same confinement job, in one hyperfine run: medians, overheads and ratios.
#
#   bench/exec.sh          # writes bench/results/exec.json and prints a table
#
# Needs hyperfine and bubblewrap (apt-get install hyperfine bubblewrap) — bubblewrap only
# for this comparison; pinfold never runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q --release -p pinfold
# Timed from a copy, like bench/check.sh does: the file the linker just wrote takes more page
# faults per run than a copy of it, and a copy made an hour earlier more again once builds have
# pushed its pages out of the page cache (docs/benchmarks.md, session 4).
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
mkdir -p "$work/project"
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state"
# The default policy with the audit ledger off, to show what recording exec_start and
# exec_end (each fdatasync'ed) adds.
printf "extends = ['pinfold:default']\n[audit]\nenabled = false\n" > "$work/no-ledger.toml"
# The same with a host allowlist: the network through the egress proxy (issue 6: exec with an
# allowlist must start within 10 ms of one without). The proxy starts, the sandbox makes its
# listener and hands it out; `true` makes no connection.
cat > "$work/proxy.toml" <<'TOML'
extends = ['pinfold:default']
[audit]
enabled = false
[defaults]
sandbox = 'net'
[sandbox.net]
fs.write.allow = ['.']
network.allow = true
network.hosts = ['crates.io', '*.crates.io']
TOML
# The kernel's floor (bench/floor.c): the namespace and mount steps alone, in C.
gcc -O2 -static -o "$work/floor" bench/floor.c 2>/dev/null
mkdir -p "$work/scratch"
# The floor of a pre-warmed design (bench/warm.c): a skeleton sandbox made beforehand (in
# hyperfine's --prepare, untimed), claimed by a small client that runs `true` in it.
gcc -O2 -static -o "$work/warm" bench/warm.c 2>/dev/null
mkdir -p "$work/warm-dir"
# PRIO=fifo runs the whole measurement at real-time priority (chrt -f 50), so that other
# processes on this 2-core VM (compilers, say) do not decide the medians; say so with the
# numbers. Without it, the default scheduler.
prio=()
[ "${PRIO:-}" = fifo ] && prio=(chrt -f 50)
cd "$work/project"
"$bin" exec -- true   # warm the policy cache
"$bin" exec -c "$work/no-ledger.toml" -- true
"$bin" exec -c "$work/proxy.toml" -- true
"${prio[@]}" hyperfine -N --warmup 50 --runs "${RUNS:-500}" --export-json "$OLDPWD/$out/exec.json" \
    -n "true" --prepare /bin/true "/bin/true" \
    -n "pinfold-exec" --prepare /bin/true "$bin exec -- true" \
    -n "pinfold-exec-no-ledger" --prepare /bin/true "$bin exec -c $work/no-ledger.toml -- true" \
    -n "pinfold-exec-proxy-no-ledger" --prepare /bin/true "$bin exec -c $work/proxy.toml -- true" \
    -n "floor-namespaces" --prepare /bin/true "$work/floor 1 $work/scratch" \
    -n "floor-namespaces-root" --prepare /bin/true "$work/floor 2 $work/scratch" \
    -n "floor-warm" --prepare "$work/warm serve $work/warm-dir" "$work/warm run $work/warm-dir -- /bin/true" \
    -n "bwrap" --prepare /bin/true "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent -- true" \
    >/dev/null
cd "$OLDPWD"
python3 - "$out/exec.json" <<'PY'
import json, sys
d = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
t = d["true"]["median"]
print(f"{'command':24} {'median':>9} {'overhead':>9}")
for name, r in d.items():
    print(f"{name:24} {r['median']*1e3:8.3f}ms {(r['median']-t)*1e3:8.3f}ms")
p, b = d["pinfold-exec"]["median"] - t, d["bwrap"]["median"] - t
print(f"pinfold overhead / bwrap overhead = {p/b:.2f}")
f = d["floor-namespaces-root"]["median"] - t
print(f"kernel floor (namespaces + read-only root, C) overhead / bwrap overhead = {f/b:.2f}")
w = d["floor-warm"]["median"] - t
print(f"pre-warmed floor (skeleton made beforehand, C) overhead / bwrap overhead = {w/b:.2f}")
x, n = d["pinfold-exec-proxy-no-ledger"]["median"], d["pinfold-exec-no-ledger"]["median"]
print(f"allowlist (egress proxy) - network off, both without ledger = {(x-n)*1e3:.3f}ms")
PY
