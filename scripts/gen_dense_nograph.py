#!/usr/bin/env python3
"""DenseHashTables saved without their graph (issue 69): which saved keys are rows.

`tf.train.Checkpoint.write` saves a `DenseHashTable`'s whole bucket array and no graph, so
the checkpoint does not say which keys are the empty and deleted sentinels. Each table here
uses ids that collide (multiples of the bucket count) so that TensorFlow's probing runs.

  one_erase/ckpt    int64 -> float32[3], empty -1, deleted -2; one id erased: -2 saved once
  erases/ckpt       int64 -> float32[2], empty 0, deleted -3; five erased, two of them and a
                    new id inserted again (they take deleted buckets)
  int32/ckpt        int32 -> float32, empty -1000, deleted -2000; one erase (keys sign-extend)
  damaged/ckpt      one_erase's array imported with two ids moved to empty buckets off their
                    probe sequence (TensorFlow's own lookup no longer finds them)
  expected.json     per case: the table, its sentinels, every row as TF's lookup gives it,
                    ids TF finds no row for

    python3 scripts/gen_dense_nograph.py fixtures/tf/hashtable/nograph    (needs tensorflow-cpu; fixtures: 2.21.0)
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf
from tensorflow.python.ops import gen_lookup_ops

out = sys.argv[1]
rng = np.random.default_rng(6969)
N = 64
truth = {}


def colliding(count, base=0):
    # i·N + small offsets: many ids share a home bucket.
    return np.array([base + (i % 7) * N + (i // 7) for i in range(count)], np.int64)


def save(case, table, key_dtype, ids, width, erased, empty, deleted, import_keys=None):
    m = tf.Module()
    m.t = table
    ckpt = os.path.join(out, case, "ckpt")
    tf.train.Checkpoint(m=m).write(ckpt)
    probe = np.concatenate([ids, erased]).astype(key_dtype.as_numpy_dtype)
    found = table.lookup(tf.constant(probe, key_dtype)).numpy().reshape(len(probe), width)
    default = np.full(width, -9.0, np.float32)
    rows = {str(int(k)): [float(x) for x in found[i]]
            for i, k in enumerate(probe) if not np.array_equal(found[i], default)}
    keys = tf.train.load_checkpoint(ckpt).get_tensor("m/t/.ATTRIBUTES/table-keys")
    truth[case] = {
        "table": "m/t",
        "buckets": int(keys.shape[0]),
        "sentinels": [int(empty), int(deleted)],
        "rows": rows,
        "absent": sorted({int(k) for k in probe if str(int(k)) not in rows}),
    }


def dense(key_dtype, width, empty, deleted):
    default = -9.0 if width == 1 else [-9.0] * width
    return tf.lookup.experimental.DenseHashTable(
        key_dtype, tf.float32, default_value=default, empty_key=empty, deleted_key=deleted,
        initial_num_buckets=N)


# One erase: the deleted key saved once, like an id.
ids = colliding(40, base=3)
t = dense(tf.int64, 3, -1, -2)
t.insert(ids, rng.standard_normal((len(ids), 3)).astype(np.float32))
t.erase(tf.constant(ids[9:10]))
save("one_erase", t, tf.int64, ids, 3, ids[9:10], -1, -2)

# Several erases, some ids back: the deleted key saved more than once, and at most once.
ids = colliding(45, base=1)
t = dense(tf.int64, 2, 0, -3)
t.insert(ids, rng.standard_normal((len(ids), 2)).astype(np.float32))
gone = ids[[2, 8, 15, 16, 30]]
t.erase(tf.constant(gone))
back = np.array([gone[1], gone[3], 5 * N + 40], np.int64)
t.insert(back, rng.standard_normal((len(back), 2)).astype(np.float32))
save("erases", t, tf.int64, np.concatenate([ids, back[2:]]), 2, gone, 0, -3)

# int32 keys, negative ones among them: TF hashes static_cast<uint64>, sign-extended.
ids32 = np.array([-(i % 5) * N - i for i in range(1, 36)], np.int32)
t = dense(tf.int32, 1, -1000, -2000)
t.insert(ids32, rng.standard_normal(len(ids32)).astype(np.float32))
t.erase(tf.constant(ids32[4:5]))
save("int32", t, tf.int32, ids32, 1, ids32[4:5], -1000, -2000)

# Damage TF itself cannot make: one_erase's buckets with two ids moved into empty buckets
# off their probe sequence, imported as they are (TF's restore does the same).
src = tf.train.load_checkpoint(os.path.join(out, "one_erase", "ckpt"))
keys = src.get_tensor("m/t/.ATTRIBUTES/table-keys").copy()
vals = src.get_tensor("m/t/.ATTRIBUTES/table-values")
flat = keys.reshape(-1)
moved = []
for b in range(N):
    k = int(flat[b])
    if k in (-1, -2) or len(moved) == 2:
        continue
    home = k & (N - 1)
    # An empty bucket on no path of k before its own: k's home, if empty, comes first.
    target = next((e for e in range(N) if flat[e] == -1 and e != home), None)
    if flat[home] == -1 and target is not None:
        flat[target], flat[b] = k, -1
        moved.append(k)
if len(moved) < 2:
    # Make an empty home: move an id whose home bucket is empty into another empty bucket.
    for b in range(N):
        k = int(flat[b])
        if k in (-1, -2) or k in moved or len(moved) == 2:
            continue
        target = next(e for e in range(N) if flat[e] == -1 and e != (k & (N - 1)))
        flat[target], flat[b] = k, -1
        moved.append(k)
t = dense(tf.int64, 3, -1, -2)
gen_lookup_ops.lookup_table_import_v2(t.resource_handle, keys, vals)
ids = np.array([int(k) for k in flat if k not in (-1, -2)], np.int64)
save("damaged", t, tf.int64, ids, 3, np.array([], np.int64), -1, -2)
truth["damaged"]["moved"] = moved

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump(truth, f, indent=1, sort_keys=True)
    f.write("\n")
