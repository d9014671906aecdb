#!/usr/bin/env python3
"""DenseHashTables as TensorFlow saves them beside a graph (issue 55): sentinel buckets.

A `tf.lookup.experimental.DenseHashTable` saves its whole bucket array: the entries, every
empty bucket under `empty_key` and every erased one under `deleted_key`. Each table here had
exactly one key erased before the save, so its `deleted_key` is saved once, like an id: only
the graph (the table op's `empty_key` and `deleted_key` inputs) tells it apart.

  tf1_meta/{a,b}/model.*  TF1 `Saver` checkpoints with their `.meta`: `dht` (int64 ->
                          float32[3]; empty -1, deleted -2) and its slot table `dht/Adagrad`.
  savedmodel/{a,b}/       `tf.saved_model.save` of a Module holding `dht` (empty -7, deleted -8).
  keras/{a,b}/            Keras 3 `Model.export` of a layer holding the table (empty -5,
                          deleted -6): TF saves it as `_misc_assets/0`.
  truth.json              what `diff --rows a b`, `check b` and lookups must give.

    python3 scripts/gen_dense_tables.py OUT     (needs tensorflow and keras; fixtures: 2.21.0)
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(5555)
BUCKETS = 512  # a power of two; 310 entries stay under TF's 0.8 load factor
W = 3

ids_a = np.arange(1000, 1301, dtype=np.int64)  # 301 inserted, 1300 erased: 300 entries
vals_a = rng.standard_normal((len(ids_a), W)).astype(np.float32)
erase_a = np.array([1300], np.int64)
# b: 30 removed, 40 added, 50 changed; 5041 inserted then erased.
kept = ids_a[30:300]
added = np.arange(5000, 5042, dtype=np.int64)[:41]
ids_b = np.concatenate([kept, added])
vals_b = np.concatenate([vals_a[30:300], rng.standard_normal((41, W)).astype(np.float32)])
vals_b[:50] += 1.0
erase_b = np.array([5040], np.int64)
# b's slot misses 7 of the table's ids (and not the erased 5040) and keeps 4 of its own.
slot_ids_b = np.concatenate([ids_b[7:-1], np.arange(9000, 9005, dtype=np.int64)])
erase_slot_b = np.array([9004], np.int64)  # the slot's one erase: 4 extra ids stay


def entries(ids, vals, erased):
    keep = ~np.isin(ids, erased)
    return ids[keep], vals[keep]


def table(empty, deleted, name=None):
    kw = {"name": name} if name else {}
    return tf.lookup.experimental.DenseHashTable(
        tf.int64, tf.float32, default_value=[0.0] * W, empty_key=empty, deleted_key=deleted,
        initial_num_buckets=BUCKETS, **kw)


def tf1(path, ids, vals, erase, slot_ids, slot_erase):
    g = tf.Graph()
    with g.as_default():
        dht = table(-1, -2, "dht")
        slot = table(-1, -2, "dht/Adagrad")
        ins = [dht.insert(ids, vals),
               slot.insert(slot_ids, np.full((len(slot_ids), W), 0.1, np.float32))]
        era = [dht.erase(erase), slot.erase(slot_erase)]
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as s:
            s.run(ins)
            s.run(era)
            os.makedirs(path, exist_ok=True)
            saver.save(s, os.path.join(path, "model"))


def savedmodel(path, ids, vals, erase):
    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.dht = table(-7, -8)
            self.dht.insert(ids, vals)
            self.dht.erase(erase)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)])
        def lookup(self, k):
            return self.dht.lookup(k)

    tf.saved_model.save(M(), path)


def keras_export(path, ids, vals, erase):
    import keras

    class L(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.dht = table(-5, -6)
            self.dht.insert(ids, vals)
            self.dht.erase(erase)

        def call(self, x):
            rows = self.dht.lookup(tf.reshape(x, [-1]))
            return tf.reshape(rows, tf.concat([tf.shape(x), [W]], 0))

        def compute_output_shape(self, s):
            return tuple(s) + (W,)

    inp = keras.Input((4,), dtype="int64")
    keras.Model(inp, L()(inp)).export(path)


tf1(os.path.join(out, "tf1_meta", "a"), ids_a, vals_a, erase_a, ids_a, erase_a)
tf1(os.path.join(out, "tf1_meta", "b"), ids_b, vals_b, erase_b, slot_ids_b, erase_slot_b)
for side, (i, v, e) in {"a": (ids_a, vals_a, erase_a), "b": (ids_b, vals_b, erase_b)}.items():
    savedmodel(os.path.join(out, "savedmodel", side), i, v, e)
    keras_export(os.path.join(out, "keras", side), i, v, e)

ea, va = entries(ids_a, vals_a, erase_a)
eb, vb = entries(ids_b, vals_b, erase_b)
# What TensorFlow's lookup gives for a few ids of b (and absent ones: erased, sentinels).
pick = [int(x) for x in eb[::37]]
rows_b = {str(k): [float(x) for x in vb[list(eb).index(k)]] for k in pick}
truth = {
    "diff": {"changed": 50, "added": 40, "removed": 30, "rows_a": len(ea), "rows_b": len(eb)},
    "check_b": {"only_table": 7, "only_slot": 4},
    "buckets": BUCKETS,
    "sentinels": {"tf1_meta": [-1, -2], "savedmodel": [-7, -8], "keras": [-5, -6]},
    "table": {"tf1_meta": "dht", "savedmodel": "dht", "keras": "_misc_assets/0"},
    "rows_b": rows_b,
    "absent_b": [int(erase_b[0]), int(ids_a[0]), 4242],
}
assert len(ea) == 300 and len(eb) == 310, (len(ea), len(eb))
json.dump(truth, open(os.path.join(out, "truth.json"), "w"), indent=1)
