#!/usr/bin/env bash
# Whole-process timing of `pinfold exec -- true` beside bare `true` and bubblewrap doing the
# same confinement job, in one hyperfine run: medians, overheads and ratios.
#
#   bench/exec.sh          # writes bench/results/exec.json and prints a table
#   PRIO=fifo ROUNDS=10 RUNS=150 bench/exec.sh
#                          # ten hyperfine runs in a row; the table gives each command's
#                          # median of the round medians, and the ratios are taken per round
#                          # (against `true` and bwrap of the same round), then their median
#   OLD=/tmp/pinfold-old ROUNDS=10 RUNS=150 bench/exec.sh
#                          # also times another build (say, the commit before a change) in
#                          # the same rounds, as `pinfold-exec-old`
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
# pushed its pages out of the page cache (docs/performance.md, "Timing a copy").
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
mkdir -p "$work/project"
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state"
# The default policy with the audit ledger off, to show what recording exec_start (synced)
# and exec_end adds.
printf "extends = ['pinfold:default']\n[audit]\nenabled = false\n" > "$work/no-ledger.toml"
# The same with a host allowlist: the network through the egress proxy (a run with an
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
network.hosts = ['crates.io', '*.crates.io'] # address-literal: never connected (`true` makes no connection)
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
old=()
if [ -n "${OLD:-}" ]; then
    cp "$OLD" "$work/pinfold-old"
    "$work/pinfold-old" exec -- true
    old=(-n "pinfold-exec-old" --prepare /bin/true "$work/pinfold-old exec -- true")
fi
rounds=${ROUNDS:-1}
for r in $(seq "$rounds"); do
json="$OLDPWD/$out/exec.json"
[ "$rounds" -gt 1 ] && json="$OLDPWD/$out/exec-$r.json"
"${prio[@]}" hyperfine -N --warmup 50 --runs "${RUNS:-500}" --export-json "$json" \
    -n "true" --prepare /bin/true "/bin/true" \
    -n "pinfold-exec" --prepare /bin/true "$bin exec -- true" \
    "${old[@]}" \
    -n "pinfold-exec-no-ledger" --prepare /bin/true "$bin exec -c $work/no-ledger.toml -- true" \
    -n "pinfold-exec-proxy-no-ledger" --prepare /bin/true "$bin exec -c $work/proxy.toml -- true" \
    -n "floor-namespaces" --prepare /bin/true "$work/floor 1 $work/scratch" \
    -n "floor-namespaces-root" --prepare /bin/true "$work/floor 2 $work/scratch" \
    -n "floor-warm" --prepare "$work/warm serve $work/warm-dir" "$work/warm run $work/warm-dir -- /bin/true" \
    -n "bwrap" --prepare /bin/true "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent -- true" \
    >/dev/null
done
cd "$OLDPWD"
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
files = [f"{out}/exec.json"] if rounds == 1 else [f"{out}/exec-{r}.json" for r in range(1, rounds + 1)]
runs = [{x["command"]: x["median"] for x in json.load(open(f))["results"]} for f in files]
names = list(runs[0])
med = lambda n: statistics.median(r[n] for r in runs)
over = lambda n: statistics.median(r[n] - r["true"] for r in runs)
ratio = lambda n, to="bwrap": statistics.median((r[n] - r["true"]) / (r[to] - r["true"]) for r in runs)
print(f"{'command':30} {'median':>9} {'overhead':>9}" + ("  round medians" if rounds > 1 else ""))
for n in names:
    rm = "  " + " ".join(f"{r[n]*1e3:.3f}" for r in runs) if rounds > 1 else ""
    print(f"{n:30} {med(n)*1e3:8.3f}ms {over(n)*1e3:8.3f}ms{rm}")
print(f"pinfold overhead / bwrap overhead = {ratio('pinfold-exec'):.2f}")
if "pinfold-exec-old" in names:
    print(f"old build's overhead / bwrap overhead = {ratio('pinfold-exec-old'):.2f}")
    lower = sum(r["pinfold-exec"] < r["pinfold-exec-old"] for r in runs)
    print(f"pinfold-exec below pinfold-exec-old in {lower} of {rounds} rounds")
print(f"kernel floor (namespaces + read-only root, C) overhead / bwrap overhead = {ratio('floor-namespaces-root'):.2f}")
print(f"pre-warmed floor (skeleton made beforehand, C) overhead / bwrap overhead = {ratio('floor-warm'):.2f}")
x = statistics.median(r["pinfold-exec-proxy-no-ledger"] - r["pinfold-exec-no-ledger"] for r in runs)
print(f"allowlist (egress proxy) - network off, both without ledger = {x*1e3:.3f}ms")
PY
