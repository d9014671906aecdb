#!/usr/bin/env python3
"""Writes fixtures/gguf/ggml_c.gguf (issue 54) with ggml's own C library, the code path
llama.cpp's `llama-quantize` uses: every tensor is quantized by `ggml_quantize_chunk` (the
reference quantizers, with a unit importance matrix where a type needs one) and the file is
written by ggml's C GGUF writer (`gguf_init_empty` / `gguf_add_tensor` / `gguf_write_to_file`),
not by gguf-py. It has one tensor of each type ggml can quantize (F32, F16, BF16, Q4_0..Q8_0,
Q2_K..Q6_K, the i-quants, TQ1_0, TQ2_0, MXFP4, NVFP4, Q1_0), 2 rows of 2-3 blocks each.

fixtures/gguf/ggml_c.json is what gguf-py's reader and `gguf.quants.dequantize` read back, in
the format of fixtures/gguf/expected.json (Q1_0: raw only, gguf-py cannot dequantize it); the
script also checks those values bit for bit against ggml's own C dequantizer (`to_float`).

The ggml library is the one bundled in the `pywhispercpp` wheel (1.5.1 bundles ggml 0.13.1);
no compiler is needed:

    pip install gguf numpy && pip install --no-deps pywhispercpp==1.5.1
    python3 scripts/gen_gguf_ggml_c.py [OUT]     (default fixtures/gguf)

or set GGML_BASE_LIB to another libggml-base.so.
"""
import ctypes as C
import glob
import importlib.metadata
import json
import os
import sys
import sysconfig

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gguf")
rng = np.random.default_rng(5454)


def load_ggml():
    path = os.environ.get("GGML_BASE_LIB")
    if not path:
        site = sysconfig.get_paths()["purelib"]
        found = sorted(glob.glob(os.path.join(site, "pywhispercpp.libs", "libggml-base-*.so*")))
        if not found:
            sys.exit("no libggml-base: pip install --no-deps pywhispercpp==1.5.1, or set GGML_BASE_LIB")
        path = found[0]
    lib = C.CDLL(path)
    lib.ggml_quantize_chunk.restype = C.c_size_t
    lib.ggml_quantize_chunk.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64,
                                        C.c_int64, C.c_void_p]
    lib.ggml_quantize_requires_imatrix.restype = C.c_bool
    lib.ggml_quantize_requires_imatrix.argtypes = [C.c_int]
    lib.ggml_quantize_init.argtypes = [C.c_int]
    lib.ggml_init.restype = C.c_void_p
    lib.ggml_init.argtypes = [InitParams]
    lib.ggml_free.argtypes = [C.c_void_p]
    lib.ggml_new_tensor_2d.restype = C.c_void_p
    lib.ggml_new_tensor_2d.argtypes = [C.c_void_p, C.c_int, C.c_int64, C.c_int64]
    lib.ggml_set_name.restype = C.c_void_p
    lib.ggml_set_name.argtypes = [C.c_void_p, C.c_char_p]
    lib.ggml_get_data.restype = C.c_void_p
    lib.ggml_get_data.argtypes = [C.c_void_p]
    lib.ggml_nbytes.restype = C.c_size_t
    lib.ggml_nbytes.argtypes = [C.c_void_p]
    lib.gguf_init_empty.restype = C.c_void_p
    lib.gguf_free.argtypes = [C.c_void_p]
    lib.gguf_set_val_str.argtypes = [C.c_void_p, C.c_char_p, C.c_char_p]
    lib.gguf_set_val_u32.argtypes = [C.c_void_p, C.c_char_p, C.c_uint32]
    lib.gguf_add_tensor.argtypes = [C.c_void_p, C.c_void_p]
    lib.gguf_write_to_file.restype = C.c_bool
    lib.gguf_write_to_file.argtypes = [C.c_void_p, C.c_char_p, C.c_bool]
    lib.ggml_get_type_traits.restype = C.POINTER(TypeTraits)
    lib.ggml_get_type_traits.argtypes = [C.c_int]
    return lib, path


class InitParams(C.Structure):
    _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]


class TypeTraits(C.Structure):  # ggml.h struct ggml_type_traits
    _fields_ = [("type_name", C.c_char_p), ("blck_size", C.c_int64),
                ("blck_size_interleave", C.c_int64), ("type_size", C.c_size_t),
                ("is_quantized", C.c_bool), ("to_float", C.c_void_p),
                ("from_float_ref", C.c_void_p)]


TO_FLOAT = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p, C.c_int64)

# What ggml_quantize_chunk handles (it aborts on Q8_1 and Q8_K).
TYPES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K,
         Q.Q5_K, Q.Q6_K, Q.IQ2_XXS, Q.IQ2_XS, Q.IQ3_XXS, Q.IQ1_S, Q.IQ4_NL, Q.IQ3_S, Q.IQ2_S,
         Q.IQ4_XS, Q.IQ1_M, Q.TQ1_0, Q.TQ2_0, Q.MXFP4, Q.NVFP4, Q.Q1_0]


def write(lib, path):
    ctx_gguf = lib.gguf_init_empty()
    lib.gguf_set_val_str(ctx_gguf, b"general.architecture", b"llama")
    lib.gguf_set_val_str(ctx_gguf, b"general.name", b"modelfs ggml C fixture")
    lib.gguf_set_val_u32(ctx_gguf, b"general.quantization_version", 2)
    ctx = lib.ggml_init(InitParams(8 << 20, None, False))
    keep = []
    for q in TYPES:
        bs, ts = gguf.GGML_QUANT_SIZES[q]
        per_row = (2 if bs >= 64 else 3) * bs if bs > 1 else 40
        x = rng.standard_normal((2, per_row)).astype(np.float32)
        x[0, : max(bs, 1)] *= 0.01  # a block of small values
        lib.ggml_quantize_init(int(q))
        im = np.ones(per_row, np.float32)
        need_im = lib.ggml_quantize_requires_imatrix(int(q))
        t = lib.ggml_new_tensor_2d(ctx, int(q), per_row, 2)
        lib.ggml_set_name(t, f"blk.{q.value}.{q.name.lower()}".encode())
        n = lib.ggml_quantize_chunk(int(q), x.ctypes.data, lib.ggml_get_data(t), 0, 2, per_row,
                                    im.ctypes.data if need_im else None)
        assert n == lib.ggml_nbytes(t), (q.name, n)
        lib.gguf_add_tensor(ctx_gguf, t)
        keep.append(x)
    assert lib.gguf_write_to_file(ctx_gguf, path.encode(), False)
    lib.gguf_free(ctx_gguf)
    lib.ggml_free(ctx)


def c_dequantize(lib, raw, q):
    tt = lib.ggml_get_type_traits(int(q)).contents
    if not tt.to_float:
        return None
    raw = np.ascontiguousarray(raw).view(np.uint8).ravel()
    n = raw.size // tt.type_size * tt.blck_size
    out = np.empty(n, np.float32)
    TO_FLOAT(tt.to_float)(raw.ctypes.data, out.ctypes.data, n)
    return out


def plain(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, bytes):
        return v.decode()
    return v


STORED = {Q.F32: "float32", Q.F16: "float16", Q.BF16: "bfloat16"}


def expected(lib, path):
    r = gguf.GGUFReader(path)
    meta = {k: plain(f.contents()) for k, f in r.fields.items() if not k.startswith("GGUF.")}
    out = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        raw = bytes(np.asarray(t.data).tobytes())
        e = {"type": t.tensor_type.name, "shape": shape, "raw": raw.hex()}
        if t.tensor_type in STORED:
            e["dtype"] = STORED[t.tensor_type]
            e["values"] = raw.hex()
        elif t.tensor_type in gguf.quants._type_traits:
            v = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype="<f4")
            assert list(v.shape) == shape and np.isfinite(v).all(), t.name
            c = c_dequantize(lib, t.data, t.tensor_type)
            assert c is not None and np.array_equal(c.view(np.uint32), v.ravel().view(np.uint32)), \
                f"{t.name}: gguf-py and ggml's C dequantizer disagree"
            e["dtype"] = "float32"
            e["values"] = v.tobytes().hex()
        out[t.name] = e
    return {"metadata": meta, "tensors": out}


def main():
    lib, libpath = load_ggml()
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "ggml_c.gguf")
    write(lib, path)
    try:
        ggml = "pywhispercpp " + importlib.metadata.version("pywhispercpp")
    except importlib.metadata.PackageNotFoundError:
        ggml = os.path.basename(libpath)
    exp = {"_gguf": importlib.metadata.version("gguf"), "_ggml": ggml,
           "ggml_c.gguf": expected(lib, path)}
    with open(os.path.join(OUT, "ggml_c.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
