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
export PINFOLD_CACHE_DIR="$work/cache"
cd "$work/project"
"$OLDPWD/$bin" exec -- true   # warm the policy cache
hyperfine -N --warmup 50 --runs "${RUNS:-500}" --export-json "$OLDPWD/$out/exec.json" \
    -n "true" "/bin/true" \
    -n "pinfold-exec" "$OLDPWD/$bin exec -- true" \
    -n "bwrap" "bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent -- true" \
    >/dev/null
cd "$OLDPWD"
python3 - "$out/exec.json" <<'PY'
import json, sys
d = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
t = d["true"]["median"]
print(f"{'command':14} {'median':>9} {'overhead':>9}")
for name, r in d.items():
    print(f"{name:14} {r['median']*1e3:8.3f}ms {(r['median']-t)*1e3:8.3f}ms")
p, b = d["pinfold-exec"]["median"] - t, d["bwrap"]["median"] - t
print(f"pinfold overhead / bwrap overhead = {p/b:.2f}")
PY
