#!/usr/bin/env python3
"""Writes fixtures/gguf/kquants.gguf (issue 54) with the real `gguf` package (llama.cpp's
gguf-py) and what its reader and `gguf.quants.dequantize` read back from it
(fixtures/gguf/kquants.json, in the format of fixtures/gguf/expected.json), so that tests need
no gguf: one tensor of every ggml quantized type the installed gguf-py can dequantize (the
K-quants Q2_K..Q6_K, the i-quants IQ1_S..IQ4_XS, TQ1_0, TQ2_0, MXFP4, NVFP4 and the legacy
Q4_0..Q8_0), each 2 rows of 2-3 blocks, and the types it cannot dequantize (Q8_K, Q1_0) shown
raw only.

Tensors of a type gguf-py can quantize are made by `gguf.quants.quantize`; the others are
random block bytes written with `raw_dtype=`, except that every scale field of a block (the
float16 `d`/`dmin`, Q8_K's float32 `d`, IQ1_M's float16 spread over its scale nibbles,
NVFP4's UE4M3 sub-block scales) is set to a finite, moderate value (|d| in 0.01..1), so the
dequantized values are finite. The block layouts are ggml-common.h's (as gguf-py's quants.py
reads them).

Q8_1 is left out on purpose: gguf-py's GGML_QUANT_SIZES gives it 40 bytes a block (the old
float d, float s layout) while ggml's block_q8_1 is 36 (half d, half s), so a Q8_1 tensor
written by gguf-py would not be what llama.cpp reads. It is an activation-only type, never
stored in model files.

    /work/ggufenv/bin/python scripts/gen_gguf_kquants.py [OUT]     (default fixtures/gguf)

(needs numpy and gguf: `pip install gguf numpy`; values were recorded with the gguf version
in "_gguf".)
"""
import importlib.metadata
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "gguf")
rng = np.random.default_rng(54)

# Offsets of the float16 scale fields in each block (ggml-common.h).
F16_FIELDS = {
    Q.Q2_K: [80, 82],      # scales[16] qs[64] d dmin
    Q.Q3_K: [108],         # hmask[32] qs[64] scales[12] d
    Q.Q4_K: [0, 2],        # d dmin scales[12] qs[128]
    Q.Q5_K: [0, 2],        # d dmin scales[12] qh[32] qs[128]
    Q.Q6_K: [208],         # ql[128] qh[64] scales[16] (int8) d
    Q.IQ2_XXS: [0],        # d qs[32] (u16)
    Q.IQ2_XS: [0],         # d qs[32] (u16) scales[8]
    Q.IQ2_S: [0],          # d qs[64] qh[8] scales[8]
    Q.IQ3_XXS: [0],        # d qs[96]
    Q.IQ3_S: [0],          # d qs[64] qh[8] signs[32] scales[4]
    Q.IQ1_S: [0],          # d qs[32] qh[8] (u16)
    Q.IQ4_NL: [0],         # d qs[16]
    Q.IQ4_XS: [0],         # d scales_h (u16) scales_l[4] qs[128]
    Q.Q1_0: [0],           # d qs[16]
}


def moderate(n):
    """n random values with |x| in 0.01..1 and a random sign."""
    return rng.uniform(0.01, 1.0, n) * rng.choice([-1.0, 1.0], n)


def f16_bytes(n):
    return moderate(n).astype("<f2").view(np.uint8).reshape(n, 2)


def random_blocks(q, rows, blocks_per_row):
    """Random block bytes of type q, with every scale field finite and moderate."""
    bs, ts = gguf.GGML_QUANT_SIZES[q]
    n = rows * blocks_per_row
    b = rng.integers(0, 256, (n, ts), dtype=np.uint8)
    if q in F16_FIELDS:
        for off in F16_FIELDS[q]:
            b[:, off:off + 2] = f16_bytes(n)
    elif q == Q.IQ1_M:
        # qs[32] qh[16] scales[8]: the block's float16 is the top nibble of each of the four
        # uint16 of scales (bits 0-3 from the first, ... bits 12-15 from the fourth).
        d = moderate(n).astype("<f2").view("<u2").astype(np.uint16)
        sc = b[:, 48:56].copy().view("<u2")  # (n, 4)
        for i in range(4):
            nib = (d >> np.uint16(4 * i)) & np.uint16(0xF)
            sc[:, i] = (sc[:, i] & np.uint16(0x0FFF)) | (nib << np.uint16(12))
        b[:, 48:56] = sc.view(np.uint8)
        assert np.array_equal(d, _iq1m_d(b)), "IQ1_M scale packing"
    elif q == Q.NVFP4:
        # d[4] (UE4M3, one per 16 elements) qs[32]
        s = rng.uniform(0.01, 1.0, (n, 4)).astype(np.float32)
        b[:, 0:4] = gguf.quants.NVFP4.fp32_to_ue4m3(s)
    elif q == Q.Q8_K:
        # float32 d, int8 qs[256], int16 bsums[16] = sums of qs in groups of 16 (as ggml's
        # quantize_row_q8_K writes them).
        b[:, 0:4] = moderate(n).astype("<f4").view(np.uint8).reshape(n, 4)
        qs = b[:, 4:260].view(np.int8).astype(np.int16)
        b[:, 260:292] = qs.reshape(n, 16, 16).sum(-1).astype("<i2").view(np.uint8)
    else:
        raise ValueError(f"no layout for {q.name}")
    return b.reshape(rows, blocks_per_row * ts)


def _iq1m_d(b):
    sc = b[:, 48:56].copy().view("<u2")
    d = np.zeros(b.shape[0], np.uint16)
    for i in range(4):
        d |= (sc[:, i] >> np.uint16(12)) << np.uint16(4 * i)
    return d


def can_dequantize(q):
    return q in gguf.quants._type_traits


def can_quantize(q):
    t = gguf.quants._type_traits.get(q)
    if t is None:
        return False
    try:
        t.quantize(np.zeros((1, t.block_size), np.float32))
        return True
    except NotImplementedError:
        return False


PLAIN = {Q.F32, Q.F16, Q.BF16, Q.F64, Q.I8, Q.I16, Q.I32, Q.I64}
# Left out: see the docstring.
SKIP = {Q.Q8_1}


def tensors():
    out = {}
    for q in Q:
        if q in PLAIN or q in SKIP:
            continue
        bs, ts = gguf.GGML_QUANT_SIZES[q]
        per_row = 2 if bs >= 64 else 3
        name = f"blk.{q.value}.{q.name.lower()}"
        if can_quantize(q):
            x = rng.standard_normal((2, per_row * bs)).astype(np.float32)
            x[0, :bs] *= 0.001  # a block of small values
            out[name] = (gguf.quants.quantize(x, q), q)
        else:
            out[name] = (random_blocks(q, 2, per_row), q)
    return out


def write(path):
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("modelfs k-quant fixture")
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, (t, q) in tensors().items():
        w.add_tensor(name, t, raw_dtype=q)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


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


def expected(path):
    r = gguf.GGUFReader(path)
    meta = {k: plain(f.contents()) for k, f in r.fields.items() if not k.startswith("GGUF.")}
    out = {}
    for t in r.tensors:
        shape = [int(d) for d in reversed(t.shape)]
        raw = bytes(np.asarray(t.data).tobytes())
        e = {"type": t.tensor_type.name, "shape": shape, "raw": raw.hex()}
        if can_dequantize(t.tensor_type):
            v = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype="<f4")
            assert list(v.shape) == shape, (t.name, v.shape, shape)
            assert np.isfinite(v).all(), t.name
            e["dtype"] = "float32"
            e["values"] = v.tobytes().hex()
        out[t.name] = e
    return {"metadata": meta, "tensors": out}


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "kquants.gguf")
    write(path)
    exp = {"_gguf": importlib.metadata.version("gguf"), "kquants.gguf": expected(path)}
    with open(os.path.join(OUT, "kquants.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
