"""The float8 types numpy lacks, widened to float32 by the formats' definitions (not by
modelfs's code): what a mount's `.npy` of such a tensor must hold."""
import numpy as np

def widen_float8(dtype, bits):
    """float8 bits as float32, by the formats' definitions (not the reader's code)."""
    e, m, bias = {"float8_e5m2": (5, 2, 15), "float8_e4m3fn": (4, 3, 7),
                  "float8_e4m3fnuz": (4, 3, 8), "float8_e5m2fnuz": (5, 2, 16)}[dtype]
    out = []
    for b in bits:
        s = -1.0 if b >> 7 else 1.0
        ex, man = (b >> m) & ((1 << e) - 1), b & ((1 << m) - 1)
        if dtype.endswith("fnuz") and b == 0x80:
            v = float("nan")
        elif dtype == "float8_e5m2" and ex == 31:
            v = s * float("inf") if man == 0 else float("nan")
        elif dtype == "float8_e4m3fn" and ex == 15 and man == 7:
            v = float("nan")
        elif ex == 0:
            v = s * man * 2.0 ** (1 - bias - m)
        else:
            v = s * (1 + man / 2 ** m) * 2.0 ** (ex - bias)
        out.append(v)
    return np.array(out, dtype="<f4")


# safetensors' names of the same types.
SAFETENSORS = {"F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
               "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz"}
