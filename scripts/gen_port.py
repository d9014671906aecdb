#!/usr/bin/env python3
"""Writes the cross-framework diff fixtures (issue 41): one model's weights saved by
TensorFlow (a V2 checkpoint, TF names and [in, out] kernels) and by PyTorch (a state dict,
torch names and [out, in] Linear weights), and a PyTorch copy with one value changed, so that
`modelfs diff --map … --transpose` can be checked against the frameworks' own files.

Run twice, once per framework's Python (TensorFlow and torch do not share a venv here):
    /work/tfenv/bin/python    scripts/gen_port.py tf    [OUT]
    /work/torchenv/bin/python scripts/gen_port.py torch [OUT]
(default OUT fixtures/port). The weights come from one seeded numpy generator in both runs.
"""
import os
import sys

import numpy as np

WHO = sys.argv[1]
OUT = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "port")


def weights():
    rng = np.random.default_rng(41)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    # TF names and layouts: Dense kernels are [in, out].
    return {"dense/kernel": f(4, 3), "dense/bias": f(3), "square/kernel": f(3, 3),
            "square/bias": f(3), "out/kernel": f(3, 2), "out/bias": f(2),
            "embedding": f(5, 4)}


def torch_name(tf_name):
    if tf_name == "embedding":
        return "embedding.weight"
    layer, what = tf_name.split("/")
    return f"{layer}." + {"kernel": "weight", "bias": "bias"}[what]


def main():
    os.makedirs(OUT, exist_ok=True)
    w = weights()
    if WHO == "tf":
        import tensorflow as tf
        os.makedirs(os.path.join(OUT, "tf"), exist_ok=True)
        names = sorted(w)
        tf.raw_ops.SaveV2(prefix=os.path.join(OUT, "tf", "ckpt"), tensor_names=names,
                          shape_and_slices=[""] * len(names),
                          tensors=[tf.constant(w[n]) for n in names])
        r = tf.train.load_checkpoint(os.path.join(OUT, "tf", "ckpt"))
        for n in names:
            assert np.array_equal(r.get_tensor(n), w[n]), n
    else:
        import collections
        import torch
        sd = collections.OrderedDict()
        for n, v in w.items():
            t = torch.from_numpy(v)
            # A Linear weight is [out, in]: the kernel transposed (kept a transposed view, as
            # a port that assigns `kernel.T` saves it).
            sd[torch_name(n)] = t.t() if v.ndim == 2 and n != "embedding" else t
        torch.save(sd, os.path.join(OUT, "torch.pt"))
        sd["out.bias"] = sd["out.bias"].clone()
        sd["out.bias"][1] += 0.5
        torch.save(sd, os.path.join(OUT, "torch_changed.pt"))


if __name__ == "__main__":
    main()
