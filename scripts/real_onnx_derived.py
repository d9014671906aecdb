#!/usr/bin/env python3
"""Quantized and fp16 ONNX files (fixtures/real/onnx, ORIGIN.md there), written by other
projects' own tools from real models already there, so modelfs is tested on what those tools
emit (int8/uint8 weights with their scales and zero points, QDQ and QOperator graphs, float16
initializers and Constant nodes), not on what modelfs or a hand-written proto emits:

- onnxruntime's `onnxruntime.quantization` (`quantize_dynamic`, `quantize_static`);
- onnxconverter-common's `float16.convert_float_to_float16`.

Run after `real_onnx_expected.py DIR --copy` (the sources), then `real_onnx_expected.py DIR`
again to put the new files into expected.json:

  pip install onnx==1.23.2 onnxruntime==1.32.0 onnxconverter-common==1.16.0 numpy
  python scripts/real_onnx_derived.py fixtures/real/onnx
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime
import onnxconverter_common
from onnxconverter_common import float16
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_dynamic, quantize_static)

out = sys.argv[1]
ORT = f"onnxruntime-{onnxruntime.__version__}"
OCC = f"onnxconverter-common-{onnxconverter_common.__version__}"
CONV = "onnx-1.23.2_pytorch-converted_test_Conv2d"
LINEAR = "onnx-1.23.2_pytorch-converted_test_Linear"
MAGIKA = "magika-0.5.1_standard_v1"
PPOCR = "rapidocr-onnxruntime-1.4.4_ch_ppocr_mobile_v2.0_cls_infer"


class Random(CalibrationDataReader):
    """A few seeded random batches for the model's first graph input (calibration ranges only
    matter for the values of scales and zero points, not for what the file looks like)."""

    def __init__(self, path, batches=4):
        m = onnx.load(path)
        inits = {t.name for t in m.graph.initializer}
        (x,) = [i for i in m.graph.input if i.name not in inits]
        shape = [d.dim_value for d in x.type.tensor_type.shape.dim]
        rng = np.random.default_rng(0)
        self.feeds = iter([{x.name: rng.standard_normal(shape).astype(np.float32)}
                           for _ in range(batches)])

    def get_next(self):
        return next(self.feeds, None)


def src(name):
    return os.path.join(out, name + ".onnx")


def dst(tool, what, source):
    return os.path.join(out, f"{tool}_{what}_{source}.onnx")


# Dynamic: int8 MatMul weights (MatMulInteger / DynamicQuantizeMatMul) of magika's dense layers.
quantize_dynamic(src(MAGIKA), dst(ORT, "quantize_dynamic_qint8", MAGIKA),
                 weight_type=QuantType.QInt8)
# Dynamic: uint8 Conv weights (ConvInteger) with a uint8 zero point.
quantize_dynamic(src(CONV), dst(ORT, "quantize_dynamic_quint8", CONV),
                 weight_type=QuantType.QUInt8)
# Static QDQ, per channel: int8 weights with per-output-channel scales and zero points.
quantize_static(src(CONV), dst(ORT, "quantize_static_qdq_per_channel", CONV), Random(src(CONV)),
                quant_format=QuantFormat.QDQ, per_channel=True, weight_type=QuantType.QInt8,
                activation_type=QuantType.QUInt8)
# Static QOperator: the Gemm becomes com.microsoft QGemm, its weight int8, its bias int32.
quantize_static(src(LINEAR), dst(ORT, "quantize_static_qoperator", LINEAR),
                Random(src(LINEAR)), quant_format=QuantFormat.QOperator,
                weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8)
# fp16: float16 initializers (magika) and float16 Constant nodes (PaddleOCR's, all Constants).
for name in (MAGIKA, PPOCR):
    m = float16.convert_float_to_float16(onnx.load(src(name)), keep_io_types=True)
    onnx.save(m, dst(OCC, "fp16", name))
print(sorted(f for f in os.listdir(out) if f.startswith((ORT + "_quantize", OCC))))
