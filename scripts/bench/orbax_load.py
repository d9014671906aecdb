"""Target 23 (issue 73): Orbax. A checkpoint saved by `ocp.StandardCheckpointer` (OCDBT +
zarr v2, zstd: Orbax's defaults) with one 1 GiB float32 array `w` (16384 x 16384, one chunk);
its first read by modelfs (a fresh mount, `cat` of its `.npy`) vs Orbax's restore of that item
(`StandardCheckpointer().restore(path)`, a fresh process, JAX imported before the clock starts),
the page cache warm for both. >= 2x.

`python orbax_load.py gen DIR` writes it; `python orbax_load.py load DIR` prints the seconds
Orbax's restore takes (run by bench.py with ORBAX_PYTHON, which has orbax-checkpoint).
"""
import os
import sys
import time

import numpy as np


def gen(d):
    import orbax.checkpoint as ocp
    w = np.random.default_rng(23).standard_normal((16384, 16384), dtype=np.float32)
    ck = ocp.StandardCheckpointer()
    ck.save(os.path.join(d, "ck"), {"w": w})
    ck.wait_until_finished()


def load(d):
    import orbax.checkpoint as ocp
    ck = ocp.StandardCheckpointer()
    t = time.perf_counter()
    r = ck.restore(os.path.join(d, "ck"))
    a = np.asarray(r["w"])
    dt = time.perf_counter() - t
    assert a.shape == (16384, 16384)
    print(dt)


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    {"gen": gen, "load": load}[sys.argv[1]](sys.argv[2])
