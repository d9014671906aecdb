#!/usr/bin/env python3
"""fixtures/keras/h5py-chunked.h5: an HDF5 file h5py writes with chunked, compressed datasets
(gzip, shuffle, lzf-free: what h5py users and other tools write; Keras itself writes
contiguous ones), and its entry in fixtures/keras/expected.json (what h5py reads back).
Run with a Python that has h5py and numpy: `python scripts/gen_h5_chunked.py`."""
import hashlib
import json
import os

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "keras")
NAME = "h5py-chunked.h5"


def main():
    rng = np.random.default_rng(7)
    path = os.path.join(OUT, NAME)
    with h5py.File(path, "w") as f:
        g = f.create_group("model_weights/dense")
        g.create_dataset("kernel", data=rng.standard_normal((100, 37)).astype("<f4"),
                         chunks=(16, 8), compression="gzip", compression_opts=4, shuffle=True)
        g.create_dataset("bias", data=np.arange(37, dtype="<f4"), chunks=(10,), compression="gzip")
        f.create_dataset("ids", data=np.arange(1000, dtype="<i8") * 7, chunks=(64,), shuffle=True,
                         compression="gzip")
        f.create_dataset("mask", data=rng.integers(0, 2, (33, 5)).astype(bool), chunks=(4, 5),
                         compression="gzip")
        f.create_dataset("cube", data=rng.integers(0, 255, (6, 7, 9)).astype("<u1"), chunks=(2, 3, 4),
                         compression="gzip")
        f.create_dataset("scalar", data=np.float64(3.25))
        f.create_dataset("small", data=np.arange(4, dtype="<i4"))  # compact-eligible, contiguous
    exp_path = os.path.join(OUT, "expected.json")
    exp = json.load(open(exp_path))
    datasets = {}
    with h5py.File(path, "r") as f:
        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                a = obj[()]
                a = np.array(a, order="C")
                b = a.astype(a.dtype.newbyteorder("<")).tobytes()
                datasets["/" + name] = {
                    "dtype": str(a.dtype) if a.dtype != bool else "bool",
                    "shape": list(a.shape),
                    "chunks": list(obj.chunks) if obj.chunks else None,
                    "compression": obj.compression,
                    "shuffle": obj.shuffle,
                    "layout": "chunked" if obj.chunks else "contiguous",
                    "sha256": hashlib.sha256(b).hexdigest(),
                }
        f.visititems(visit)
    exp["files"][NAME] = {"attrs": {"/": {}}, "container": "hdf5", "datasets": datasets}
    exp.setdefault("writers", {})[NAME] = f"h5py {h5py.__version__}, HDF5 {h5py.version.hdf5_version}"
    with open(exp_path, "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
