#!/usr/bin/env bash
# `pinfold serve` on loopback, side by side with `pinfold exec -- true` in the same run:
#
#   bench/serve.sh                 # latency of a governed `true` over REST against
#                                  # `pinfold exec -- true`, then 200 governed calls at once
#   SOAK=600 bench/serve.sh        # also 10 minutes of create/exec/delete with the server's RSS
#
# The REST side is timed by a client that keeps one connection (bench/serve.py): what a
# framework calling the server pays per call. `pinfold exec -- true` is timed by hyperfine in
# the same environment and policy (the embedded default, ledger on). The server runs with
# --rate 100000: the default 50 requests a second would turn the burst into 429s by design.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
cleanup() {
    [ -n "${server:-}" ] && kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
cargo build -q --release -p pinfold
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
mkdir -p "$work/home" "$work/project"
export HOME="$work/home" PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state" XDG_DATA_HOME="$work/data"
tok=$("$bin" serve token add bench --role agent 2>/dev/null)
"$bin" serve --listen 127.0.0.1:0 --rate 100000 > "$work/listen" 2> "$work/server.err" &
server=$!
for _ in $(seq 100); do grep -q listening "$work/listen" 2>/dev/null && break; sleep 0.05; done
url=$(sed -n 's/^listening on //p' "$work/listen")
sb=$(curl -s -X POST -H "Authorization: Bearer $tok" "$url/v1/sandboxes" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
ws=$(curl -s -H "Authorization: Bearer $tok" "$url/v1/sandboxes/$sb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workspace"])')
runs=${RUNS:-200}
rounds=${ROUNDS:-3}
echo "round,rest_median_ms,exec_median_ms,overhead_ms" > "$out/serve-latency.csv"
for r in $(seq "$rounds"); do
    rest=$(python3 bench/serve.py latency "$url" "$tok" "$sb" "$runs")
    (cd "$ws" && hyperfine -N -w 5 -r "$runs" --export-json "$work/exec.json" "$bin exec -- true" >/dev/null)
    em=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["results"][0]["median"]*1000, 3))' "$work/exec.json")
    rm=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["median_ms"])' "$rest")
    echo "$r,$rm,$em,$(python3 -c "print(round($rm-$em, 3))")" >> "$out/serve-latency.csv"
done
column -s, -t < "$out/serve-latency.csv"
python3 bench/serve.py burst "$url" "$tok" "$sb" 200 | tee "$out/serve-burst.json"
if [ -n "${SOAK:-}" ]; then
    python3 bench/serve.py soak "$url" "$tok" "$server" "$SOAK" | tee "$out/serve-soak.json"
fi
