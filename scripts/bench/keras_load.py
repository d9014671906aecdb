"""Target 22 (issue 73): Keras. A Keras 3 style `.weights.h5` whose one 1 GiB float32
dataset (16384 x 16384, `layers/dense/vars/0`) is written by h5py as Keras writes it
(contiguous, unfiltered); its first read by modelfs (a fresh mount, `cat` of its `.npy`) vs
h5py's own read of it (`h5py.File(path)[name][()]`, a fresh process), the page cache warm for
both. >= 2x.

`python keras_load.py gen DIR` writes the file; `python keras_load.py load DIR` prints the
seconds h5py takes (run by bench.py with KERAS_PYTHON or ENGINES_PYTHON, which has h5py).
"""
import os
import sys
import time

import numpy as np

NAME = "layers/dense/vars/0"


def gen(d):
    import h5py
    os.makedirs(d, exist_ok=True)
    w = np.random.default_rng(22).standard_normal((16384, 16384), dtype=np.float32)
    with h5py.File(os.path.join(d, "model.weights.h5"), "w") as f:
        g = f.create_group("layers/dense/vars")
        g.attrs["name"] = "dense"
        g.create_dataset("0", data=w)
        g.create_dataset("1", data=np.zeros(16384, dtype=np.float32))


def load(d):
    import h5py
    t = time.perf_counter()
    with h5py.File(os.path.join(d, "model.weights.h5"), "r") as f:
        a = f[NAME][()]
    dt = time.perf_counter() - t
    assert a.shape == (16384, 16384)
    print(dt)


if __name__ == "__main__":
    {"gen": gen, "load": load}[sys.argv[1]](sys.argv[2])
