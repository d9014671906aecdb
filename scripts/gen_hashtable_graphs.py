#!/usr/bin/env python3
"""Hash tables beside a graph (issue 55): the forms TensorFlow writes by default.

  tf1_meta/{a,b}/model.*  TF1 `tf.compat.v1.train.Saver` checkpoints with the `.meta` Saver.save
                          writes: MutableHashTable `emb` (int64 -> float32[3]) and its slot
                          table `emb/Adagrad` (same width).
  savedmodel/{a,b}/       TF2 SavedModels (`tf.saved_model.save`) of a Module holding `emb`.
  keras/{a,b}/            Keras 3 `Model.export` of a layer holding `emb` (saved as
                          `_misc_assets/0`).
  truth.json              what `diff --rows a b` and `check b` must find (from the ids written).

    python3 scripts/gen_hashtable_graphs.py OUT [--keras-only]
                                  (needs tensorflow and keras; the fixtures: 2.21.0, Keras 3.15)
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

out = sys.argv[1]
rng = np.random.default_rng(55)
ids_a = np.arange(1000, 1300, dtype=np.int64)
vals_a = rng.standard_normal((len(ids_a), 3)).astype(np.float32)
# b: 30 removed, 40 added, 50 changed.
removed = ids_a[:30]
kept = ids_a[30:]
added = np.arange(5000, 5040, dtype=np.int64)
ids_b = np.concatenate([kept, added])
vals_b = np.concatenate([vals_a[30:], rng.standard_normal((40, 3)).astype(np.float32)])
changed = kept[:50]
vals_b[:50] += 1.0
# b's slot misses 7 of the table's ids and holds 4 it does not.
slot_ids_b = np.concatenate([ids_b[7:], np.arange(9000, 9004, dtype=np.int64)])
truth = {"diff": {"changed": 50, "added": 40, "removed": 30, "rows_a": 300, "rows_b": 310},
         "check_b": {"only_table": 7, "only_slot": 4}}


def tf1(path, ids, vals, slot_ids):
    g = tf.Graph()
    with g.as_default():
        emb = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, [0.0] * 3, name="emb")
        slot = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, [0.0] * 3,
                                                       name="emb/Adagrad")
        ins = [emb.insert(ids, vals),
               slot.insert(slot_ids, np.full((len(slot_ids), 3), 0.1, np.float32))]
        saver = tf.compat.v1.train.Saver()  # every saveable: both tables
        with tf.compat.v1.Session() as s:
            s.run(ins)
            os.makedirs(path, exist_ok=True)
            saver.save(s, os.path.join(path, "model"))


def savedmodel(path, ids, vals):
    class M(tf.Module):
        def __init__(self):
            super().__init__()
            self.emb = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, [0.0] * 3)
            self.emb.insert(ids, vals)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int64)])
        def lookup(self, k):
            return self.emb.lookup(k)

    tf.saved_model.save(M(), path)


def keras_export(path, ids, vals):
    import keras

    class L(keras.layers.Layer):
        def __init__(self):
            super().__init__()
            self.emb = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, [0.0] * 3)
            self.emb.insert(ids, vals)

        def call(self, x):
            rows = self.emb.lookup(tf.reshape(x, [-1]))
            return tf.reshape(rows, tf.concat([tf.shape(x), [3]], 0))

        def compute_output_shape(self, s):
            return tuple(s) + (3,)

    inp = keras.Input((4,), dtype="int64")
    keras.Model(inp, L()(inp)).export(path)  # the table is saved as `_misc_assets/0`


if len(sys.argv) > 2 and sys.argv[2] == "--keras-only":
    keras_export(os.path.join(out, "keras", "a"), ids_a, vals_a)
    keras_export(os.path.join(out, "keras", "b"), ids_b, vals_b)
    sys.exit(0)
tf1(os.path.join(out, "tf1_meta", "a"), ids_a, vals_a, ids_a)
tf1(os.path.join(out, "tf1_meta", "b"), ids_b, vals_b, slot_ids_b)
savedmodel(os.path.join(out, "savedmodel", "a"), ids_a, vals_a)
savedmodel(os.path.join(out, "savedmodel", "b"), ids_b, vals_b)
keras_export(os.path.join(out, "keras", "a"), ids_a, vals_a)
keras_export(os.path.join(out, "keras", "b"), ids_b, vals_b)
json.dump(truth, open(os.path.join(out, "truth.json"), "w"), indent=1)
