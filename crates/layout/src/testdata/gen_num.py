"""Generates num_vectors.txt: expected Python-repr and Java text of float bit patterns.

Line: <dtype> <hex bits> <py_style> <java_style or ->. Run from this folder:
python3 gen_num.py (needs numpy and /work/shared/conformance/mfcheck.py).
"""
import random
import sys
from fractions import Fraction

import numpy as np

sys.path.insert(0, "/work/shared/conformance")
import mfcheck as M  # noqa: E402

random.seed(1234)


def java(x, dt):
    s = M.java_style(x, dt)
    neg, d, e = M.shortest(x, dt) if np.isfinite(x) and x != 0 else (0, "", 0)
    if len(d) == 1:
        # JDK 19+: a one-digit shortest result is replaced by the closest <=2-digit decimal.
        two = "%.1e" % abs(float(x))
        if dt(two) == dt(abs(x)):
            m, ex = two.split("e")
            y = dt(float(two)) * (-1 if neg else 1)
            digits = m.replace(".", "").rstrip("0") or "0"
            ex = int(ex)
            sign = "-" if neg else ""
            if 1e-3 <= abs(float(x)) < 1e7:
                pass  # normal numbers never change (see num/mod.rs)
            else:
                s = "%s%s.%sE%d" % (sign, digits[0], digits[1:] or "0", ex)
    return s


def bits16_value(b, kind):
    if kind == "f16":
        return Fraction(float(np.array([b], dtype="<u2").view(np.float16)[0]))
    return Fraction(float(np.array([b << 16], dtype="<u4").view(np.float32)[0]))


def shortest16(b, kind):
    """Exact search: fewest digits, closest, ties to even digit."""
    maxb = 0x7BFF if kind == "f16" else 0x7F7F
    b &= 0x7FFF
    x = bits16_value(b, kind)
    lo = bits16_value(b - 1, kind)
    hi = bits16_value(b + 1, kind) if b < maxb else x + (x - lo)
    mlo, mhi = (lo + x) / 2, (x + hi) / 2
    even = b % 2 == 0

    def ok(y):
        nearest = mlo < y < mhi or (y in (mlo, mhi) and even)
        if kind != "bf16":
            return nearest
        # bfloat16 text must also read back through float32 truncated to its top 16 bits
        # (how the shared conformance check, and many bf16 readers, convert): y in [x, x+ulp/2].
        f = np.array([float(y)], dtype=np.float32).view("<u4")[0]
        return nearest and int(f) >> 16 == b

    e10 = len(str(int(x))) - 1 if x >= 1 else -len(str(int(1 / x)))
    while Fraction(10) ** e10 > x:
        e10 -= 1
    while Fraction(10) ** (e10 + 1) <= x:
        e10 += 1
    for n in range(1, 13):
        p = e10 - (n - 1)
        scale = Fraction(10) ** p
        c = int(x / scale)
        cands = [cc for cc in (c - 1, c, c + 1, c + 2) if cc > 0 and ok(cc * scale)]
        if cands:
            best = min(cands, key=lambda cc: (abs(cc * scale - x), cc % 2))
            d = str(best).rstrip("0")
            e = p + len(str(best)) - 1
            return d, e
    raise AssertionError


def py16(b, kind):
    inf = 0x7C00 if kind == "f16" else 0x7F80
    if (b & 0x7FFF) > inf:
        return "nan"
    if (b & 0x7FFF) == inf:
        return "-inf" if b & 0x8000 else "inf"
    x = float(bits16_value(b & 0x7FFF, kind)) * (-1 if b & 0x8000 else 1)
    if x != x:
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    if x == 0:
        return "-0.0" if b & 0x8000 else "0.0"
    d, e = shortest16(b, kind)
    sign = "-" if b & 0x8000 else ""
    if -4 <= e < 16:
        if e >= 0:
            ip = (d + "0" * max(0, e + 1 - len(d)))[: e + 1]
            fp = d[e + 1:] or "0"
        else:
            ip, fp = "0", "0" * (-e - 1) + d
        return sign + ip + "." + fp
    m = d[0] + ("." + d[1:] if len(d) > 1 else "")
    return "%s%se%s%02d" % (sign, m, "-" if e < 0 else "+", abs(e))


lines = []


def edge_values():
    vals = [0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1e-4, 1e-5, 9.999e-5, 1e-3, 9.99e-4, 1e7, 9999999.0,
            1e16, 1e15, 9999999999999998.0, 123456789.0, 3.4028235e38, 1.17549435e-38,
            1e-45, 1.4e-45, 2e23, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308,
            1.0e-7, 0.30000000000000004, 100.0, 65504.0, 6e-8, 0.001, 1e-4 * 0.99999, 1e22, 1e23]
    for v in list(vals):
        vals.append(-v)
        for k in range(-3, 4):
            vals.append(v * (10.0 ** k))
    return vals


def add_float(dt, name, ubits, nbits):
    seen = set()

    def add(bits):
        if bits in seen:
            return
        seen.add(bits)
        x = np.array([bits], dtype=ubits).view(dt)[0]
        if np.isnan(x):
            py, jv = "nan", ("NaN" if dt != np.float16 else "-")
        else:
            py = M.py_style(x, dt)
            jv = java(x, dt) if dt != np.float16 else "-"
        if dt == np.float16:
            mine = py16(bits, "f16")
            assert mine == py, (hex(bits), mine, py)
        lines.append("%s %x %s %s" % (name, bits, py, jv))

    for v in edge_values():
        with np.errstate(all="ignore"):
            b = int(np.array([v], dtype=dt).view(ubits)[0])
        for d in (-1, 0, 1):
            add((b + d) % (1 << nbits))
    for _ in range(1200):
        add(random.getrandbits(nbits))
    for _ in range(600):  # short decimals, typical of real weights
        v = round(random.uniform(-10, 10), random.randint(0, 6)) * 10.0 ** random.randint(-9, 9)
        with np.errstate(all="ignore"):
            add(int(np.array([v], dtype=dt).view(ubits)[0]))
    for k in range(0, 1 << nbits, max(1, (1 << nbits) // 256)):
        add(k)


add_float(np.float32, "f32", "<u4", 32)
add_float(np.float64, "f64", "<u8", 64)
add_float(np.float16, "f16", "<u2", 16)
bf = set(random.getrandbits(16) for _ in range(1500)) | set(range(0, 1 << 16, 256)) | {0x0001, 0x7F7F, 0x3F80, 0x3DCD, 0x8001, 0x0080, 0x007F}
for b in sorted(bf):
    if (b & 0x7FFF) > 0x7F80:
        py = "nan"
    else:
        py = py16(b, "bf16")
    lines.append("bf16 %x %s -" % (b, py))
open("num_vectors.txt", "w").write("\n".join(lines) + "\n")
print(len(lines), "vectors")
