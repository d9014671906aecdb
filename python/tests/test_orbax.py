"""Orbax checkpoints (issue 73) through `modelfs.open` and S3: every array of the checkpoints
orbax-checkpoint 0.12.8 wrote (scripts/gen_orbax.py: OCDBT and plain directories, zarr v2 and
v3, arrays sharded over 8 devices, two processes) equals what Orbax's restore returns
(fixtures/orbax/*/expected.json); a data file path out of the checkpoint is refused."""

import hashlib
import json
import os
import shutil

import numpy as np
import pytest

import modelfs
from conftest import fixture

NAMES = ["ocdbt", "ocdbt_zarr3", "zarr2_plain", "zarr3_plain", "sharded", "sharded_zarr3",
         "multiprocess", "omitted_fill", "v1"]


def le_bytes(a, dtype):
    """The little-endian element bytes Orbax restores (bfloat16 comes widened to float32,
    exactly: its upper 16 bits)."""
    if dtype == "bfloat16":
        return (np.ascontiguousarray(a, dtype="<f4").view("<u4") >> 16).astype("<u2").tobytes()
    a = np.ascontiguousarray(a)
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def expected(name):
    with open(fixture(f"orbax/{name}/expected.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("name", NAMES)
def test_every_array_equals_what_orbax_restores(name):
    want = expected(name)
    item = want.get("item_dir", "")
    m = modelfs.open(fixture(f"orbax/{name}"))
    for key, w in want["arrays"].items():
        got = m[f"{item}/{key}" if item else key]
        assert list(got.shape) == w["shape"], key
        assert hashlib.sha256(le_bytes(got, w["dtype"])).hexdigest() == w["sha256"], key


def test_a_manager_directory_is_its_steps():
    want = expected("manager")
    m = modelfs.open(fixture("orbax/manager"))
    for step, s in want["steps"].items():
        for key, w in s["arrays"].items():
            got = m[f"{step}/default/{key}"]
            assert hashlib.sha256(le_bytes(got, w["dtype"])).hexdigest() == w["sha256"], key


def test_a_checkpoint_on_s3_reads_as_the_local_one(moto, tmp_path):
    moto.upload("models", fixture("orbax/sharded_zarr3"), "orbax_sharded")
    local = modelfs.open(fixture("orbax/sharded_zarr3"))
    m = modelfs.open("s3://models/orbax_sharded", endpoint=moto.url, cache_dir="none")
    assert m.keys() == local.keys()
    for k in local.keys():
        assert np.array_equal(m[k], local[k]), k
    # A symlink in a data file's place, out of the checkpoint: refused locally.
    copy = tmp_path / "ck"
    shutil.copytree(fixture("orbax/ocdbt"), copy)
    secret = tmp_path / "secret"
    secret.write_bytes(b"x" * 4096)
    d = copy / "d" / os.listdir(copy / "d")[0]
    d.unlink()
    d.symlink_to(secret)
    with pytest.raises(Exception, match="resolves out"):
        modelfs.open(str(copy))
