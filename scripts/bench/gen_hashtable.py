#!/usr/bin/env python3
"""A TF2 checkpoint holding one MutableHashTable of N int64 feature ids -> float32[D], written
by real TensorFlow, for the rows-by-id benchmark (issue 27), and samples.json with what
TensorFlow's lookup gives for some keys.

  gen_hashtable.py OUT_DIR N D [NEXT_DIR]

NEXT_DIR: the table's next save as well (`diff --rows`, bench target 15), made in TensorFlow
from the first: the exported entry i removed when i % 1000 == 5, value i % D raised by 0.25
when i % 100 == 1, N/1000 new ids inserted; NEXT_DIR/truth lists each such id and what
happened to it (`id<TAB>removed|changed|added`).
"""
import json, os, sys
import numpy as np
import tensorflow as tf

out, n, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
nxt = sys.argv[4] if len(sys.argv) > 4 else None
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

if nxt:
    os.makedirs(nxt, exist_ok=True)
    keys, values = keys.numpy(), values.numpy()
    i = np.arange(len(keys))
    removed = keys[i % 1000 == 5]
    ch = i % 100 == 1
    changed = keys[ch]
    new_values = values[ch].copy()
    new_values[np.arange(len(changed)), i[ch] % d] += np.float32(0.25)
    have = set(keys.tolist())
    added = []
    while len(added) < n // 1000:
        k = int(rng.integers(0, 1 << 62))
        if k not in have:
            have.add(k)
            added.append(k)
    added = np.array(added, np.int64)
    m.emb.remove(tf.constant(removed))
    m.emb.insert(tf.constant(changed), tf.constant(new_values))
    m.emb.insert(tf.constant(added), tf.constant(rng.standard_normal((len(added), d)).astype(np.float32)))
    tf.train.Checkpoint(m=m).write(os.path.join(nxt, "ckpt"))
    with open(os.path.join(nxt, "truth"), "w") as f:
        for what, ids in (("removed", removed), ("changed", changed), ("added", added)):
            f.writelines(f"{int(k)}\t{what}\n" for k in ids)
    print("wrote", nxt, len(removed), "removed", len(changed), "changed", len(added), "added")
