"""ONNX models (issue 73, first part) through `modelfs.open`: every initializer and Constant
the `onnx` package wrote (scripts/gen_onnx.py) equals what `onnx.numpy_helper.to_array` read
back (fixtures/onnx/expected.json); external data beside the model; a location out of the
model's directory refused."""

import json
import os

import numpy as np
import pytest

import modelfs
from conftest import fixture


@pytest.mark.parametrize("rel", ["dtypes.onnx", "external/model.onnx"])
def test_every_tensor_equals_what_onnx_reads(rel):
    exp = json.load(open(fixture("onnx/expected.json")))["models"][rel]
    src = fixture(os.path.join("onnx", rel))
    m = modelfs.open(src)
    assert sorted(m.keys()) == sorted(n.lstrip("/") for n in exp)
    for name, want in exp.items():
        got = m[name.lstrip("/")]
        assert list(got.shape) == want["shape"], name
        values = np.array(want["values"], dtype=np.float64)
        narrow = got.dtype != np.float64
        a = got.astype(np.float64).ravel()
        if narrow:
            assert np.array_equal(a.astype(np.float32), values.astype(np.float32)), name
        else:
            assert np.allclose(a, values, rtol=1e-15, atol=0), name
    # A directory holding one model and its external data is that model.
    if rel.startswith("external/"):
        assert sorted(modelfs.open(os.path.dirname(src)).keys()) == sorted(m.keys())


def test_a_location_out_of_the_directory_is_refused():
    m = modelfs.open(fixture("onnx/hostile/model.onnx"))
    for name in ("climbs", "absolute"):
        with pytest.raises(modelfs.SourceError, match="refused"):
            m[name]
    assert m["fine"].tolist() == [7.0]
    meta = m.metadata
    assert meta["producer"] == "modelfs-fixtures"


def test_an_onnx_model_with_external_data_on_s3(moto):
    moto.upload("models", fixture("onnx/external"), "onnx_ext")
    local = modelfs.open(fixture("onnx/external/model.onnx"))
    m = modelfs.open("s3://models/onnx_ext/model.onnx", endpoint=moto.url, cache_dir="none")
    assert sorted(m.keys()) == sorted(local.keys())
    for k in local.keys():
        assert np.array_equal(m[k], local[k]), k
    moto.upload("models", fixture("onnx/hostile"), "onnx_hostile")
    h = modelfs.open("s3://models/onnx_hostile/model.onnx", endpoint=moto.url, cache_dir="none")
    with pytest.raises(modelfs.SourceError, match="refused"):
        h["climbs"]
