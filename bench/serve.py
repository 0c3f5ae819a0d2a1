#!/usr/bin/env python3
"""Load and latency of `pinfold serve` on loopback (docs/performance.md, "The server").

    bench/serve.py latency URL TOKEN SANDBOX N    # N governed `true` execs, one at a time on
                                                  # one kept-alive connection: median, p90 (ms)
    bench/serve.py burst URL TOKEN SANDBOX N      # N governed execs at once: errors, wall time
    bench/serve.py soak URL TOKEN PID SECONDS     # create/exec/delete in a loop; the server's
                                                  # RSS sampled every 10 s: first, last, max, change

Standard library only; prints one JSON object.
"""
import http.client
import json
import statistics
import sys
import threading
import time


def conn(url):
    host = url.split("://", 1)[1].rstrip("/")
    h, p = host.rsplit(":", 1)
    return http.client.HTTPConnection(h, int(p), timeout=120)


def call(c, token, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    c.request(method, path, body=data, headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    r = c.getresponse()
    raw = r.read()
    return r.status, raw


def latency(url, token, sb, n):
    c = conn(url)
    times = []
    for i in range(n + 5):
        t0 = time.perf_counter()
        st, raw = call(c, token, "POST", f"/v1/sandboxes/{sb}/exec", {"command": "true"})
        dt = (time.perf_counter() - t0) * 1000
        if st != 200 or json.loads(raw)["exit_code"] != 0:
            raise SystemExit(f"exec failed: {st} {raw[:300]!r}")
        if i >= 5:
            times.append(dt)
    times.sort()
    return {"n": n, "median_ms": round(statistics.median(times), 3), "p90_ms": round(times[int(len(times) * 0.9)], 3), "min_ms": round(times[0], 3)}


def burst(url, token, sb, n):
    results = [None] * n
    start = threading.Barrier(n)

    def one(i):
        c = conn(url)
        start.wait()
        try:
            st, raw = call(c, token, "POST", f"/v1/sandboxes/{sb}/exec", {"command": "echo $((6*7))"})
            ok = st == 200 and json.loads(raw)["stdout"] == "42\n"
            results[i] = "ok" if ok else f"{st} {raw[:200]!r}"
        except Exception as e:  # a refused or reset connection counts as an error
            results[i] = repr(e)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    errors = [r for r in results if r != "ok"]
    return {"n": n, "errors": len(errors), "first_errors": errors[:3], "wall_s": round(wall, 2)}


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("no VmRSS")


def soak(url, token, pid, seconds):
    c = conn(url)
    samples = []
    cycles = 0
    errors = 0
    t0 = time.time()
    next_sample = t0
    while time.time() - t0 < seconds:
        if time.time() >= next_sample:
            samples.append(rss_kib(pid))
            next_sample += 10
        st, raw = call(c, token, "POST", "/v1/sandboxes", {})
        if st != 201:
            errors += 1
            continue
        sb = json.loads(raw)["id"]
        st, _ = call(c, token, "POST", f"/v1/sandboxes/{sb}/exec", {"command": "echo hi > f && cat f"})
        errors += st != 200
        st, _ = call(c, token, "DELETE", f"/v1/sandboxes/{sb}")
        errors += st != 204
        cycles += 1
    samples.append(rss_kib(pid))
    # Flat: the RSS after the first minute (warm-up: allocator arenas, SQLite's cache) against
    # the last sample.
    warm = samples[min(6, len(samples) - 1)]
    return {
        "seconds": seconds,
        "cycles": cycles,
        "errors": errors,
        "rss_kib_first": samples[0],
        "rss_kib_after_1min": warm,
        "rss_kib_last": samples[-1],
        "rss_kib_max": max(samples),
        "change_after_warmup_pct": round((samples[-1] - warm) * 100 / warm, 1),
        "samples": samples,
    }


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "latency":
        out = latency(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif mode == "burst":
        out = burst(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    elif mode == "soak":
        out = soak(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        raise SystemExit(__doc__)
    print(json.dumps(out))
