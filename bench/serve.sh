#!/usr/bin/env bash
# `pinfold serve` on loopback, side by side with `pinfold exec -- true` in the same run:
#
#   bench/serve.sh                 # latency of a governed `true` over REST against
#                                  # `pinfold exec -- true`, then 200 governed calls at once
#   ROUNDS=5 RUNS=200 bench/serve.sh
#   OLD=/tmp/pinfold-old bench/serve.sh
#                                  # also a server of another build, in the same rounds
#   SOAK=600 bench/serve.sh        # also 10 minutes of create/exec/delete with the server's RSS
#
# The REST side is timed by a client that keeps one connection (bench/serve.py): what a
# framework calling the server pays per call. `pinfold exec -- true` is timed by hyperfine in
# the same environment and policy (the embedded default, ledger on), in the sandbox's own
# workspace. The servers run with --rate 100000: the default 50 requests a second would turn
# the burst into 429s by design.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
cargo build -q --release -p pinfold
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
[ -n "${OLD:-}" ] && cp "$OLD" "$work/pinfold-old"
mkdir -p "$work/home"
export HOME="$work/home" PINFOLD_CACHE_DIR="$work/cache" XDG_DATA_HOME="$work/data"

# start NAME BIN: a server of BIN with its own state; sets URL_NAME, TOK_NAME, SB_NAME, WS_NAME, PID_NAME.
start() {
    local name=$1 bin=$2 state=$work/state-$1
    local tok url sb ws
    tok=$(PINFOLD_STATE_DIR=$state "$bin" serve token add bench --role agent 2>/dev/null)
    PINFOLD_STATE_DIR=$state "$bin" serve --listen 127.0.0.1:0 --rate 100000 > "$work/listen-$name" 2> "$work/server-$name.err" &
    pids+=($!)
    printf -v "PID_$name" '%s' $!
    for _ in $(seq 100); do grep -q listening "$work/listen-$name" 2>/dev/null && break; sleep 0.05; done
    url=$(sed -n 's/^listening on //p' "$work/listen-$name")
    sb=$(curl -s -X POST -H "Authorization: Bearer $tok" "$url/v1/sandboxes" -d '{}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
    ws=$(curl -s -H "Authorization: Bearer $tok" "$url/v1/sandboxes/$sb" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workspace"])')
    printf -v "URL_$name" '%s' "$url"
    printf -v "TOK_$name" '%s' "$tok"
    printf -v "SB_$name" '%s' "$sb"
    printf -v "WS_$name" '%s' "$ws"
}
start new "$work/pinfold"
[ -n "${OLD:-}" ] && start old "$work/pinfold-old"

runs=${RUNS:-200}
rounds=${ROUNDS:-3}
median() { python3 -c 'import json,sys; print(json.loads(sys.argv[1])["median_ms"])' "$1"; }
echo "round,rest_median_ms,exec_median_ms,overhead_ms${OLD:+,old_rest_median_ms}" > "$out/serve-latency.csv"
for r in $(seq "$rounds"); do
    rm_new=$(median "$(python3 bench/serve.py latency "$URL_new" "$TOK_new" "$SB_new" "$runs")")
    rm_old=
    [ -n "${OLD:-}" ] && rm_old=$(median "$(python3 bench/serve.py latency "$URL_old" "$TOK_old" "$SB_old" "$runs")")
    (cd "$WS_new" && PINFOLD_STATE_DIR=$work/state-new hyperfine -N -w 5 -r "$runs" --export-json "$work/exec.json" "$work/pinfold exec -- true" >/dev/null)
    em=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["results"][0]["median"]*1000, 3))' "$work/exec.json")
    echo "$r,$rm_new,$em,$(python3 -c "print(round($rm_new-$em, 3))")${OLD:+,$rm_old}" >> "$out/serve-latency.csv"
done
column -s, -t < "$out/serve-latency.csv"
python3 bench/serve.py burst "$URL_new" "$TOK_new" "$SB_new" 200 | tee "$out/serve-burst.json"
if [ -n "${SOAK:-}" ]; then
    python3 bench/serve.py soak "$URL_new" "$TOK_new" "$PID_new" "$SOAK" | tee "$out/serve-soak.json"
fi
