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
bin=target/x86_64-unknown-linux-gnu/release/pinfold
mkdir -p "$work/project"
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state"
# The default policy with the audit ledger off, to show what recording exec_start and
# exec_end (each fdatasync'ed) adds.
printf "extends = ['pinfold:default']\n[audit]\nenabled = false\n" > "$work/no-ledger.toml"
cd "$work/project"
"$OLDPWD/$bin" exec -- true   # warm the policy cache
"$OLDPWD/$bin" exec -c "$work/no-ledger.toml" -- true
hyperfine -N --warmup 50 --runs "${RUNS:-500}" --export-json "$OLDPWD/$out/exec.json" \
    -n "true" "/bin/true" \
    -n "pinfold-exec" "$OLDPWD/$bin exec -- true" \
    -n "pinfold-exec-no-ledger" "$OLDPWD/$bin exec -c $work/no-ledger.toml -- true" \
    -n "bwrap" "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent -- true" \
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
PY
