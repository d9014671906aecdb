"""Checks a mount of safetensors files against the `safetensors` package's own reading of
them: every tensor's `.bin` is the bytes `deserialize` gives (every dtype), its `.npy` is what
`safe_open(framework="np")` gives (bfloat16 and the float8 types: widened to float32, as `.npy`
shows them), its `.json` names its dtype and shape; the mount's `.safetensors` view gives every decoded
tensor back with the same dtype and bytes.

argv: mountpoint, then the source files. Exit 1 naming every mismatch.
"""
import json
import os
import sys

import numpy as np
from safetensors import deserialize, safe_open

from narrow_floats import SAFETENSORS, widen_float8

mnt, files = sys.argv[1], sys.argv[2:]
bad = []
checked = 0
for f in files:
    with open(f, "rb") as fh:
        raw = dict(deserialize(fh.read()))
    with safe_open(f, framework="np") as st:
        for key, t in raw.items():
            base = os.path.join(mnt, key)
            meta = json.load(open(base + ".json"))
            if meta["shape"] != list(t["shape"]):
                bad.append(f"{key}: shape {meta['shape']} != {t['shape']}")
            data = bytes(t["data"])
            if open(base + ".bin", "rb").read() != data:
                bad.append(f"{key}: .bin differs")
            if t["dtype"] in ("F4", "F8_E8M0"):
                # Not decoded: a note (not a problem), its bytes as stored in `.bin`.
                if "not decoded" not in meta.get("note", "") or "problem" in meta:
                    bad.append(f"{key}: {t['dtype']} without its note")
                continue
            got = np.load(base + ".npy")
            if t["dtype"] == "BF16":
                want = (np.frombuffer(data, "<u2").astype("<u4") << 16).view("<f4")
            elif t["dtype"].startswith("F8"):
                want = widen_float8(SAFETENSORS[t["dtype"]], data)
            else:
                want = st.get_tensor(key)
            want = np.asarray(want).reshape(t["shape"])
            if got.shape != want.shape or got.tobytes() != want.tobytes():
                bad.append(f"{key}: .npy differs ({got.dtype} {got.shape} vs {want.dtype} {want.shape})")
            checked += 1
# The mount's `.safetensors` view holds every decoded tensor of every source file, with its
# dtype as written and the same bytes (F4 and F8_E8M0 too: not decoded, copied as stored).
view = os.path.join(mnt, ".safetensors")
with open(view, "rb") as fh:
    shown = dict(deserialize(fh.read()))
for f in files:
    with open(f, "rb") as fh:
        for key, t in deserialize(fh.read()):
            v = shown.get(key)
            if v is None or v["dtype"] != t["dtype"] or bytes(v["data"]) != bytes(t["data"]):
                bad.append(f".safetensors: {key} differs or is missing")
print(f"checked {checked} tensors")
if bad:
    print("\n".join(bad))
    sys.exit(1)
