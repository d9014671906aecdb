#!/usr/bin/env python3
"""A TF2 checkpoint whose tensors each span several pages (issue 55: one bad tensor must fail
only itself through `.tf/`, `.npz` and `.safetensors`). The tests flip a bit of `t05` in a copy.

  ckpt.*           `tf.train.Checkpoint` of `s00` (3 floats) and `t00`..`t09` (float32,
                   3000-6000 elements each: 12-24 KB, so each has pages of its own and shares
                   its first and last pages with its neighbours in the data file).

    python3 scripts/gen_flipped_bit.py OUT     (needs tensorflow; the fixture: 2.21.0)
"""
import os
import sys

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(5505)
vs = {"s00": tf.Variable(rng.standard_normal(3).astype(np.float32))}
for i in range(10):
    n = 3000 + 333 * i
    vs[f"t{i:02d}"] = tf.Variable(rng.standard_normal(n).astype(np.float32))
os.makedirs(out, exist_ok=True)
tf.train.Checkpoint(**vs).write(os.path.join(out, "ckpt"))
