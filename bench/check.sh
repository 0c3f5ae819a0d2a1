#!/usr/bin/env bash
# Whole-process timing of `pinfold check` with a 1,000-rule policy, side by side with the
# floor (a bare Rust process, /bin/true) — one hyperfine run, medians and ratios.
#
#   bench/check.sh            # writes bench/results/check.json and prints a table
#   PRIO=fifo ROUNDS=20 RUNS=300 bench/check.sh   # at real-time priority, 20 rounds
#   OLD=/tmp/pinfold-old ROUNDS=5 RUNS=500 bench/check.sh
#                             # also times another build (say, of the commit before a change)
#                             # in the same hyperfine runs; ROUNDS repeats the whole run and
#                             # the table gives each command's median of the round medians
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
rustc -O -o "$work/bare.linked" bench/bare/main.rs
# The same empty program linked statically, like pinfold: the floor for a static binary.
rustc -O -C target-feature=+crt-static --target x86_64-unknown-linux-gnu -o "$work/bare-static.linked" bench/bare/main.rs
# Copies, like every binary timed here (see below).
cp "$work/bare.linked" "$work/bare"
cp "$work/bare-static.linked" "$work/bare-static"

# Timed from copies. The file the linker just wrote takes about 20 more page faults per
# `check` than a `cp` of the same bytes (how the linker's writes leave its pages in the page
# cache): timing target/ directly makes a fresh build look slower than an older, copied one
# (docs/performance.md, "Timing a copy").
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
cp target/dynamic/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold-dynamic"
sta=$work/pinfold
dyn=$work/pinfold-dynamic
python3 bench/gen_policy.py 1000 > "$work/big.toml"
export PINFOLD_CACHE_DIR="$work/cache"
# Every check is recorded in the audit ledger (on by default, as for users); into a
# temporary one here, not the user's.
export PINFOLD_STATE_DIR="$work/state"
# Fill the cache once (the first check after a policy edit pays the full load).
$dyn check -c "$work/big.toml" -- 'git status' >/dev/null
$sta check -c "$work/big.toml" -- 'git status' >/dev/null
old=()
if [ -n "${OLD:-}" ]; then
    cp "$OLD" "$work/pinfold-old"
    "$work/pinfold-old" check -c "$work/big.toml" -- 'git status' >/dev/null
    old=(-n "check-1000-old" "$work/pinfold-old check -c $work/big.toml -- 'git status'")
fi

# PRIO=fifo runs the measurement at real-time priority (chrt -f 50), as bench/exec.sh can, so
# that other processes on this 2-core VM do not decide the medians; say so with the numbers.
prio=()
[ "${PRIO:-}" = fifo ] && prio=(chrt -f 50)
uptime
rounds=${ROUNDS:-1}
for r in $(seq "$rounds"); do
json="$out/check.json"
[ "$rounds" -gt 1 ] && json="$out/check-$r.json"
"${prio[@]}" hyperfine -N --warmup 100 --runs "${RUNS:-2000}" --export-json "$json" \
    -n "true" "/bin/true" \
    -n "bare-rust" "$work/bare" \
    -n "bare-rust-static" "$work/bare-static" \
    -n "check-1000" "$sta check -c $work/big.toml -- 'git status'" \
    "${old[@]}" \
    -n "check-1000-dynamic" "$dyn check -c $work/big.toml -- 'git status'" \
    -n "check-default" "$sta check -- 'git status'" \
    -n "check-1000-nocache" "env PINFOLD_NO_CACHE=1 $sta check -c $work/big.toml -- 'git status'" \
    >/dev/null
done
uptime

python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
files = [f"{out}/check.json"] if rounds == 1 else [f"{out}/check-{r}.json" for r in range(1, rounds + 1)]
runs = [json.load(open(f))["results"] for f in files]
names = [r["command"] for r in runs[0]]
med = {n: [next(r["median"] for r in d if r["command"] == n) for d in runs] for n in names}
mean = {n: [next(r["mean"] for r in d if r["command"] == n) for d in runs] for n in names}
bare = statistics.median(med["bare-rust"])
print(f"{'command':24} {'median':>9} {'mean':>9} {'vs bare':>8}" + ("  round medians" if rounds > 1 else ""))
for n in names:
    m = statistics.median(med[n])
    rm = "  " + " ".join(f"{x*1e3:.3f}" for x in med[n]) if rounds > 1 else ""
    print(f"{n:24} {m*1e3:8.3f}ms {statistics.median(mean[n])*1e3:8.3f}ms {m/bare:7.2f}x{rm}")
PY
