#!/usr/bin/env bash
# The egress proxy's speed against going direct, side by side on loopback:
#   1. throughput of one large HTTPS download through a CONNECT tunnel against the same
#      download direct (target: >= 80 %);
#   2. time to first byte added by the proxy: CONNECT + TLS against direct TLS, and plain
#      HTTP forwarding against direct HTTP (target: <= 1 ms, medians).
# Same client (curl, a new process per request), same origin (the bench_upstream example:
# rustls HTTPS and plain HTTP on 127.0.0.1), the proxy is the bench_proxy example (the
# library's Proxy with the allowlist "127.0.0.1:<https port> 127.0.0.1:<http port>").
# Variants run interleaved within each round, in an order that rotates from round to round;
# the table gives the median over rounds of each round's value.
#
#   bench/egress.sh                       # writes bench/results/egress.json, prints a table
#   ROUNDS=9 SIZE=1g TTFB_RUNS=40 bench/egress.sh
#   PROXY_B=/path/to/other/bench_proxy OUT=bench/results/egress-ab.json bench/egress.sh
#                                         # a second proxy build measured in the same rounds
#
# Needs curl and python3 (apt-get install curl python3). Sanity check, not a test: every
# download must answer 200 with exactly SIZE bytes, proxied and direct alike, or the script
# fails.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-7}
size=${SIZE:-1g}
ttfb_runs=${TTFB_RUNS:-40}
out=${OUT:-bench/results/egress.json}
mkdir -p "$(dirname "$out")"
work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true # the servers are gone before their directory is
    rm -rf "$work"
}
trap cleanup EXIT
# No proxy from the environment may change what "direct" means.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

cargo build -q --release -p pinfold-egress --example bench_proxy --example bench_upstream
ex=target/x86_64-unknown-linux-gnu/release/examples

# Start a server in the background and wait for its one line on stdout.
start() {
    local name=$1
    shift
    "$@" >"$work/$name.out" 2>"$work/$name.err" &
    pids+=($!)
    for _ in $(seq 100); do
        [[ -s "$work/$name.out" ]] && return 0
        sleep 0.05
    done
    echo "$name did not start: $(cat "$work/$name.err")" >&2
    exit 1
}
start upstream "$ex/bench_upstream" "$work"
read -r https_kv http_kv <"$work/upstream.out"
https=${https_kv#https=}
http=${http_kv#http=}
start proxy "$ex/bench_proxy" 127.0.0.1:0 "127.0.0.1:$https" "127.0.0.1:$http"
proxy_pid=${pids[-1]}
proxy=$(cut -d= -f2 "$work/proxy.out")
variants_tp=(direct tunnel)
if [[ -n "${PROXY_B:-}" ]]; then
    start proxy_b "$PROXY_B" 127.0.0.1:0 "127.0.0.1:$https" "127.0.0.1:$http"
    proxy_b_pid=${pids[-1]}
    proxy_b=$(cut -d= -f2 "$work/proxy_b.out")
    variants_tp+=(tunnel-b)
fi

# One curl fetch; prints "status starttransfer_s speed_Bps size_bytes".
fetch() {
    local variant=$1 path=$2
    local args=(-sS --noproxy '' -o /dev/null -w '%{http_code} %{time_starttransfer} %{speed_download} %{size_download}\n')
    case $variant in
    direct | direct-tls) args+=(--cacert "$work/ca.pem" "https://127.0.0.1:$https/$path") ;;
    tunnel | connect-tls) args+=(--cacert "$work/ca.pem" -x "http://127.0.0.1:$proxy" "https://127.0.0.1:$https/$path") ;;
    tunnel-b | connect-tls-b) args+=(--cacert "$work/ca.pem" -x "http://127.0.0.1:$proxy_b" "https://127.0.0.1:$https/$path") ;;
    direct-http) args+=("http://127.0.0.1:$http/$path") ;;
    forward-http) args+=(-x "http://127.0.0.1:$proxy" "http://127.0.0.1:$http/$path") ;;
    forward-http-b) args+=(-x "http://127.0.0.1:$proxy_b" "http://127.0.0.1:$http/$path") ;;
    esac
    curl "${args[@]}"
}
# CPU time (user + system, clock ticks) a process has used so far.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
pid_of() {
    case $1 in
    tunnel) echo "$proxy_pid" ;;
    tunnel-b) echo "$proxy_b_pid" ;;
    *) echo "" ;;
    esac
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
started=$(date -u +%FT%TZ)
echo "load average at start: $load_start (nproc $(nproc)); $rounds rounds, $size, $ttfb_runs TTFB pairs per round" >&2
raw=$work/raw.tsv
# The code measured: the commit, and whether the egress crate had uncommitted edits.
rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
[[ -n "$(git status --porcelain -- crates/egress 2>/dev/null)" ]] && rev+="+dirty"

# 1. Throughput: one download per variant per round, the order rotating.
nv=${#variants_tp[@]}
for ((r = 0; r < rounds; r++)); do
    for ((i = 0; i < nv; i++)); do
        v=${variants_tp[$(((i + r) % nv))]}
        p=$(pid_of "$v")
        c0=${p:+$(cpu_ticks "$p")}
        read -r code _ speed bytes < <(fetch "$v" "$size")
        c1=${p:+$(cpu_ticks "$p")}
        printf 'tp\t%d\t%s\t%s\t%s\t%s\t%s\n' "$r" "$v" "$code" "$speed" "$bytes" "$((${c1:-0} - ${c0:-0}))" >>"$raw"
        echo "round $r $v: $code $bytes bytes, $((${speed%.*} / 1000000)) MB/s" >&2
    done
done

# 2. Time to first byte: small responses, each variant once per iteration, order rotating.
variants_tt=(direct-tls connect-tls direct-http forward-http)
[[ -n "${PROXY_B:-}" ]] && variants_tt+=(connect-tls-b forward-http-b)
nt=${#variants_tt[@]}
for v in "${variants_tt[@]}"; do fetch "$v" 1k >/dev/null; done # warm up
for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ttfb_runs; k++)); do
        for ((i = 0; i < nt; i++)); do
            v=${variants_tt[$(((i + k) % nt))]}
            read -r code ttfb _ bytes < <(fetch "$v" 1k)
            printf 'ttfb\t%d\t%s\t%s\t%s\t%s\t0\n' "$r" "$v" "$code" "$ttfb" "$bytes" >>"$raw"
        done
    done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
echo "load average at end: $load_end" >&2

python3 - "$raw" "$out" "$size" "$started" "$load_start" "$load_end" "$rev" "$(getconf CLK_TCK)" <<'PY'
import json, statistics as st, sys
raw, out, size, started, load_start, load_end, rev, hz = sys.argv[1:]
hz = int(hz)
rows = [l.rstrip("\n").split("\t") for l in open(raw)]
tp, tt = {}, {}
for kind, r, v, code, val, nbytes, ticks in rows:
    if code != "200":
        sys.exit(f"{kind} {v} round {r}: HTTP {code}")
    d = tp if kind == "tp" else tt
    d.setdefault(v, {}).setdefault(int(r), []).append((float(val), int(nbytes), int(ticks)))

# Sanity check: every download of the big file has the same, expected byte count.
mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
want = int(size[:-1]) * mult[size[-1].lower()] if size[-1].lower() in mult else int(size)
counts = {n for v in tp.values() for rr in v.values() for _, n, _ in rr}
if counts != {want}:
    sys.exit(f"byte counts differ: {sorted(counts)} (expected {want} for each download)")

def per_round(d, f):
    return {v: [f([x for x in rr[r]]) for r in sorted(rr)] for v, rr in d.items()}

speeds = per_round(tp, lambda xs: xs[0][0])  # bytes/s, one download per round
cpu = per_round(tp, lambda xs: xs[0][2] / hz)  # proxy CPU seconds for that download
ttfb = per_round(tt, lambda xs: st.median(x[0] for x in xs))  # median TTFB of the round
med = st.median
res = {
    "started": started, "commit": rev, "load_start": load_start, "load_end": load_end,
    "size": size, "bytes": want, "rounds": len(next(iter(speeds.values()))),
    "throughput_MBps_per_round": {v: [s / 1e6 for s in xs] for v, xs in speeds.items()},
    "throughput_MBps_median": {v: med(xs) / 1e6 for v, xs in speeds.items()},
    "proxy_cpu_s_per_download": {v: xs for v, xs in cpu.items() if v != "direct"},
    "ttfb_ms_round_medians": {v: [x * 1e3 for x in xs] for v, xs in ttfb.items()},
    "ttfb_ms_median": {v: med(xs) * 1e3 for v, xs in ttfb.items()},
}
ratio = {v: med(a / b for a, b in zip(speeds[v], speeds["direct"])) for v in speeds if v != "direct"}
res["throughput_ratio_median_of_rounds"] = ratio
pairs = [("connect-tls", "direct-tls"), ("forward-http", "direct-http"),
         ("connect-tls-b", "direct-tls"), ("forward-http-b", "direct-http")]
added = {p: med((a - b) * 1e3 for a, b in zip(ttfb[p], ttfb[d])) for p, d in pairs if p in ttfb}
res["ttfb_added_ms_median_of_rounds"] = added
json.dump(res, open(out, "w"), indent=1)

print(f"load {load_start} -> {load_end}; {res['rounds']} rounds; {size} = {want} bytes per download")
print(f"{'throughput':16} {'median MB/s':>12} {'vs direct':>10} {'proxy CPU s':>12}")
for v, xs in speeds.items():
    r = f"{ratio[v] * 100:9.1f}%" if v in ratio else f"{'':10}"
    c = f"{med(cpu[v]):12.2f}" if v != "direct" else ""
    print(f"{v:16} {med(xs) / 1e6:12.0f} {r} {c}")
print(f"{'time to 1st byte':16} {'median ms':>12} {'added ms':>10}")
for v, xs in ttfb.items():
    a = f"{added[v]:10.3f}" if v in added else ""
    print(f"{v:16} {med(xs) * 1e3:12.3f} {a}")
ok_tp = ratio["tunnel"] >= 0.8
ok_tt = all(added[p] <= 1.0 for p in ("connect-tls", "forward-http"))
print(f"targets: tunnel >= 80 % of direct: {'met' if ok_tp else 'NOT met'}; "
      f"added TTFB <= 1 ms: {'met' if ok_tt else 'NOT met'}")
print(f"wrote {out}")
PY
