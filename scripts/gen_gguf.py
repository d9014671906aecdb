#!/usr/bin/env python3
"""Writes the GGUF fixtures (issue 41) with the real `gguf` package (llama.cpp's gguf-py), and
what its reader and `dequantize` read back from them (fixtures/gguf/expected.json), so that
tests need no gguf: metadata of every value type (arrays, nested arrays, strings), tensors of
every plain type (F32, F16, BF16, F64, I8–I64), the quantized types gguf-py can write (Q8_0,
Q4_0, Q4_1, Q5_0, Q5_1) and one it cannot decode here (Q4_K: random blocks, shown raw);
and plain.gguf, plain types only (as an unquantized conversion is).

    python3 scripts/gen_gguf.py (with numpy and gguf) [OUT]     (default fixtures/gguf)
"""
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gguf")
rng = np.random.default_rng(41)


def write(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("modelfs fixture")
    w.add_context_length(128)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 65000)
    w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -70000)
    w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -(2**40))
    w.add_float64("t.f64", 1e-300)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo\nworld")
    w.add_array("t.ints", [1, 2, 3])
    w.add_array("t.strs", ["a", "", "ü"])
    w.add_array("t.floats", [0.5, -1.25])
    w.add_array("t.nested", [[1, 2], [3]])
    w.add_token_list(["<s>", "</s>", "hi"])
    tensors = {}
    x = rng.standard_normal((4, 64)).astype(np.float32)
    tensors["plain.f32"] = (x, None)
    tensors["plain.f16"] = (rng.standard_normal((3, 5)).astype(np.float16), None)
    tensors["plain.f64"] = (rng.standard_normal((2, 3)), None)
    tensors["plain.i8"] = (rng.integers(-128, 127, (7,), dtype=np.int8), None)
    tensors["plain.i16"] = (rng.integers(-30000, 30000, (2, 2), dtype=np.int16), None)
    tensors["plain.i32"] = (rng.integers(-2**31, 2**31 - 1, (3,), dtype=np.int32), None)
    tensors["plain.i64"] = (rng.integers(-2**62, 2**62, (2,), dtype=np.int64), None)
    tensors["plain.scalar"] = (np.array([1.5], dtype=np.float32), None)
    tensors["blk.0.bf16"] = (gguf.quants.quantize(x, Q.BF16), Q.BF16)
    for q in [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]:
        y = rng.standard_normal((3, 2, 64)).astype(np.float32) * 3
        y[0, 0, :32] = 0  # an all-zero block: d = 0
        tensors[f"blk.0.{q.name.lower()}"] = (gguf.quants.quantize(y, q), q)
    # A type gguf-py cannot write: its blocks at random, shown raw.
    bs, ts = gguf.GGML_QUANT_SIZES[Q.Q4_K]
    tensors["blk.1.q4_k"] = (rng.integers(0, 256, (2, ts), dtype=np.uint8), Q.Q4_K)
    for name, (t, q) in tensors.items():
        if q is None:
            w.add_tensor(name, t)
        else:
            w.add_tensor(name, t, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_plain(path):
    """Plain types only, as a converter writes an unquantized model: every tensor is its
    bytes in place, so `.tf/` of it can be the file itself."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("modelfs plain fixture")
    w.add_tensor("token_embd.weight", rng.standard_normal((16, 64)).astype(np.float32))
    w.add_tensor("blk.0.attn_q.weight", rng.standard_normal((64, 64)).astype(np.float16))
    w.add_tensor("blk.0.attn_norm.weight", rng.standard_normal((64,)).astype(np.float32))
    w.add_tensor("blk.0.ids", rng.integers(-2**31, 2**31 - 1, (5,), dtype=np.int32))
    w.add_tensor("output.weight", rng.standard_normal((3, 64)).astype(np.float64))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


# The quantized types modelfs decodes (others are shown raw, `.bin` only).
DEQUANTIZED = [Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]


def plain(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, bytes):
        return v.decode()
    return v


def expected(path):
    r = gguf.GGUFReader(path)
    meta = {}
    for k, f in r.fields.items():
        if k.startswith("GGUF."):
            continue
        meta[k] = plain(f.contents())
    # gguf-py's contents() flattens an array of arrays; the writer wrote this.
    if "t.nested" in meta:
        meta["t.nested"] = [[1, 2], [3]]
    tensors = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        raw = bytes(np.asarray(t.data).tobytes())
        e = {"type": t.tensor_type.name, "shape": shape, "raw": raw.hex()}
        stored = {Q.F16: "float16", Q.F64: "float64", Q.I8: "int8", Q.I16: "int16",
                  Q.I32: "int32", Q.I64: "int64", Q.F32: "float32", Q.BF16: "bfloat16"}
        if t.tensor_type in stored:
            # Shown in their stored type (bfloat16: its bits).
            e["dtype"] = stored[t.tensor_type]
            e["values"] = raw.hex()
        elif t.tensor_type in DEQUANTIZED:
            v = gguf.quants.dequantize(t.data, t.tensor_type)
            e["dtype"] = "float32"
            e["values"] = np.ascontiguousarray(v, dtype=np.float32).tobytes().hex()
        tensors[t.name] = e
    return {"metadata": meta, "tensors": tensors}


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "model.gguf")
    write(path)
    exp = {"model.gguf": expected(path), "_gguf": gguf.__name__}
    plain_path = os.path.join(OUT, "plain.gguf")
    write_plain(plain_path)
    exp["plain.gguf"] = expected(plain_path)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
