#!/usr/bin/env bash
# Whole-process timing of the container backend beside Podman doing the same, in one hyperfine
# run: medians and ratios.
#
#   bench/containers.sh        # writes bench/results/containers.json and prints a table
#   RUNS=30 bench/containers.sh
#
# A Podman service on a socket of its own (as the tests start one); the image is the small
# busybox image `pinfold image build` makes (imported here with `podman import` when absent).
# The command is `true` in each. Peers:
#   podman-remote-run: `podman --remote run --rm` through the same service pinfold uses (started
#     with runc as its runtime, which the remote client cannot choose per container),
#     with the settings pinfold gives a container (read-only root, tmpfs /tmp, no
#     capabilities, no-new-privileges, network none, ulimits, init, the project bound);
#   podman-run: the same through the local `podman` (no service in between);
#   podman-exec: `podman exec` into a container kept running, the peer of
#     pinfold-exec-kept: `pinfold exec --keep-container` entering the container a first run
#     made (what each command of a `pinfold serve` sandbox on the container backend costs).
# A second hyperfine run times making a kept container (a sandbox's first command), each run
# after removing it: pinfold-exec-kept-made beside podman-run-detached-exec (`podman run -d`
# of a keeper with the same settings, then `podman exec` of the command, through the local
# `podman`).
# Needs hyperfine, podman, runc, busybox-static; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
cargo build -q --release -p pinfold
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
mkdir -p "$work/project" "$work/root/bin" "$work/root/tmp" "$work/root/etc"
sock=$work/podman.sock
(cd "$work" && exec podman --runtime runc system service --time=0 "unix://$sock" 2>"$work/service.log") &
svc=$!
keep=
trap '[ -n "$keep" ] && podman rm -f -t 0 "$keep" >/dev/null 2>&1; kill $svc 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
export DOCKER_HOST=unix://$sock PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state"
image=localhost/pinfold-bench-busybox:1
if ! podman image exists "$image"; then
    cp /usr/bin/busybox "$work/root/bin/busybox"
    for a in sh true sleep; do ln -s busybox "$work/root/bin/$a"; done
    tar -C "$work/root" -cf "$work/rootfs.tar" .
    podman import -q "$work/rootfs.tar" "$image" >/dev/null
fi
cat >"$work/policy.toml" <<EOF
extends = ['pinfold:default']
[audit]
enabled = false
[defaults]
sandbox = "c"
[sandbox.c]
backend = "container"
image = "$image"
fs.write.allow = ["."]
EOF
cd "$work/project"
git init -q .
"$bin" exec -c "$work/policy.toml" -- true
opts="--rm --read-only --tmpfs /tmp:rw,nosuid,nodev,mode=1777 --cap-drop all --security-opt no-new-privileges --network none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 --init --mount type=bind,src=$work/project,dst=$work/project -w $work/project"
keep=$(podman run -d --runtime runc --network none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 "$image" sleep 100000)
"$bin" exec -c "$work/policy.toml" --keep-container bench -- true
kept_rm() { podman ps -aq --filter "label=dev.pinfold.kept=$1" | xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true; }
trap '[ -n "$keep" ] && podman rm -f -t 0 "$keep" peer-kept-made >/dev/null 2>&1; kept_rm bench; kept_rm made; kill $svc 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
hyperfine -N --warmup 3 --runs "${RUNS:-20}" --export-json "$OLDPWD/$out/containers.json" \
    -n pinfold-exec-container "$bin exec -c $work/policy.toml -- true" \
    -n pinfold-exec-kept "$bin exec -c $work/policy.toml --keep-container bench -- true" \
    -n podman-remote-run "podman --remote --url unix://$sock run $opts $image true" \
    -n podman-run "podman run --runtime runc $opts $image true" \
    -n podman-exec "podman exec $keep true" >/dev/null 2>"$work/hyperfine.err" || { cat "$work/hyperfine.err" >&2; exit 1; }
keeper_opts="${opts/--rm /} --name peer-kept-made"
hyperfine --warmup 2 --runs "${RUNS:-20}" --export-json "$OLDPWD/$out/containers-made.json" \
    --prepare "podman ps -aq --filter label=dev.pinfold.kept=made | xargs -r podman rm -f -t 0 >/dev/null 2>&1 || true" \
    -n pinfold-exec-kept-made "$bin exec -c $work/policy.toml --keep-container made -- true" \
    --prepare "podman rm -f -t 0 peer-kept-made >/dev/null 2>&1 || true" \
    -n podman-run-detached-exec "podman run -d --runtime runc $keeper_opts $image sleep 2147483647 >/dev/null && podman exec peer-kept-made true" >/dev/null 2>"$work/hyperfine.err" || { cat "$work/hyperfine.err" >&2; exit 1; }
cd "$OLDPWD"
/usr/bin/python3 - "$out/containers.json" "$out/containers-made.json" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) * 1000 for x in json.load(open(sys.argv[1]))["results"]}
p = r["pinfold-exec-container"]
print("| command | median ms |\n|---|---|")
for k, v in r.items():
    print(f"| {k} | {v:.1f} |")
for peer in ("podman-remote-run", "podman-run", "podman-exec"):
    print(f"pinfold exec --backend container / {peer}: {p / r[peer]:.3f} ({p - r[peer]:+.1f} ms)")
k = r["pinfold-exec-kept"]
print(f"pinfold exec --keep-container (entering) / podman-exec: {k / r['podman-exec']:.3f} ({k - r['podman-exec']:+.1f} ms)")
m = {x["command"]: statistics.median(x["times"]) * 1000 for x in json.load(open(sys.argv[2]))["results"]}
print("| command | median ms |\n|---|---|")
for c, v in m.items():
    print(f"| {c} | {v:.1f} |")
a, b = m["pinfold-exec-kept-made"], m["podman-run-detached-exec"]
print(f"making a kept container and running the first command: pinfold {a:.1f} ms ({1000 / a:.1f}/s) / podman run -d + exec {b:.1f} ms ({1000 / b:.1f}/s): {a / b:.3f}")
PY
