#!/usr/bin/env python3
"""A TF2 checkpoint holding one MutableHashTable of N int64 feature ids -> float32[D], written
by real TensorFlow, for the rows-by-id benchmark (issue 27), and samples.json with what
TensorFlow's lookup gives for some keys.

  gen_hashtable.py OUT_DIR N D
"""
import json, os, sys
import numpy as np
import tensorflow as tf

out, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(27)
m = tf.Module()
m.emb = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, default_value=tf.zeros([d]))
# Monolith-style ids: a slot in the top 16 bits, a hashed id below.
step = 1 << 20
for at in range(0, n, step):
    k = min(step, n - at)
    ids = (rng.integers(0, 64, k, dtype=np.int64) << 48) | (np.arange(at, at + k, dtype=np.int64) * 2654435761 % (1 << 48))
    m.emb.insert(ids, rng.standard_normal((k, d)).astype(np.float32))
tf.train.Checkpoint(m=m).write(os.path.join(out, "ckpt"))
keys, values = m.emb.export()
pick = rng.integers(0, n, 200)
samples = {str(int(keys[i])): [float(x) for x in values[i].numpy()] for i in pick}
json.dump(samples, open(os.path.join(out, "samples.json"), "w"))
print("wrote", out, n, "ids")
