"""Checks a mount's `.safetensors`, `.npz`, `NAME.safetensors` and `NAME.stats.json` against
each tensor's `.npy` (found by the "name" in its `.json`), with numpy and the `safetensors`
package: same keys, dtypes, shapes and bytes; sizes exact; stats equal to numpy's in float64.

argv: mountpoint. Exit 1 naming every mismatch; prints what it checked.
"""
import json
import math
import re
import os
import struct
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

from narrow_floats import SAFETENSORS, widen_float8

mnt = sys.argv[1]
bad = []
checked = {"safetensors": 0, "npz": 0, "single": 0, "stats": 0}

ST = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "U64": "<u8", "I32": "<i4",
      "U32": "<u4", "I16": "<i2", "U16": "<u2", "I8": "i1", "U8": "u1", "BOOL": "?",
      "C64": "<c8"}


def read_whole(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) != os.path.getsize(path):
        bad.append(f"{path}: size {os.path.getsize(path)} but {len(data)} bytes read")
    return data


def st_header(path):
    data = read_whole(path)
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    if (8 + n) % 8:
        bad.append(f"{path}: data not 8-aligned")
    return header, data[8 + n:]


def st_equal(where, info, body, arr):
    """The tensor `info` of a safetensors header (bytes `body`) equals the .npy array `arr`."""
    begin, end = info["data_offsets"]
    raw = body[begin:end]
    if list(info["shape"]) != list(arr.shape):
        return f"{where}: shape {info['shape']} != {list(arr.shape)}"
    dt = info["dtype"]
    if dt == "BF16":
        want = (arr.astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
        ok = raw == want
    elif dt.startswith("F8"):
        # `.npy` holds the values widened to float32; the view holds the float8 bits.
        want = widen_float8(SAFETENSORS[dt], raw)
        ok = arr.dtype == np.float32 and np.array_equal(want, arr.ravel(), equal_nan=True)
    else:
        got = np.frombuffer(raw, dtype=ST[dt]).reshape(arr.shape)
        ok = got.dtype == arr.dtype and got.tobytes() == arr.tobytes()
    width = np.dtype(ST[dt]).itemsize if dt in ST else (2 if dt == "BF16" else 1)
    if begin % width:
        return f"{where}: offset {begin} not aligned"
    return None if ok else f"{where}: bytes differ"


def by_package(where, path, names):
    """safe_open reads every key numpy has a type for, with the same bytes as our own parse."""
    header, body = st_header(path)
    with safe_open(path, framework="np") as f:
        for k in f.keys():
            if header[k]["dtype"] not in ST:
                continue
            a = f.get_tensor(k)
            b, e = header[k]["data_offsets"]
            if a.tobytes() != body[b:e]:
                bad.append(f"{where}: safe_open({k}) differs")
    if all(header[k]["dtype"] in ST for k in header if k != "__metadata__"):
        loaded = load_file(path)
        if sorted(loaded) != sorted(k for k in header if k != "__metadata__"):
            bad.append(f"{where}: load_file keys differ")


def stats_equal(where, got, arr):
    with np.errstate(all="ignore"):
        a = arr.astype(np.float64).ravel()
    fin = a[np.isfinite(a)]
    want = {"count": a.size, "nan": int(np.isnan(a).sum()), "posinf": int((a == np.inf).sum()),
            "neginf": int((a == -np.inf).sum()), "zeros": int((a == 0).sum())}
    for k, v in want.items():
        if got[k] != v:
            return f"{where}: {k} {got[k]} != {v}"
    if fin.size == 0:
        return None if got["min"] is None and got["mean"] is None else f"{where}: not empty"
    scale = float(np.abs(fin).max())
    with np.errstate(all="ignore"):
        ref = {"min": fin.min(), "max": fin.max(), "mean": fin.mean(), "std": fin.std(),
               "l2": np.sqrt((fin * fin).sum())}
    for k, v in ref.items():
        g = got[k]
        if not math.isfinite(v):
            if g is not None and math.isfinite(g) and k != "mean":
                return f"{where}: {k} {g} but numpy {v}"
            continue
        if g is None:
            return f"{where}: {k} null but numpy {v}"
        tol = 1e-9 * abs(v) + (1e-12 * scale if k in ("mean", "std") else 0)
        if abs(g - v) > tol:
            return f"{where}: {k} {g} != numpy {v}"
    return None


# Tensors by name, from the listing: name -> (directory, base name, dtype).
tensors = []
roots = []
for d, dirs, files in os.walk(mnt):
    dirs.sort()
    if os.path.exists(os.path.join(d, ".safetensors")):
        roots.append(d)
    for f in sorted(files):
        if not f.endswith(".json") or not os.path.exists(os.path.join(d, f[:-5] + ".npy")):
            continue
        if os.path.islink(os.path.join(d, f)):
            continue
        if d.endswith(".parts") or "/.parts" in d:
            continue
        try:
            m = json.load(open(os.path.join(d, f)))
        except Exception:
            continue
        # A key that is not UTF-8 (a high byte escaped in its path) is left out of both views.
        rel = os.path.relpath(os.path.join(d, f), mnt)
        if re.search(r"%[89A-Fa-f][0-9A-Fa-f]", rel):
            continue
        if "name" in m and "dtype" in m:
            tensors.append((m["name"], d, f[:-5], m["dtype"], m.get("format")))
if not roots:
    bad.append(f"{mnt}: no model root with a .safetensors")

for root in roots:
    header, body = st_header(os.path.join(root, ".safetensors"))
    by_package(root, os.path.join(root, ".safetensors"), header)
    left_out = header.get("__metadata__", {}).get("left_out", "")
    if header.get("__metadata__", {}).get("format") != "pt":
        bad.append(f"{root}: metadata format is not pt")
    npz_path = os.path.join(root, ".npz")
    read_whole(npz_path)
    npz = np.load(npz_path)
    # np.load with mmap_mode gives the same members (numpy reads npz members whole).
    npz_m = np.load(npz_path, mmap_mode="r")
    if sorted(npz_m.files) != sorted(npz.files):
        bad.append(f"{root}: np.load(mmap_mode='r') lists other members")
    deeper = [r for r in roots if r != root and r.startswith(root + "/")]
    for name, d, base, dtype, fmt in tensors:
        if not (d == root or d.startswith(root + "/")) or any(d == r or d.startswith(r + "/") for r in deeper):
            continue
        # A graph's constants are in the views only when the model has nothing else.
        if fmt == "tf-graph" and name not in npz.files and name not in header:
            continue
        arr = np.load(os.path.join(d, base + ".npy"))
        where = f"{d}/{base}"
        if "\0" in name:
            pass  # a zip name ends at a NUL: such keys are left out of the .npz
        elif name in npz.files:
            z = npz[name]
            if z.dtype != arr.dtype or z.shape != arr.shape or z.tobytes() != arr.tobytes():
                bad.append(f"{where}: .npz member differs")
            if npz_m[name].tobytes() != arr.tobytes():
                bad.append(f"{where}: .npz member differs with mmap_mode='r'")
            checked["npz"] += 1
        else:
            bad.append(f"{where}: {name} not in .npz")
        single = os.path.join(d, base + ".safetensors")
        if name in header:
            err = st_equal(where, header[name], body, arr)
            if err:
                bad.append(err)
            checked["safetensors"] += 1
            h1, b1 = st_header(single)
            err = st_equal(where + ".safetensors", h1[name], b1, arr)
            if err:
                bad.append(err)
            by_package(where, single, h1)
            checked["single"] += 1
        elif name not in left_out:
            bad.append(f"{where}: {name} neither in .safetensors nor left out")
        elif os.path.exists(single):
            bad.append(f"{where}: left out of .safetensors yet {base}.safetensors exists")
        sj = os.path.join(d, base + ".stats.json")
        if arr.dtype.kind in "biuf":
            got = json.loads(read_whole(sj))
            err = stats_equal(where, got, arr)
            if err:
                bad.append(err)
            checked["stats"] += 1

print(f"{mnt}: {len(roots)} roots, checked {checked}")
for b in bad:
    print("MISMATCH", b)
sys.exit(1 if bad else 0)
