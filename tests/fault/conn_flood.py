#!/usr/bin/env python3
"""Opens COUNT idle TCP connections from SOURCE to HOST:PORT and holds them
(reopening any the server closes) until STOP_FILE exists; writes READY_FILE
once COUNT connections were attempted. Never speaks: the connections are
what a local process can open to lock a server out.

    conn_flood.py HOST PORT SOURCE COUNT READY_FILE STOP_FILE
"""
import os
import socket
import sys
import time

host, port, source, count, ready, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]


def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.bind((source, 0))
        s.connect((host, port))
        return s
    except OSError:
        s.close()
        return None


held = [connect() for _ in range(count)]
opened = sum(1 for s in held if s)
with open(ready, "w") as f:
    f.write(f"{opened}\n")
while not os.path.exists(stop):
    # Keep the pressure on: replace the connections the server closed.
    for i, s in enumerate(held):
        if s is None:
            held[i] = connect()
            continue
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                s.close()
                held[i] = connect()
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            held[i] = connect()
    time.sleep(0.5)
