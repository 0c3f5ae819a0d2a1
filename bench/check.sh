#!/usr/bin/env bash
# Whole-process timing of `pinfold check` with a 1,000-rule policy, side by side with the
# floor (a bare Rust process, /bin/true) — one hyperfine run, medians and ratios.
#
#   bench/check.sh            # writes bench/results/check.json and prints a table
#
# Needs hyperfine (apt-get install hyperfine). The release build is static (see
# .cargo/config.toml); a dynamically linked build is timed beside it for comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build -q --release -p pinfold
RUSTFLAGS="-C target-feature=-crt-static" cargo build -q --release -p pinfold --target-dir target/dynamic
rustc -O -o "$work/bare" bench/bare/main.rs
# The same empty program linked statically, like pinfold: the floor for a static binary.
rustc -O -C target-feature=+crt-static --target x86_64-unknown-linux-gnu -o "$work/bare-static" bench/bare/main.rs

sta=target/x86_64-unknown-linux-gnu/release/pinfold
dyn=target/dynamic/x86_64-unknown-linux-gnu/release/pinfold
python3 bench/gen_policy.py 1000 > "$work/big.toml"
export PINFOLD_CACHE_DIR="$work/cache"
# Every check is recorded in the audit ledger (on by default, as for users); into a
# temporary one here, not the user's.
export PINFOLD_STATE_DIR="$work/state"
# Fill the cache once (the first check after a policy edit pays the full load).
$dyn check -c "$work/big.toml" -- 'git status' >/dev/null
$sta check -c "$work/big.toml" -- 'git status' >/dev/null

hyperfine -N --warmup 100 --runs "${RUNS:-2000}" --export-json "$out/check.json" \
    -n "true" "/bin/true" \
    -n "bare-rust" "$work/bare" \
    -n "bare-rust-static" "$work/bare-static" \
    -n "check-1000" "$sta check -c $work/big.toml -- 'git status'" \
    -n "check-1000-dynamic" "$dyn check -c $work/big.toml -- 'git status'" \
    -n "check-default" "$sta check -- 'git status'" \
    -n "check-1000-nocache" "env PINFOLD_NO_CACHE=1 $sta check -c $work/big.toml -- 'git status'" \
    >/dev/null

python3 - "$out/check.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["results"]
base = {r["command"]: r["median"] for r in d}
bare = base["bare-rust"]
print(f"{'command':24} {'median':>9} {'mean':>9} {'vs bare':>8}")
for r in d:
    print(f"{r['command']:24} {r['median']*1e3:8.3f}ms {r['mean']*1e3:8.3f}ms {r['median']/bare:7.2f}x")
PY
