#!/usr/bin/env bash
# Whole-process timing of the gvisor backend beside bare `runsc run` on the very bundle pinfold
# writes, and of the process backend, in one hyperfine run: medians and ratios.
#
#   bench/backends.sh        # writes bench/results/backends.json and prints a table
#   RUNS=30 bench/backends.sh
#
# The bundle: a `pinfold exec --backend gvisor -- sleep` run in the background writes a copy of
# its OCI configuration (PINFOLD_GVISOR_BUNDLE_COPY) and holds its placeholders while the
# timed runs go on. pinfold's root is a tree its helper builds with host mounts; the peer is
# that configuration as a bundle written by hand would have it: the host's root read-only and
# the policy's paths (`pinfold exec --dry-run`) as binds by path: each writable root
# read-write, each write-deny path read-only, each hidden directory an empty tmpfs and each
# hidden file the empty file; `true` for the command. Bare runsc runs it with the flags
# pinfold gives it, in namespaces like the ones pinfold's helper makes (`unshare`). Each bare
# run goes through `sh -c` for a container id of its own (`$$`), which costs the peer about
# 1 ms. Needs hyperfine, runsc and unshare; run as root.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
cargo build -q --release -p pinfold
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
mkdir -p "$work/project" "$work/bundle" "$work/bundle-min" "$work/runsc-root"
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state"
printf "extends = ['pinfold:default']\n[audit]\nenabled = false\n" > "$work/no-ledger.toml"
cd "$work/project"
git init -q .
"$bin" exec -c "$work/no-ledger.toml" -- true
PINFOLD_GVISOR_BUNDLE_COPY="$work/held.json" "$bin" exec -c "$work/no-ledger.toml" --backend gvisor -- sleep 600 &
held=$!
trap 'kill $held 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do [ -s "$work/held.json" ] && break; sleep 0.1; done
"$bin" exec -c "$work/no-ledger.toml" --backend gvisor --dry-run -- true > "$work/plan.json"
/usr/bin/python3 - "$work/held.json" "$work/plan.json" "$work/bundle/config.json" "$(command -v true)" "$work/empty" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
plan = json.load(open(sys.argv[2]))["plan"]
open(sys.argv[5], "w").close()
c["process"]["args"] = [sys.argv[4]]
c["root"] = {"path": "/", "readonly": True}
def bind(d, rw, src=None):
    return {"destination": d, "type": "bind", "source": src or d, "options": ["rbind", "rw" if rw else "ro", "nosuid", "nodev"]}
deny = [d for d in plan["write_deny"] if os.path.lexists(d)]
binds = [bind(w, True) for w in sorted(plan["writable"], key=lambda p: p.count("/")) if not any(w.startswith(d) for d in deny)]
binds += [bind(d, False) for d in deny]
for h in plan["read_deny"]:
    if os.path.isdir(h):
        binds.append({"destination": h, "type": "tmpfs", "source": "tmpfs", "options": ["ro", "nosuid", "nodev", "noexec", "size=4k", "mode=0500"]})
    elif os.path.isfile(h):
        binds.append(bind(h, False, sys.argv[5]))
json.dump(dict(c, mounts=binds + c["mounts"]), open(sys.argv[3], "w"))
# The least runsc can be asked for: the host's root read-only, none of the policy's paths.
os.makedirs(os.path.dirname(sys.argv[3]).replace("bundle", "bundle-min"), exist_ok=True)
json.dump(c, open(sys.argv[3].replace("bundle", "bundle-min"), "w"))
PY
runsc=$(command -v runsc)
# As pinfold runs it: in a user, network and mount namespace of its own, rootless.
bare="unshare --user --map-root-user --net --mount sh -c 'exec $runsc --root $work/runsc-root --network=none --host-uds=none --host-fifo=none --oci-seccomp --rootless --ignore-cgroups run --bundle $work/bundle bench-\$\$'"
bare_min="unshare --user --map-root-user --net --mount sh -c 'exec $runsc --root $work/runsc-root --network=none --host-uds=none --host-fifo=none --oci-seccomp --rootless --ignore-cgroups run --bundle $work/bundle-min bench-\$\$'"
hyperfine -N --warmup 3 --runs "${RUNS:-20}" --export-json "$OLDPWD/$out/backends.json" \
    -n pinfold-exec-gvisor "$bin exec -c $work/no-ledger.toml --backend gvisor -- true" \
    -n runsc-run-same-bundle "$bare" \
    -n runsc-run-no-policy "$bare_min" \
    -n pinfold-exec-process "$bin exec -c $work/no-ledger.toml -- true" >/dev/null
cd "$OLDPWD"
/usr/bin/python3 - "$out/backends.json" <<'PY'
import json, statistics, sys
r = {x["command"]: statistics.median(x["times"]) * 1000 for x in json.load(open(sys.argv[1]))["results"]}
g, b, p = r["pinfold-exec-gvisor"], r["runsc-run-same-bundle"], r["pinfold-exec-process"]
print(f"| command | median ms |\n|---|---|")
for k, v in r.items():
    print(f"| {k} | {v:.1f} |")
print(f"\ngvisor backend / bare runsc run on the same bundle: {g / b:.3f} (+{g - b:.1f} ms)")
print(f"gvisor backend / bare runsc run with none of the policy's paths: {g / r['runsc-run-no-policy']:.3f} (+{g - r['runsc-run-no-policy']:.1f} ms)")
print(f"gvisor backend / process backend: {g / p:.1f}x")
PY
