#!/usr/bin/env python3
"""Writes the safetensors fixtures (issue 41) with the real `safetensors` package, and what
that package reads back from them (fixtures/safetensors/expected.json), so that tests need
neither: every dtype the writer has, shapes of rank 0 to 3 and an empty one, `__metadata__`,
and a model sharded the way `transformers` shards one (shards + `model.safetensors.index.json`).

    python3 scripts/gen_safetensors.py [OUT]     (default fixtures/safetensors)
"""
import json
import os
import sys

import numpy as np
from safetensors import TensorSpec, deserialize, serialize_file
from safetensors.numpy import save_file

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "safetensors")
rng = np.random.default_rng(41)


def raw(dtype, shape, width):
    n = int(np.prod(shape)) if shape else 1
    return rng.integers(0, 256, n * width, dtype=np.uint8)


def write_specs(path, specs, metadata):
    keep = []
    d = {}
    for name, (dtype, shape, data) in specs.items():
        keep.append(data)
        d[name] = TensorSpec(dtype=dtype, shape=list(shape), data_ptr=data.ctypes.data,
                             data_len=data.nbytes)
    serialize_file(d, path, metadata)


def expected(path):
    """What the package itself reads back: each tensor's dtype, shape and raw bytes."""
    with open(path, "rb") as f:
        got = deserialize(f.read())
    return {name: {"dtype": t["dtype"], "shape": list(t["shape"]), "hex": bytes(t["data"]).hex()}
            for name, t in got}


def main():
    os.makedirs(os.path.join(OUT, "sharded"), exist_ok=True)
    widths = {"bool": 1, "uint8": 1, "int8": 1, "float8_e5m2": 1, "float8_e4m3fn": 1,
              "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1, "int16": 2,
              "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4, "float32": 4,
              "float64": 8, "int64": 8, "uint64": 8, "complex64": 8}
    shapes = [(3, 4), (5,), (), (2, 3, 2), (0, 3)]
    specs = {}
    for i, (dtype, w) in enumerate(widths.items()):
        shape = shapes[i % len(shapes)]
        data = raw(dtype, shape, w)
        if dtype == "bool":
            data = (data & 1).astype(np.uint8)
        specs[f"t/{dtype}"] = (dtype, shape, data)
    # Two float4 values a byte: given the storage shape [2, 1], the header says [2, 2].
    specs["t/float4_e2m1fn_x2"] = ("float4_e2m1fn_x2", (2, 1), raw("u8", (2,), 1))
    # Keys as PyTorch state_dicts name them (dots), one with a '/'.
    specs["model.layers.0.weight"] = ("float32", (4, 3), rng.standard_normal(12).astype("<f4"))
    specs["model.layers.0.bias"] = ("float32", (4,), rng.standard_normal(4).astype("<f4"))
    path = os.path.join(OUT, "dtypes.safetensors")
    write_specs(path, specs, {"format": "pt", "written_by": "scripts/gen_safetensors.py"})
    exp = {"dtypes.safetensors": expected(path)}

    # A model in two shards, as transformers' save_pretrained writes it.
    weights = {f"encoder.layer.{i}.w": rng.standard_normal((8, 6)).astype("<f4") for i in range(3)}
    weights["embed.weight"] = rng.standard_normal((16, 8)).astype("<f2")
    shards = [["embed.weight", "encoder.layer.0.w"], ["encoder.layer.1.w", "encoder.layer.2.w"]]
    weight_map = {}
    total = 0
    for i, keys in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        p = os.path.join(OUT, "sharded", name)
        save_file({k: weights[k] for k in keys}, p, metadata={"format": "pt"})
        exp[f"sharded/{name}"] = expected(p)
        for k in keys:
            weight_map[k] = name
            total += weights[k].nbytes
    with open(os.path.join(OUT, "sharded", "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
