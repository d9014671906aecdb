"""Generates npy/*.npy (np.save of small arrays the Rust tests rebuild) and npy_headers.txt.

Run from this folder: python3 gen_npy.py
"""
import io
import warnings

import numpy as np
from numpy.lib._format_impl import _write_array_header

cases = {
    "f32_3x4": np.arange(12, dtype="<f4").reshape(3, 4) / 4,
    "f64_scalar": np.array(2.5, dtype="<f8"),
    "i8_5": np.array([-3, -1, 0, 1, 127], dtype="i1"),
    "bool_2x3": np.array([[True, False, True], [False, False, True]]),
    "f16_2x2": np.array([[0.1, -2.0], [65504, 0.0]], dtype="<f2"),
    "c64_2": np.array([1 + 2j, -0.5 - 1e-5j], dtype="<c8"),
    "bf16_3": np.array([1.0, -0.5, 3.140625], dtype="<f4"),
    "u64_0": np.zeros((0,), dtype="<u8"),
    "i32_2x0x3": np.zeros((2, 0, 3), dtype="<i4"),
    "u16_2x3x4": np.arange(24, dtype="<u2").reshape(2, 3, 4),
}
for name, a in cases.items():
    np.save("npy/%s.npy" % name, a)

lines = []
warnings.simplefilter("ignore")
for descr, shape in [("<f4", (12345678901,)), ("|u1", (3, 1000000, 7, 1)), ("<c16", ()),
                     ("<f8", tuple(range(1, 40))), ("|S7", (2**64 - 1, 2)), ("<i2", (1,) * 3000), ("<i2", (1,) * 22000)]:
    buf = io.BytesIO()
    _write_array_header(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    h = buf.getvalue()
    if len(h) > 20000:  # version 2.0: keep the prefix and the length only
        lines.append("%s;%s;%s;%d" % (descr, "1x%d" % len(shape), h[:12].hex(), len(h)))
    else:
        lines.append("%s;%s;%s" % (descr, ",".join(map(str, shape)), h.hex()))
open("npy_headers.txt", "w").write("\n".join(lines) + "\n")
