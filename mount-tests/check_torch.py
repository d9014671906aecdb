"""Checks a mount of a PyTorch source against what `torch.load(weights_only=True)` read from
it when the fixture was written (fixtures/torch/expected.json, scripts/gen_torch.py), so
that no torch is needed here: every tensor's `.bin` is torch's bytes (row-major,
little-endian, views and shared storages resolved), its `.npy` holds the same values
(bfloat16 and float8 widened to float32 as `.npy` shows them), its
`.json` names its dtype and shape; a tensor torch's reading does not decode here has a
problem and its data files fail; every directory's `__values__.json` holds the plain values;
and the mount's `.safetensors` view gives every decoded tensor back with the same bytes.

argv: mountpoint, expected.json, then the keys of expected.json to check. Exit 1 naming
every mismatch.
"""
import json
import os
import sys

import numpy as np
from safetensors import deserialize

from narrow_floats import widen_float8


mnt, exp_path, files = sys.argv[1], sys.argv[2], sys.argv[3:]
exp = json.load(open(exp_path))
bad = []
checked = 0
decoded = {}
for f in files:
    for key, t in exp[f]["tensors"].items():
        base = os.path.join(mnt, key)
        meta = json.load(open(base + ".json"))
        if t.get("problem") or t["dtype"] in ("complex32", "float8_e8m0fnu"):
            # Not decoded (a dtype, a quantized tensor): a note, not a problem (issue 69).
            if "note" not in meta or "problem" in meta:
                bad.append(f"{key}: no note (or a problem) in its .json")
            try:
                open(base + ".bin", "rb").read()
                bad.append(f"{key}: .bin read without an error")
            except OSError:
                pass
            continue
        if meta["shape"] != t["shape"] or meta["dtype"] != t["dtype"]:
            bad.append(f"{key}: {meta['dtype']} {meta['shape']} != {t['dtype']} {t['shape']}")
        data = bytes.fromhex(t["hex"])
        if open(base + ".bin", "rb").read() != data:
            bad.append(f"{key}: .bin differs")
        got = np.load(base + ".npy")
        if t["dtype"] == "bfloat16":
            want = (np.frombuffer(data, "<u2").astype("<u4") << 16).view("<f4")
        elif t["dtype"].startswith("float8"):
            want = widen_float8(t["dtype"], data)
            if "values" in t and want.tolist() != np.array(t["values"], "<f4").tolist():
                bad.append(f"{key}: the formats' definition differs from torch's values")
        else:
            want = np.frombuffer(data, "<" + got.dtype.str[1:] if got.dtype.str[0] in "<>" else got.dtype)
        want = want.reshape(t["shape"])
        if got.shape != want.shape or got.tobytes() != want.tobytes():
            bad.append(f"{key}: .npy differs ({got.dtype} {got.shape})")
        decoded[key] = data
        checked += 1
    for d, want in exp[f].get("values", {}).items():
        doc = json.load(open(os.path.join(mnt, d, "__values__.json")))
        if doc["values"] != want:
            bad.append(f"{d}/__values__.json: {doc['values']} != {want}")
view = os.path.join(mnt, ".safetensors")
with open(view, "rb") as fh:
    shown = dict(deserialize(fh.read()))
for key, data in decoded.items():
    if key in ("complex128",):
        continue  # safetensors has no complex128: the view leaves it out
    v = shown.get(key)
    if v is None or bytes(v["data"]) != data:
        bad.append(f".safetensors: {key} differs or is missing")
print(f"checked {checked} tensors")
if bad:
    print("\n".join(bad))
    sys.exit(1)
