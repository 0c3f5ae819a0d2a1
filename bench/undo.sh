#!/usr/bin/env bash
# What undo adds to `pinfold exec` in a git project of 10,000 files, timed side by side in one
# hyperfine run: the same build with `[undo] enabled` true and false, running a command that
# changes nothing (`true`) and one that changes ten files; and, for scale, git's own snapshot
# of the working tree into a private index (`git add -A; git write-tree`), the other design
# docs/design/undo.md weighs.
#
#   bench/undo.sh                 # writes bench/results/undo.json and prints a table
#   ROUNDS=5 RUNS=60 bench/undo.sh
#                                 # five hyperfine runs; the table gives each command's median
#                                 # of the round medians, and the added cost per round, then
#                                 # its median
#
# Needs hyperfine and git.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$PWD/bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cargo build -q --release -p pinfold
cp target/x86_64-unknown-linux-gnu/release/pinfold "$work/pinfold"
bin=$work/pinfold
export PINFOLD_CACHE_DIR="$work/cache" PINFOLD_STATE_DIR="$work/state"
proj=$work/project
# 10,000 tracked files in 500 directories, 1-80 lines each; an ignored target/ of 2,000.
python3 - "$proj" <<'PY'
import os, random, sys
root = sys.argv[1]
random.seed(7)
for d in range(500):
    dd = os.path.join(root, "src", f"m{d // 25:02}", f"d{d:03}")
    os.makedirs(dd, exist_ok=True)
    for f in range(20):
        with open(os.path.join(dd, f"f{f:02}.rs"), "w") as fh:
            fh.write("".join(f"let x{i} = {i};\n" for i in range(random.randint(1, 80))))
for d in range(20):
    dd = os.path.join(root, "target", f"t{d}")
    os.makedirs(dd, exist_ok=True)
    for f in range(100):
        open(os.path.join(dd, f"o{f}.o"), "w").write("o")
open(os.path.join(root, ".gitignore"), "w").write("target/\n")
PY
git -C "$proj" init -q
git -C "$proj" add -A
git -C "$proj" -c user.name=b -c user.email=b@example.invalid commit -qm files
# Packed, as a repository with history is: a fresh commit leaves 10,000 loose objects, which
# the run's git guard (docs/design/sandbox.md) would time instead.
git -C "$proj" gc -q
files=$(git -C "$proj" ls-files | wc -l)
for on in true false; do
    printf "extends = ['pinfold:default']\n[defaults]\naction = 'allow'\n[audit]\nenabled = false\n[undo]\nenabled = %s\n" "$on" > "$work/undo-$on.toml"
done
ten=$(for i in 00 01 02 03 04 05 06 07 08 09; do printf 'echo x >> src/m00/d000/f%s.rs; ' "$i"; done)
cd "$proj"
"$bin" exec -c "$work/undo-true.toml" -- true
"$bin" exec -c "$work/undo-false.toml" -- true
# PRIO=fifo runs the measurement at real-time priority (chrt -f 50), as bench/exec.sh does.
prio=()
[ "${PRIO:-}" = fifo ] && prio=(chrt -f 50)
rounds=${ROUNDS:-1}
runs=${RUNS:-60}
for r in $(seq 1 "$rounds"); do
    "${prio[@]}" hyperfine -N -w 5 -r "$runs" --export-json "$work/round-$r.json" \
        -n "exec true, undo off" "$bin exec -c $work/undo-false.toml -- true" \
        -n "exec true, undo on" "$bin exec -c $work/undo-true.toml -- true" \
        -n "exec 10 appends, undo off" "$bin exec -c $work/undo-false.toml -- bash -c '$ten'" \
        -n "exec 10 appends, undo on" "$bin exec -c $work/undo-true.toml -- bash -c '$ten'" \
        -n "git add -A; write-tree (private index)" "bash -c 'GIT_INDEX_FILE=$work/index git add -A && GIT_INDEX_FILE=$work/index git write-tree >/dev/null'" \
        > /dev/null
    # Undo records of the timed runs: not part of what is measured next round.
    rm -rf "$proj/.git/pinfold-undo/runs"
done
python3 - "$work" "$rounds" "$files" "$out/undo.json" <<'PY'
import json, statistics, sys
work, rounds, files, dest = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
per = {}
for r in range(1, rounds + 1):
    for res in json.load(open(f"{work}/round-{r}.json"))["results"]:
        per.setdefault(res["command"], []).append(statistics.median(res["times"]) * 1000)
med = {k: statistics.median(v) for k, v in per.items()}
added = [on - off for on, off in zip(per["exec true, undo on"], per["exec true, undo off"])]
added10 = [on - off for on, off in zip(per["exec 10 appends, undo on"], per["exec 10 appends, undo off"])]
print(f"project: {files} tracked files; {rounds} round(s)")
for k, v in med.items():
    print(f"  {k:42} {v:8.3f} ms")
print(f"  undo adds, command changes nothing: {statistics.median(added):+.3f} ms (per round: {', '.join(f'{a:+.3f}' for a in added)})")
print(f"  undo adds, command appends to 10 files: {statistics.median(added10):+.3f} ms")
json.dump({"files": files, "rounds": rounds, "median_ms": med, "added_ms": added, "added_10_ms": added10}, open(dest, "w"), indent=1)
PY
