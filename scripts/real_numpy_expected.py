#!/usr/bin/env python3
"""Regenerates fixtures/real/numpy/expected.json (issue 54): what numpy reads from each real
`.npy` / `.npz` file in fixtures/real/numpy/ (files written by other projects; where each came
from is in ORIGIN.md there).

Format: {"<file>": {"<member>": {...}}}, where <member> is the member's name as in
`np.load(path).files` for an `.npz` (its zip name less ".npy") and the file's own name for an
`.npy`:

    "descr"    the header's dtype as `dtype.str` ("<f8", ">c16", "|S3", "<U3", "|O", "|V44"...)
    "shape"    the header's shape, a list
    "fortran"  the header's fortran_order
    "sha256"   of the elements in C order, little-endian:
               np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
    "refused"  instead of "sha256", for arrays modelfs should not decode:
               "object array" (dtype holds Python objects: a pickle) or
               "structured array" (a record dtype; its fields are in "fields")
    "fields"   for a structured dtype: `dtype.descr`
    "zip"      for an .npz member: "stored" or "deflated"

Headers are read with numpy.lib.format without unpickling anything; only plain arrays are
loaded (allow_pickle=False).

    python3 scripts/real_numpy_expected.py [DIR]     (default fixtures/real/numpy; needs numpy)
"""
import hashlib
import io
import json
import os
import sys
import warnings
import zipfile

import numpy as np
from numpy.lib import format as npformat

DIR = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "real", "numpy")


def header(fp):
    version = npformat.read_magic(fp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "created on Python 2" header parsing
        if version == (1, 0):
            shape, fortran, dtype = npformat.read_array_header_1_0(fp, max_header_size=1 << 30)
        else:
            shape, fortran, dtype = npformat.read_array_header_2_0(fp, max_header_size=1 << 30)
    return version, shape, fortran, dtype


def entry(data):
    """The expected entry for one .npy image (bytes)."""
    _, shape, fortran, dtype = header(io.BytesIO(data))
    e = {"descr": dtype.str, "shape": list(shape), "fortran": bool(fortran)}
    if dtype.hasobject:
        e["refused"] = "object array"
    elif dtype.fields is not None:
        e["refused"] = "structured array"
        e["fields"] = [list(f) for f in dtype.descr]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a = np.load(io.BytesIO(data), allow_pickle=False)
        assert a.dtype == dtype and list(a.shape) == list(shape)
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        e["sha256"] = hashlib.sha256(b).hexdigest()
    return e


def main():
    out = {}
    for name in sorted(os.listdir(DIR)):
        path = os.path.join(DIR, name)
        if name.endswith(".npy"):
            with open(path, "rb") as f:
                out[name] = {name: entry(f.read())}
        elif name.endswith(".npz"):
            members = {}
            with zipfile.ZipFile(path) as z:
                infos = {i.filename: i for i in z.infolist()}
                with np.load(path, allow_pickle=False) as npz:
                    files = npz.files
                for member in files:
                    info = infos.get(member + ".npy") or infos[member]
                    e = entry(z.read(info))
                    e["zip"] = {zipfile.ZIP_STORED: "stored",
                                zipfile.ZIP_DEFLATED: "deflated"}.get(info.compress_type,
                                                                    str(info.compress_type))
                    members[member] = e
            out[name] = members
    with open(os.path.join(DIR, "expected.json"), "w") as f:
        json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
