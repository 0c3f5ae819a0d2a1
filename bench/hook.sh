#!/usr/bin/env bash
# Hook round trip: `pinfold hook claude-code` reading a recorded PreToolUse payload, side by
# side with `pinfold check` of the same command and with the shell that feeds both (hyperfine
# 1.15 has no --input, so every entry runs under `sh -c` with a redirect, the same for all).
# Both record their decision in the audit ledger (one fdatasync'ed append each), as they do
# for a user; `hook-no-ledger` is the hook with `[audit] enabled = false`, to show what the
# record costs. The ledger, key, cache and configuration all live in a temporary directory:
# the run never touches the user's own ledger or settings.
#
#   RUNS=300 bench/hook.sh     # writes bench/results/hook.json and prints a table
#   OLD=/tmp/pinfold-old RUNS=300 bench/hook.sh   # also `hook-old`: another build, same runs
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q --release -p pinfold
# A fresh copy, as check.sh and exec.sh time (and as OLD is): page-cache state alike.
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
mkdir -p "$work/project"
cmd='cargo build && cargo test 2>&1 | tail -5'
python3 - "$work" "$cmd" <<'PY'
import json, sys
work, cmd = sys.argv[1], sys.argv[2]
payload = {"session_id": "bench", "transcript_path": "/tmp/t.jsonl", "cwd": work + "/project",
           "permission_mode": "default", "hook_event_name": "PreToolUse", "tool_name": "Bash",
           "tool_input": {"command": cmd, "description": "build and test"}, "tool_use_id": "toolu_1"}
open(work + "/payload.json", "w").write(json.dumps(payload))
open(work + "/cmd.txt", "w").write(cmd)
PY
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state/pinfold" \
    XDG_STATE_HOME="$work/state" XDG_CONFIG_HOME="$work/config"
unset PINFOLD_LEDGER_KEY PINFOLD_NO_CACHE PINFOLD_SESSION
mkdir -p "$work/no-ledger/pinfold"
printf '[audit]\nenabled = false\n' > "$work/no-ledger/pinfold/config.toml"
"$bin" hook claude-code < "$work/payload.json" >/dev/null   # warm the cache, make the keys
XDG_CONFIG_HOME="$work/no-ledger" "$bin" hook claude-code < "$work/payload.json" >/dev/null
old=()
if [ -n "${OLD:-}" ]; then
    cp "$OLD" "$work/pinfold-old"
    "$work/pinfold-old" hook claude-code < "$work/payload.json" >/dev/null
    old=(-n "hook-old" "$work/pinfold-old hook claude-code < $work/payload.json")
fi
before=$(wc -l < "$PINFOLD_STATE_DIR/ledger.jsonl")
hyperfine --warmup 50 --runs "${RUNS:-500}" --export-json "$out/hook.json" \
    -n "sh" "true < $work/payload.json" \
    "${old[@]}" \
    -n "check" "$bin check --cwd $work/project < $work/cmd.txt" \
    -n "hook-claude-code" "$bin hook claude-code < $work/payload.json" \
    -n "hook-no-ledger" "XDG_CONFIG_HOME=$work/no-ledger $bin hook claude-code < $work/payload.json" \
    >/dev/null
after=$(wc -l < "$PINFOLD_STATE_DIR/ledger.jsonl")
python3 - "$out/hook.json" <<'PY'
import json, sys
d = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
base = d["sh"]["median"]
print(f"{'command':18} {'median':>9} {'minus sh':>9}")
for n, r in d.items():
    print(f"{n:18} {r['median']*1e3:8.3f}ms {(r['median']-base)*1e3:8.3f}ms")
PY
echo "ledger records written during the run: $((after - before))"
echo "load: $(uptime)"
