"""Samples/s of rank 0 in a metrics.jsonl after a warm-up, from the ranks'
own step times (time_unix_ns), so start-up and data loading don't count.
Shared by bench/dashboard_load.sh and bench/tls_overhead.sh.

    python3 bench/samples_per_s.py METRICS.jsonl GLOBAL_BATCH WARMUP_STEPS
"""
import json
import sys

path, batch, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = sorted((r["step"], r["time_unix_ns"]) for r in map(json.loads, open(path))
           if r.get("kind", "step") == "step" and r["rank"] == 0 and r["step"] >= warmup)
print(f"{(len(t) - 1) * batch / ((t[-1][1] - t[0][1]) * 1e-9):.1f}")
