#!/usr/bin/env python3
"""Cuts a real GGUF file down to a few of its tensors, their bytes copied unchanged, so that
blocks quantized by another project's tools (llama.cpp's llama-quantize) can be committed as
a small fixture. The scalar metadata is kept; arrays (the tokenizer's) are left out.

    python3 scripts/trim_gguf.py SRC OUT NAME...     (needs gguf, numpy)

fixtures/real/gguf/gemma-3-270m-q4_k_m.trimmed.gguf was made from the Q4_K_M file named in
fixtures/real/gguf/ORIGIN.md with the five tensors listed there (the smallest of each type).
"""
import sys

import numpy as np
import gguf
from gguf import GGUFValueType as V

src, out, names = sys.argv[1], sys.argv[2], sys.argv[3:]
r = gguf.GGUFReader(src)
arch = r.fields["general.architecture"].contents()
w = gguf.GGUFWriter(out, arch)
SCALAR = {V.UINT8: w.add_uint8, V.INT8: w.add_int8, V.UINT16: w.add_uint16,
          V.INT16: w.add_int16, V.UINT32: w.add_uint32, V.INT32: w.add_int32,
          V.UINT64: w.add_uint64, V.INT64: w.add_int64, V.FLOAT32: w.add_float32,
          V.FLOAT64: w.add_float64, V.BOOL: w.add_bool, V.STRING: w.add_string}
for key, f in r.fields.items():
    if key.startswith("GGUF.") or key == "general.architecture" or len(f.types) != 1:
        continue
    SCALAR[f.types[0]](key, f.contents())
by_name = {t.name: t for t in r.tensors}
for name in names:
    t = by_name[name]
    # The reader gives a quantized tensor as its bytes by row, which the writer takes with
    # raw_dtype as they are; a plain one as its numpy array.
    data = np.array(t.data)
    if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
        w.add_tensor(name, data)
    else:
        w.add_tensor(name, data, raw_dtype=t.tensor_type)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
