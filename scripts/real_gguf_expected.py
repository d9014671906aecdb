#!/usr/bin/env python3
"""Regenerates fixtures/real/gguf/expected.json (issue 54): what gguf-py (llama.cpp's `gguf`
package) reads from each real `.gguf` file in fixtures/real/gguf/ (written by other projects;
where each came from is in ORIGIN.md there).

Format: {"_gguf": gguf-py version,
         "<file>": {"tensors": {name: {
                        "type": ggml type name ("F16", "Q4_K"...),
                        "shape": numpy-order shape (gguf-py's reader's, reversed),
                        "sha256": of the float32 little-endian values `gguf.quants.dequantize`
                                  gives for a quantized type; for a plain type (F32, F16,
                                  BF16, F64, I8..I64) of the stored elements as stored,
                        "values_head": hex of the first 16 of those elements},
                    ...},
                    "tensor_count": n, "alignment": n, "data_offset": where the tensor data
                    begins (may lie past the end of a file with no tensors),
                    "metadata": {key: value} for scalar values; arrays as
                                {"array": element type name, "len": n}}}
A tensor of a quantized type gguf-py cannot dequantize has "sha256"/"values_head" of its raw
bytes and "raw_only": true.

    python3 scripts/real_gguf_expected.py [DIR]     (default fixtures/real/gguf; needs gguf)
"""
import hashlib
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "real", "gguf")

PLAIN = {Q.F32: "<f4", Q.F16: "<f2", Q.BF16: "<u2", Q.F64: "<f8", Q.I8: "i1", Q.I16: "<i2",
         Q.I32: "<i4", Q.I64: "<i8"}


def metadata(r):
    out = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        if f.types and f.types[0] == V.ARRAY:
            out[k] = {"array": f.types[-1].name if len(f.types) > 1 else "?", "len": len(f.data)}
        else:
            v = f.contents()
            if isinstance(v, (np.integer,)):
                v = int(v)
            elif isinstance(v, (np.floating,)):
                v = float(v)
            elif isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            out[k] = v
    return out


def tensor(t):
    shape = [int(d) for d in reversed(t.shape)]
    e = {"type": t.tensor_type.name, "shape": shape}
    if t.tensor_type in PLAIN:
        a = np.ascontiguousarray(np.asarray(t.data)).view(PLAIN[t.tensor_type]).ravel()
        head = a[:16].tobytes()
        b = a.tobytes()
    elif t.tensor_type in gguf.quants._type_traits:
        v = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype="<f4")
        assert list(v.shape) == shape, t.name
        b = v.tobytes()
        head = v.ravel()[:16].tobytes()
    else:
        b = np.asarray(t.data).tobytes()
        head = b[:16]
        e["raw_only"] = True
    e["sha256"] = hashlib.sha256(b).hexdigest()
    e["values_head"] = head.hex()
    return e


def main():
    out = {"_gguf": importlib.metadata.version("gguf")}
    for name in sorted(os.listdir(DIR)):
        if not name.endswith(".gguf"):
            continue
        r = gguf.GGUFReader(os.path.join(DIR, name))
        out[name] = {"tensors": {t.name: tensor(t) for t in r.tensors},
                     "tensor_count": len(r.tensors), "alignment": int(r.alignment),
                     "data_offset": int(r.data_offset), "metadata": metadata(r)}
    with open(os.path.join(DIR, "expected.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
