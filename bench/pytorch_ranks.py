"""Ranks of a PyTorch benchmark script as local processes (gloo on loopback).

launch(script, ranks, argv, name) starts `ranks` copies of `script` with
argv plus --_rank R --_port P (a free port for the rendezvous), and returns
the JSON line each printed last, in rank order; any rank that fails, or
prints none, ends the caller with "NAME: a rank failed".
"""
import json
import os
import socket
import subprocess
import sys


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, ranks, argv, name):
    port = free_port()
    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(script)] + argv +
                              ["--_rank", str(r), "--_port", str(port)], stdout=subprocess.PIPE, env=env, text=True)
             for r in range(ranks)]
    results, failed = [], False
    for p in procs:  # every rank is waited for, even after one failed
        out, _ = p.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if p.returncode != 0 or not lines:
            failed = True
            continue
        results.append(json.loads(lines[-1]))
    if failed:
        sys.exit(f"{name}: a rank failed")
    return sorted(results, key=lambda r: r["rank"])
