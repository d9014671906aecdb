#!/usr/bin/env python3
"""Real ONNX files (issue 73): models shipped in the `onnx` wheel from PyPI (its backend test
data: the ONNX model zoo's "light" architectures and models converted from PyTorch), copied byte
for byte into fixtures/real/onnx, and one of them re-saved with its weights as external data by
onnx's own `convert_model_to_external_data`. `expected.json` is what
`onnx.numpy_helper.to_array` reads from each: per tensor (initializers and Constant nodes'
`value`), its dtype, shape and the sha256 of its little-endian element bytes.

  python scripts/real_onnx_expected.py fixtures/real/onnx [--copy]
"""
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import onnx
from onnx import numpy_helper

out = sys.argv[1]
PICK = [
    "light/light_squeezenet.onnx",
    "light/light_shufflenet.onnx",
    "light/light_bvlc_alexnet.onnx",
    "pytorch-converted/test_Conv2d/model.onnx",
    "pytorch-converted/test_Linear/model.onnx",
    "pytorch-converted/test_BatchNorm2d_eval/model.onnx",
    "pytorch-converted/test_Embedding/model.onnx",
    "pytorch-converted/test_PReLU_2d/model.onnx",
    "pytorch-converted/test_ConvTranspose2d/model.onnx",
]
data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
if "--copy" in sys.argv:
    os.makedirs(out, exist_ok=True)
    for rel in PICK:
        name = rel.replace("/model.onnx", ".onnx").replace("/", "_")
        shutil.copy(os.path.join(data, rel), os.path.join(out, f"onnx-{onnx.__version__}_{name}"))
    # One of them with its weights external, by onnx's own converter.
    src = os.path.join(out, f"onnx-{onnx.__version__}_pytorch-converted_test_Conv2d.onnx")
    ext = os.path.join(out, "external_conv2d")
    os.makedirs(ext, exist_ok=True)
    m = onnx.load(src)
    onnx.external_data_helper.convert_model_to_external_data(
        m, all_tensors_to_one_file=True, location="weights.data", size_threshold=0)
    onnx.save(m, os.path.join(ext, "model.onnx"))


def tensors(path):
    m = onnx.load(path, load_external_data=False)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        onnx.external_data_helper.load_external_data_for_model(m, os.path.dirname(path))
    for t in m.graph.initializer:
        yield t.name, t
    for n in m.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    yield n.output[0], a.t


expected = {}
for name in sorted(os.listdir(out)):
    p = os.path.join(out, name)
    if os.path.isdir(p):
        p = os.path.join(p, "model.onnx")
    if not p.endswith(".onnx"):
        continue
    got = {}
    for key, t in tensors(p):
        a = numpy_helper.to_array(t)
        le = a.astype(a.dtype.newbyteorder("<"), copy=False)
        got[key] = {"dtype": str(a.dtype), "shape": list(a.shape),
                    "sha256": hashlib.sha256(np.ascontiguousarray(le).tobytes()).hexdigest()}
    expected[os.path.relpath(p, out)] = got
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"onnx": onnx.__version__, "models": expected}, f, indent=1, sort_keys=True)
print({k: len(v) for k, v in expected.items()})
