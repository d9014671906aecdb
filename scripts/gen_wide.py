#!/usr/bin/env python3
"""A TF2 checkpoint of 1,000 scalar variables side by side (issue 56: the FUSE requests an
`ls -l` of one wide directory makes are counted against its number of files).

    python3 scripts/gen_wide.py OUT     (needs tensorflow; the fixture: 2.21.0)
"""
import os
import sys

import tensorflow as tf

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
tf.train.Checkpoint(**{f"v{i:04d}": tf.Variable(float(i)) for i in range(1000)}).write(
    os.path.join(out, "ckpt"))
