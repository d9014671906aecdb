"""Target 20 (issue 73): ONNX. A model whose one 1 GiB float32 initializer (16384 x 16384) is
saved as external data by the `onnx` package; its first read by modelfs (a fresh mount, `cat`
of `W.npy`) vs ONNX's own `onnx.load(path)` + `numpy_helper.to_array` of it (a fresh process),
the page cache warm for both. >= 2x.

`python onnx_load.py gen DIR` writes the model; `python onnx_load.py load DIR` prints the
seconds onnx takes (run by bench.py with ENGINES_PYTHON, which has onnx).
"""
import os
import sys
import time

import numpy as np


def gen(d):
    import onnx
    from onnx import helper, numpy_helper
    os.makedirs(d, exist_ok=True)
    w = np.random.default_rng(20).standard_normal((16384, 16384), dtype=np.float32)
    g = helper.make_graph([], "g", [], [], initializer=[numpy_helper.from_array(w, "W")])
    onnx.save_model(helper.make_model(g), os.path.join(d, "model.onnx"),
                    save_as_external_data=True, location="weights.data", size_threshold=0)


def load(d):
    import onnx
    from onnx import numpy_helper
    t = time.perf_counter()
    m = onnx.load(os.path.join(d, "model.onnx"))
    a = numpy_helper.to_array(m.graph.initializer[0])
    dt = time.perf_counter() - t
    assert a.shape == (16384, 16384)
    print(dt)


if __name__ == "__main__":
    {"gen": gen, "load": load}[sys.argv[1]](sys.argv[2])
