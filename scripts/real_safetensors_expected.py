#!/usr/bin/env python3
"""Regenerates fixtures/real/safetensors/expected.json (issue 54): what each real
`.safetensors` file in fixtures/real/safetensors/ (and its subfolders; written by other
projects, see ORIGIN.md there) holds.

Format: {"<file, relative to the folder>": {
            "tensors": {name: {"dtype": safetensors dtype string ("F32", "BF16", "F8_E4M3",
                                        "BOOL", "U16"...),
                               "shape": [...],
                               "sha256": of the tensor's stored (little-endian) bytes}},
            "metadata": the header's "__metadata__" ({} when it has none)}}

The header is parsed directly (the 8-byte little-endian length, then the JSON), so dtypes numpy
lacks (BF16, F8_*) need nothing more; the `safetensors` package, where installed, is used to
check that it reads the same names and metadata.

    python3 scripts/real_safetensors_expected.py [DIR]   (default fixtures/real/safetensors)
"""
import hashlib
import json
import os
import struct
import sys

DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "real", "safetensors")


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    start = 8 + n
    meta = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        assert start + end <= len(data), (path, name)
        tensors[name] = {"dtype": info["dtype"], "shape": list(info["shape"]),
                         "sha256": hashlib.sha256(data[start + begin:start + end]).hexdigest()}
    return {"tensors": tensors, "metadata": meta}


def check(path, e):
    try:
        from safetensors import safe_open
    except ImportError:
        return
    with safe_open(path, framework="numpy") as f:
        assert sorted(f.keys()) == sorted(e["tensors"]), path
        assert (f.metadata() or {}) == e["metadata"], path


def main():
    out = {}
    for root, _, files in os.walk(DIR):
        for name in files:
            if name.endswith(".safetensors"):
                path = os.path.join(root, name)
                rel = os.path.relpath(path, DIR).replace(os.sep, "/")
                out[rel] = read(path)
                check(path, out[rel])
    with open(os.path.join(DIR, "expected.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
