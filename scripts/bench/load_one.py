#!/usr/bin/env python3
"""One load of bench target 13, timed inside the process (imports excluded); prints seconds.

    load_one.py safetensors FILE        safe_open + get_tensor of every key
    load_one.py npz FILE                np.load + every key
    load_one.py rows FILE N SEED        N random rows of a 2-D .npy through np.load(mmap_mode='r')
    load_one.py tf PREFIX               tf.train.load_checkpoint + get_tensor of every variable
"""
import sys
import time

import numpy as np


def main():
    kind, path = sys.argv[1], sys.argv[2]
    if kind == "tf":
        import tensorflow as tf
    if kind == "safetensors":
        from safetensors import safe_open
    # Memory this process is about to fill, touched once and given back first: on a VM the
    # first touch of memory the host has not backed yet costs more than the load itself, and
    # varies from run to run; both sides of every figure start from the same warm memory.
    warm = np.ones(2 << 30, dtype=np.uint8)
    del warm
    t = time.perf_counter()
    n = 0
    if kind == "safetensors":
        with safe_open(path, framework="np") as f:
            for k in f.keys():
                n += f.get_tensor(k).nbytes
    elif kind == "npz":
        with np.load(path) as z:
            for k in z.files:
                n += z[k].nbytes
    elif kind == "rows":
        count, seed = int(sys.argv[3]), int(sys.argv[4])
        a = np.load(path, mmap_mode="r")
        ids = np.random.default_rng(seed).integers(0, a.shape[0], count)
        for i in ids:
            n += np.array(a[i]).nbytes  # a copy: the pages are faulted in
    elif kind == "tf":
        r = tf.train.load_checkpoint(path)
        for name in r.get_variable_to_shape_map():
            v = r.get_tensor(name)
            n += getattr(v, "nbytes", 0)
    else:
        sys.exit(f"unknown load {kind}")
    print(f"{time.perf_counter() - t:.4f} {n}")


if __name__ == "__main__":
    main()
