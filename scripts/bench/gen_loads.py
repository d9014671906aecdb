#!/usr/bin/env python3
"""Bench target 13's model, written by real TensorFlow, and the local files each library writes
itself for the same tensors (the side each load through the mount is measured against).

    gen_loads.py DIR [LAYERS ROWS COLS EMB_ROWS EMB_COLS]

DIR/ckpt/ckpt-1.*        a TF2 checkpoint (tf.train.Checkpoint.write): LAYERS x [ROWS, COLS]
                         float32 `layer_NN` and one [EMB_ROWS, EMB_COLS] float32 `embedding`
DIR/local.safetensors    safetensors.numpy.save_file of the same tensors, keyed as the mount's
DIR/local.npz            numpy.savez of the same, keyed as the mount's
DIR/embedding.npy        numpy.save of the embedding
DIR/keys.txt             the keys, one per line (the mount's names for the variables)

Needs tensorflow-cpu, numpy and safetensors. Default: 40 x [2048, 4096] + [65536, 1024], 1.5 GiB.
"""
import os
import sys

import numpy as np


def main():
    out = sys.argv[1]
    layers, rows, cols, erows, ecols = (int(x) for x in (sys.argv[2:] or
                                                        [40, 2048, 4096, 65536, 1024]))
    import tensorflow as tf
    from safetensors.numpy import save_file

    os.makedirs(os.path.join(out, "ckpt"), exist_ok=True)
    rng = np.random.default_rng(40)
    values = {f"layer_{i:02d}": rng.standard_normal((rows, cols), dtype=np.float32)
              for i in range(layers)}
    values["embedding"] = rng.standard_normal((erows, ecols), dtype=np.float32)
    variables = {k: tf.Variable(v, name=k) for k, v in values.items()}
    tmp = os.path.join(out, "ckpt", "tmp")
    tf.train.Checkpoint(**variables).write(tmp)
    # The mount's keys are TF's own variable names (object-graph paths).
    keys = [name for name, _ in tf.train.list_variables(tmp) if "VARIABLE_VALUE" in name]
    by_key = {}
    for k in keys:
        by_key[k] = values[k.split("/")[0]]
    save_file(by_key, os.path.join(out, "local.safetensors"))
    np.savez(os.path.join(out, "local.npz"), **by_key)
    np.save(os.path.join(out, "embedding.npy"), values["embedding"])
    with open(os.path.join(out, "keys.txt"), "w") as f:
        f.write("".join(k + "\n" for k in keys))
    for suffix in (".index", ".data-00000-of-00001"):
        os.rename(tmp + suffix, os.path.join(out, "ckpt", "ckpt-1" + suffix))


if __name__ == "__main__":
    main()
