#!/usr/bin/env python3
"""Write a policy with N rules (default 1,000) shaped like real ones, for benchmarks.

Usage: gen_policy.py [N] > big.toml
Rules spread over 200 command names, mixing allow/ask/deny, alternation, flags, globs and
optional groups, so that the index and the matcher both do real work."""
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
tools = ["git", "cargo", "npm", "rm", "curl", "docker", "kubectl", "make", "ls", "cat"]
tools += [f"tool{i}" for i in range(190)]
subs = ["status", "log", "diff", "show", "build", "test", "run", "push", "pull", "install"]
print('[defaults]\naction = "ask"\nsandbox = "workspace"\non_parse_error = "ask"\n')
print('[paths]\nsecrets = ["~/.ssh", "~/.aws", ".env*"]\n')
for i in range(n):
    t = tools[i % len(tools)]
    s = subs[(i // len(tools)) % len(subs)]
    kind = ["allow", "ask", "deny"][i % 3]
    shape = i % 5
    if shape == 0:
        pat = f"{t} {s}|{s}x *"
    elif shape == 1:
        pat = f"{t} {s} -f|--force *"
    elif shape == 2:
        pat = f"{t} [-v] {s} arg{i}"
    elif shape == 3:
        pat = f"{t} {s}* !--dry-run *"
    else:
        pat = f"{t} {s} <path:secrets> *"
    print(f'[[rules]]\n{kind} = "{pat}"\n')
print('[sandbox.workspace]\nfs.write.allow = ["."]\nfs.write.deny = [".git/hooks", ".git/config"]')
print('fs.read.deny = ["<path:secrets>"]\nnetwork.allow = false')
