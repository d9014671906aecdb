#!/usr/bin/env python3
"""Writes DeepRec EmbeddingVariable fixtures (issue 42) with real TensorFlow: DeepRec is not
installable here, so each checkpoint is a TF1 `Saver` checkpoint holding exactly the tensors a
DeepRec save writes for an EV (../shared/formats/deeprec-ev.md; DeepRec's
docs/Embedding-Variable-Export-Format.md): `<ev>-keys` int64 [N], `-values` float32 [N, dim],
`-freqs` int64 [N], `-versions` int64 [N], `-keys_filtered`, `-freqs_filtered`,
`-versions_filtered` int64 [M], `-partition_offset` and `-partition_filter_offset` int32
[1001]; a partitioned EV as `<ev>/part_<i>` + those suffixes; an optimizer slot as an EV of
its own, `<ev>/Adagrad` (`<ev>/part_<i>/Adagrad` for a part).

- `clean/model.ckpt`: EV `user_emb` (dim 8, with an Adagrad slot of the same ids), EV
  `item_emb` in 3 parts (dim 4, each with its Adagrad slot), a dense `dense/kernel` and
  `global_step`.
- `bad/model.ckpt`: the same, except `user_emb/Adagrad` lacks 3 of the table's ids and holds 2
  others, and one of its accumulators is 1e38 (DeepRec-AI/DeepRec#1023).

`expected.json` (per checkpoint): every EV's rows by id with its freq and version, ids that are
absent, and the filtered ids.

    /work/tfenv/bin/python scripts/gen_deeprec.py [OUT]     (default fixtures/deeprec)
"""
import json
import os
import shutil
import sys

import numpy as np
import tensorflow as tf

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "deeprec")
rng = np.random.default_rng(42)
PARTITION_NUM = 1000  # DeepRec's kSavedPartitionNum


def ev_tensors(name, keys, dim, values=None, filtered=0, r=None):
    """The tensors DeepRec saves for one EV, in its order."""
    r = r or rng
    n = len(keys)
    if values is None:
        values = r.standard_normal((n, dim)).astype(np.float32)
    freqs = r.integers(1, 1000, n).astype(np.int64)
    versions = r.integers(0, 5000, n).astype(np.int64)
    fkeys = r.integers(-2**62, 2**62, filtered).astype(np.int64)
    # Ids by partition (id % 1000), offsets of each partition's first id: DeepRec's layout.
    order = np.argsort(np.mod(keys, PARTITION_NUM), kind="stable")
    keys, values, freqs, versions = keys[order], values[order], freqs[order], versions[order]
    offsets = np.searchsorted(np.mod(keys, PARTITION_NUM), np.arange(PARTITION_NUM + 1))
    foffsets = np.zeros(PARTITION_NUM + 1, np.int32)
    foffsets[-1] = filtered
    out = [
        (f"{name}-keys", keys),
        (f"{name}-values", values),
        (f"{name}-freqs", freqs),
        (f"{name}-versions", versions),
        (f"{name}-keys_filtered", fkeys),
        (f"{name}-freqs_filtered", r.integers(0, 3, filtered).astype(np.int64)),
        (f"{name}-versions_filtered", r.integers(0, 5000, filtered).astype(np.int64)),
        (f"{name}-partition_offset", offsets.astype(np.int32)),
        (f"{name}-partition_filter_offset", foffsets),
    ]
    expect = {
        "dim": dim,
        "rows": {str(int(k)): [float(x) for x in v] for k, v in zip(keys, values)},
        "freqs": {str(int(k)): int(f) for k, f in zip(keys, freqs)},
        "versions": {str(int(k)): int(f) for k, f in zip(keys, versions)},
        "filtered": [int(k) for k in fkeys],
    }
    return out, expect


def unique_ids(n, r=None):
    r = r or rng
    ids = set()
    while len(ids) < n:
        ids.add(int(r.integers(-2**40, 2**40)))
    return np.array(sorted(ids), np.int64)


def write(case, bad):
    """Both cases draw the same numbers from `rng`: `bad` differs only where it is meant to
    (its own numbers come from `other`)."""
    global rng
    rng = np.random.default_rng(42)
    other = np.random.default_rng(7)
    tensors, expect = [], {}
    user = unique_ids(60)
    t, e = ev_tensors("user_emb", user, 8, filtered=5)
    tensors += t
    expect["user_emb"] = e
    slot_ids = user
    acc = np.abs(rng.standard_normal((len(user), 8))).astype(np.float32)
    slot_rng = np.random.default_rng(11)
    if bad:
        # 3 of the table's ids missing, 2 others present; one accumulator of 1e38.
        extra = np.array([i for i in unique_ids(3, other) if i not in set(user)][:2], np.int64)
        slot_ids = np.concatenate([user[3:], extra])
        acc = np.concatenate([acc[3:], np.ones((2, 8), np.float32)])
        acc[7, 2] = 1e38
    t, e = ev_tensors("user_emb/Adagrad", slot_ids, 8, values=acc, r=slot_rng)
    tensors += t
    expect["user_emb/Adagrad"] = e
    item = unique_ids(90)
    # fixed_size_partitioner: DeepRec places an id in part id % 3.
    parts = {}
    for i in range(3):
        ids = item[np.mod(item, 3) == i]
        t, e = ev_tensors(f"item_emb/part_{i}", ids, 4)
        tensors += t
        parts[i] = e
        t, _ = ev_tensors(f"item_emb/part_{i}/Adagrad", ids, 4,
                          values=np.full((len(ids), 4), 0.1, np.float32))
        tensors += t
    expect["item_emb"] = {
        "dim": 4,
        "parts": 3,
        "rows": {k: v for e in parts.values() for k, v in e["rows"].items()},
        "freqs": {k: v for e in parts.values() for k, v in e["freqs"].items()},
        "versions": {k: v for e in parts.values() for k, v in e["versions"].items()},
        "filtered": [],
    }
    for i, e in parts.items():
        expect[f"item_emb/part_{i}"] = e
    tensors.append(("dense/kernel", rng.standard_normal((16, 4)).astype(np.float32)))
    tensors.append(("global_step", np.array(1234, np.int64)))
    present = {int(k) for e in expect.values() for k in e.get("rows", {})}
    absent = [k for k in (0, 1, -1, 2**62, -2**62) if k not in present]
    for e in expect.values():
        if isinstance(e, dict):
            e["absent"] = absent

    d = os.path.join(OUT, case)
    os.makedirs(d)
    g = tf.Graph()
    with g.as_default():
        # Saver of plain variables under the names DeepRec gives its EV tensors.
        variables = {name: tf.compat.v1.Variable(value, name=f"v{i}")
                     for i, (name, value) in enumerate(tensors)}
        saver = tf.compat.v1.train.Saver(variables, write_version=tf.compat.v1.train.SaverDef.V2)
        with tf.compat.v1.Session() as s:
            s.run(tf.compat.v1.global_variables_initializer())
            saver.save(s, os.path.join(d, "model.ckpt"), write_meta_graph=False)
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expect, f, indent=1, sort_keys=True)
    # What TensorFlow's reader lists: unchanged by modelfs.
    reader = tf.train.load_checkpoint(os.path.join(d, "model.ckpt"))
    listing = sorted(reader.get_variable_to_shape_map())
    with open(os.path.join(d, "listing.json"), "w") as f:
        json.dump(listing, f, indent=1)


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    write("clean", bad=False)
    write("bad", bad=True)
    for f in ("checkpoint",):
        for case in ("clean", "bad"):
            p = os.path.join(OUT, case, f)
            if os.path.exists(p):
                os.remove(p)
    print("wrote", OUT)
