#!/usr/bin/env python3
"""ONNX fixtures (issue 73), written by the `onnx` package (PyPI), with what onnx reads back
(`onnx.numpy_helper.to_array`) as expected.json: `fixtures/onnx/`.

  python scripts/gen_onnx.py fixtures/onnx

- dtypes.onnx: one initializer per dtype, in raw_data (float, float16, bfloat16, double, the
  integers, bool, float8 e4m3fn/e5m2, int4/uint4 packed two a byte), the same values in the
  typed fields (float_data, int32_data, int64_data, double_data, uint64_data) under
  `typed/…`, a `Constant` node's tensor, names with `/` and `.`.
- external/model.onnx + external/weights.bin: initializers saved as external data (offset and
  length each), one of them inline.
- hostile/model.onnx: external data whose location climbs out of the directory
  (`../outside.bin`), one absolute: refused, the file next to them never read.
"""
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(73)
expected = {}


def record(model_name, t):
    arr = numpy_helper.to_array(t)
    entry = {"dtype": str(arr.dtype), "shape": list(arr.shape)}
    if arr.dtype.kind in "fc" or str(arr.dtype) in ("bfloat16",) or "float8" in str(arr.dtype):
        entry["values"] = [float(v) for v in arr.astype(np.float64).ravel()]
    elif arr.dtype == np.bool_:
        entry["values"] = [bool(v) for v in arr.ravel()]
    else:
        entry["values"] = [int(v) for v in arr.ravel()]
    expected.setdefault(model_name, {})[t.name] = entry


inits = []
f32 = rng.standard_normal((3, 4)).astype(np.float32)
inits.append(numpy_helper.from_array(f32, "encoder.layer.0/weight"))
inits.append(numpy_helper.from_array(rng.standard_normal(5).astype(np.float16), "half"))
inits.append(numpy_helper.from_array(rng.standard_normal((2, 2)), "double"))
for dt in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
    a = rng.integers(np.iinfo(dt).min // 2, np.iinfo(dt).max // 2, size=6, dtype=dt)
    inits.append(numpy_helper.from_array(a, np.dtype(dt).name))
inits.append(numpy_helper.from_array(np.array([True, False, True]), "bool"))
bf = helper.make_tensor("bf16", T.BFLOAT16, [4], [1.0, -2.5, 3.140625, 0.0])
inits.append(bf)
inits.append(helper.make_tensor("f8e4m3fn", T.FLOAT8E4M3FN, [3], [1.0, -0.5, 448.0]))
inits.append(helper.make_tensor("f8e5m2", T.FLOAT8E5M2, [3], [1.0, -0.5, 57344.0]))
inits.append(helper.make_tensor("int4", T.INT4, [5], [-8, -1, 0, 3, 7]))
inits.append(helper.make_tensor("uint4", T.UINT4, [3], [0, 9, 15]))
# The same values in typed fields (no raw_data).
inits.append(helper.make_tensor("typed/float", T.FLOAT, [3, 4], f32.ravel().tolist()))
inits.append(helper.make_tensor("typed/int64", T.INT64, [3], [-(1 << 40), 0, 7]))
inits.append(helper.make_tensor("typed/int32", T.INT32, [2], [-5, 1 << 30]))
inits.append(helper.make_tensor("typed/int8", T.INT8, [3], [-128, 0, 127]))
inits.append(helper.make_tensor("typed/half", T.FLOAT16, [2],
                                np.array([1.5, -2.0], np.float16).view(np.uint16).tolist()))
inits.append(helper.make_tensor("typed/double", T.DOUBLE, [2], [1e300, -0.25]))
inits.append(helper.make_tensor("typed/uint64", T.UINT64, [2], [1 << 63, 5]))
inits.append(helper.make_tensor("typed/bool", T.BOOL, [2], [1, 0]))
const = helper.make_node("Constant", [], ["/model/Constant_output_0"],
                         value=numpy_helper.from_array(np.arange(6, dtype=np.float32)
                                                       .reshape(2, 3), "c"))
x = helper.make_tensor_value_info("x", T.FLOAT, [3, 4])
y = helper.make_tensor_value_info("y", T.FLOAT, [3, 4])
add = helper.make_node("Add", ["x", "encoder.layer.0/weight"], ["y"])
graph = helper.make_graph([const, add], "g", [x], [y], initializer=inits)
model = helper.make_model(graph, producer_name="modelfs-fixtures", opset_imports=[
    helper.make_opsetid("", 21)])
onnx.save(model, os.path.join(out, "dtypes.onnx"))
for t in inits:
    record("dtypes.onnx", t)
ct = const.attribute[0].t
ct.name = "/model/Constant_output_0"
record("dtypes.onnx", ct)

# External data.
ext = os.path.join(out, "external")
os.makedirs(ext, exist_ok=True)
big = [numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w1"),
       numpy_helper.from_array(rng.integers(0, 100, (16,), dtype=np.int64), "ids"),
       numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "small")]
g2 = helper.make_graph([], "g2", [], [], initializer=big)
m2 = helper.make_model(g2, producer_name="modelfs-fixtures")
onnx.save_model(m2, os.path.join(ext, "model.onnx"), save_as_external_data=True,
                all_tensors_to_one_file=True, location="weights.bin", size_threshold=64)
for t in big:
    record("external/model.onnx", t)

# Hostile locations.
hostile = os.path.join(out, "hostile")
os.makedirs(hostile, exist_ok=True)
with open(os.path.join(out, "outside.bin"), "wb") as f:
    f.write(np.arange(4, dtype=np.float32).tobytes())
ts = []
for name, loc in (("climbs", "../outside.bin"), ("absolute", "/etc/hostname")):
    t = onnx.TensorProto(name=name, data_type=T.FLOAT, dims=[4],
                         data_location=onnx.TensorProto.EXTERNAL)
    e = t.external_data.add()
    e.key, e.value = "location", loc
    ts.append(t)
ts.append(numpy_helper.from_array(np.array([7.0], np.float32), "fine"))
g3 = helper.make_graph([], "g3", [], [], initializer=ts)
with open(os.path.join(hostile, "model.onnx"), "wb") as f:
    f.write(helper.make_model(g3, producer_name="modelfs-fixtures").SerializeToString())

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"onnx": onnx.__version__, "models": expected}, f, indent=1, sort_keys=True)
print("wrote", out)
