#!/usr/bin/env python3
"""Writes the numpy fixtures (issue 41) with numpy itself, and what numpy reads back from them
(fixtures/numpy/expected.json: each array's dtype, shape and its elements' bytes in C order,
little-endian), so that tests need neither: every plain dtype, big-endian and Fortran-order
arrays, a 0-d and an empty array, an object array (a pickle, to be refused), an `.npz` written
by `np.savez` (stored) and one by `np.savez_compressed` (deflated).

    python3 scripts/gen_numpy.py [OUT]     (default fixtures/numpy)
"""
import json
import os
import sys

import numpy as np

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "numpy")
rng = np.random.default_rng(41)


def arrays():
    out = {}
    shapes = [(3, 4), (5,), (), (2, 3, 2), (0, 3)]
    for i, dt in enumerate(["b1", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4",
                            "f8", "c8", "c16"]):
        shape = shapes[i % len(shapes)]
        n = int(np.prod(shape)) if shape else 1
        a = np.frombuffer(rng.integers(0, 256, n * np.dtype(dt).itemsize, dtype=np.uint8).tobytes(),
                          dtype="<" + dt if dt != "b1" else "?").reshape(shape).copy()
        if dt == "b1":
            a = (a.view(np.uint8) & 1).astype("?")
        if dt.startswith(("f", "c")):
            a = rng.standard_normal(n).astype(dt).reshape(shape) if dt[0] == "f" else \
                (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt).reshape(shape)
        out[f"dt/{dt}"] = a
    out["big_endian_f8"] = rng.standard_normal((3, 2)).astype(">f8")
    out["big_endian_c8"] = (rng.standard_normal(3) + 1j).astype(">c8")
    out["fortran_i4"] = np.asfortranarray(np.arange(24, dtype="<i4").reshape(2, 3, 4))
    out["fortran_f4"] = np.asfortranarray(rng.standard_normal((5, 3)).astype("<f4"))
    return out


def expected(a):
    le = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"))
    return {"descr": a.dtype.str, "shape": list(a.shape), "hex": le.tobytes().hex()}


def main():
    os.makedirs(OUT, exist_ok=True)
    exp = {}
    arrs = arrays()
    # One .npy per kind of header and layout.
    for key in ["dt/f4", "big_endian_f8", "fortran_i4", "dt/b1"]:
        name = key.replace("/", "_") + ".npy"
        np.save(os.path.join(OUT, name), arrs[key])
        exp[name] = {name[:-4]: expected(arrs[key])}
    np.save(os.path.join(OUT, "object.npy"), np.array([{"a": 1}, None], dtype=object),
            allow_pickle=True)
    np.savez(os.path.join(OUT, "arrays.npz"), **arrs)
    exp["arrays.npz"] = {k: expected(a) for k, a in arrs.items()}
    small = {k: arrs[k] for k in ["dt/f4", "fortran_f4"]}
    np.savez_compressed(os.path.join(OUT, "compressed.npz"), **small)
    exp["compressed.npz"] = {k: expected(a) for k, a in small.items()}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
