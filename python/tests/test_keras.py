"""Keras files (issue 73) through `modelfs.open`: every dataset of files keras 3.15.1 and
tf-keras wrote (fixtures/keras) and of legacy files other projects shipped (fixtures/real/
keras) equals what h5py reads (expected.json: sha256 of its bytes); a `.keras` file on S3
reads as the local one; Keras 3 layers by the user's names."""

import hashlib
import json
import os

import numpy as np
import pytest

import modelfs
from conftest import fixture

CASES = [("keras", n) for n in json.load(open(fixture("keras/expected.json")))["files"]] + [
    ("real/keras", n) for n in json.load(open(fixture("real/keras/expected.json")))["files"]]


def raw(a, dtype):
    """The little-endian bytes h5py holds (Keras 3's bfloat16, `|V2`, comes widened to
    float32, exactly: its upper 16 bits)."""
    if dtype == "|V2":
        return (np.ascontiguousarray(a, dtype="<f4").view("<u4") >> 16).astype("<u2").tobytes()
    a = np.ascontiguousarray(a)
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


@pytest.mark.parametrize("folder,name", CASES)
def test_every_dataset_equals_what_h5py_reads(folder, name):
    want = json.load(open(fixture(f"{folder}/expected.json")))["files"][name]["datasets"]
    m = modelfs.open(fixture(os.path.join(folder, name)))
    by_h5 = {}
    for k in m.keys():
        by_h5[m.info(k).get("hdf5_path", k)] = k
    assert sorted(by_h5) == sorted(p.lstrip("/") for p in want)
    for path, w in want.items():
        got = m[by_h5[path.lstrip("/")]]
        assert list(got.shape) == w["shape"], path
        assert hashlib.sha256(raw(got, w["dtype"])).hexdigest() == w["sha256"], path


def test_a_keras_file_on_s3_reads_as_the_local_one(moto):
    src = fixture("keras/keras-3.15.1_jax.keras")
    moto.upload("models", src, "keras/model.keras")
    local = modelfs.open(src)
    m = modelfs.open("s3://models/keras/model.keras", endpoint=moto.url, cache_dir="none")
    assert m.keys() == local.keys()
    assert "layers/dense_bf16/vars/0" in m.keys()
    for k in local.keys():
        assert np.array_equal(m[k], local[k]), k
    assert m.metadata["metadata"]["keras_version"] == "3.15.1"
