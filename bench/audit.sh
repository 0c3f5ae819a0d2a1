#!/usr/bin/env bash
# What recording in the audit ledger adds to `pinfold check` and `pinfold hook claude-code`:
# the same 1,000-rule policy with `[audit] enabled = false`, with the ledger on as by default
# (check and hook records written, not synced on their own: docs/ledger.md), and with every
# record fdatasync'ed (PINFOLD_LEDGER_FSYNC=1).
# One hyperfine run, side by side; medians and the difference to "off".
#
#   bench/audit.sh            # writes bench/results/audit.json and prints a table
#
# The hook reads its payload from a file through `sh -c '… < payload'`, and every variant
# starts through `env`, so those costs are in all of them and cancel out of the differences. The ledger grows by
# one record per run (a checkpoint every 1,000); an append reads only the log's tail.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build -q --release -p pinfold
bin=target/x86_64-unknown-linux-gnu/release/pinfold
python3 bench/gen_policy.py 1000 > "$work/on.toml"
{ cat "$work/on.toml"; printf '\n[audit]\nenabled = false\n'; } > "$work/off.toml"
mkdir -p "$work/proj"
# The hook finds its policy from the payload's cwd: one project per variant.
mkdir -p "$work/hook-on" "$work/hook-off" "$work/config-off/pinfold"
cp "$work/on.toml" "$work/hook-on/pinfold.toml"
cp "$work/on.toml" "$work/hook-off/pinfold.toml"
printf '[audit]\nenabled = false\n' > "$work/config-off/pinfold/config.toml"
payload() {
    printf '{"session_id":"bench","cwd":"%s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"git status"}}' "$1"
}
payload "$work/hook-on" > "$work/on.json"
payload "$work/hook-off" > "$work/off.json"
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state" XDG_STATE_HOME="$work/xdg-state"
export XDG_CONFIG_HOME="$work/config-on"
cd "$work/proj"
# Fill the policy cache once per policy.
for c in on off; do "$OLDPWD/$bin" check -c "$work/$c.toml" -- 'git status' >/dev/null || true; done
b="$OLDPWD/$bin"
cd "$OLDPWD"
# Every variant starts through `env` (an exec of its own), so only the ledger differs.
hook="sh -c '$b hook claude-code < $work"
hyperfine -N --warmup 50 --runs "${RUNS:-1000}" --export-json "$out/audit.json" \
    -n "check, ledger off" "env PINFOLD_BENCH=1 $b check -c $work/off.toml -- 'git status'" \
    -n "check, ledger on (default)" "env PINFOLD_BENCH=1 $b check -c $work/on.toml -- 'git status'" \
    -n "check, ledger on, FSYNC=1" "env PINFOLD_LEDGER_FSYNC=1 $b check -c $work/on.toml -- 'git status'" \
    -n "hook, ledger off" "env PINFOLD_BENCH=1 XDG_CONFIG_HOME=$work/config-off $hook/off.json'" \
    -n "hook, ledger on (default)" "env PINFOLD_BENCH=1 $hook/on.json'" \
    -n "hook, ledger on, FSYNC=1" "env PINFOLD_LEDGER_FSYNC=1 $hook/on.json'" \
    >/dev/null
"$b" audit verify >/dev/null

python3 - "$out/audit.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["results"]
m = {r["command"]: r["median"] for r in d}
print(f"{'variant':30} {'median':>9} {'vs off':>9}")
for r in d:
    base = m["check, ledger off"] if r["command"].startswith("check") else m["hook, ledger off"]
    print(f"{r['command']:30} {r['median']*1e3:8.3f}ms {(r['median']-base)*1e3:+8.3f}ms")
PY
