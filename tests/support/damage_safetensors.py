#!/usr/bin/env python3
"""Damages a safetensors file the way a disk or a copy might, for the tests.

  damage_safetensors.py flip FILE [TENSOR]   flips one bit in the middle of
      TENSOR's data (default: the first tensor by offset); prints its name
  damage_safetensors.py strip FILE           removes the tensors' checksums
      from the header, as a file written before they existed
"""
import json
import struct
import sys


def read(path):
    """The header, the data section and where the data section starts."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:], 8 + n


def flip(path, name=None):
    header, _, start = read(path)
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    name = name or min(tensors, key=lambda k: tensors[k]["data_offsets"][0])
    begin, end = tensors[name]["data_offsets"]
    at = start + (begin + end) // 2
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x10]))
    print(name)


def strip(path):
    header, data, _ = read(path)
    header.get("__metadata__", {}).pop("tensor_sha256", None)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


if __name__ == "__main__":
    {"flip": flip, "strip": strip}[sys.argv[1]](*sys.argv[2:])
