"""PyTorch Distributed Checkpoints (issue 73) through `modelfs.open`, the whole-model
`.safetensors` view and S3: every tensor and value of checkpoints torch 2.15 wrote
(scripts/gen_dcp.py: one process; four gloo ranks with DTensors sharded over one and two mesh
dimensions; the zstd transform) equals what `dcp_to_torch_save` + `torch.load` read back
(fixtures/dcp/expected.json); a storage path out of the checkpoint is refused, locally and on
S3."""

import hashlib
import json
import struct

import numpy as np
import pytest

import modelfs
from conftest import cli, fixture

EXPECTED = json.load(open(fixture("dcp/expected.json")))
NAMES = ["single", "multi", "zstd"]


def torch_bytes(a, dtype):
    """The little-endian element bytes torch holds for `a` (bfloat16 comes widened to
    float32, exactly: its upper 16 bits)."""
    if dtype == "bfloat16":
        return (np.ascontiguousarray(a, dtype="<f4").view("<u4") >> 16).astype("<u2").tobytes()
    a = np.ascontiguousarray(a)
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def key_of(name, fqn):
    parts = EXPECTED["fixtures"][name]["metadata"][0]["planner_data"][fqn]
    return "/".join(str(p) for p in parts)


def tensors(name):
    return {fqn: w for fqn, w in EXPECTED["fixtures"][name]["reads"].items() if "value" not in w}


def nested(values, path):
    for p in path.split("/"):
        values = values[p]
    return values


@pytest.mark.parametrize("name", NAMES)
def test_every_tensor_and_value_equals_what_torch_reads(name):
    m = modelfs.open(fixture(f"dcp/{name}"))
    want = tensors(name)
    assert m.keys() == sorted(key_of(name, f) for f in want)
    for fqn, w in want.items():
        got = m[key_of(name, fqn)]
        assert list(got.shape) == w["shape"], fqn
        assert hashlib.sha256(torch_bytes(got, w["dtype"])).hexdigest() == w["sha256"], fqn
    # The root's values (`extra`, which holds no tensor); the Rust suite checks the rest,
    # which are in the `__values__.json` of their directories.
    values = m.metadata
    for fqn, w in EXPECTED["fixtures"][name]["reads"].items():
        if "value" in w and fqn.startswith("extra."):
            assert nested(values, key_of(name, fqn)) == w["value"], fqn


@pytest.mark.parametrize("name", ["single", "multi"])
def test_the_safetensors_view_is_the_checkpoint_consolidated(name):
    src = fixture(f"dcp/{name}")
    data = cli("cat", src, ".safetensors").stdout
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    assert header.pop("__metadata__")["source"] == "pytorch-dcp"
    want = {key_of(name, f): w for f, w in tensors(name).items()}
    assert sorted(header) == sorted(want)
    body = data[8 + n:]
    for key, h in header.items():
        start, end = h["data_offsets"]
        assert h["shape"] == want[key]["shape"], key
        assert hashlib.sha256(body[start:end]).hexdigest() == want[key]["sha256"], key


def test_a_sharded_checkpoint_on_s3_reads_as_the_local_one(moto):
    moto.upload("models", fixture("dcp/multi"), "dcp_multi")
    local = modelfs.open(fixture("dcp/multi"))
    m = modelfs.open("s3://models/dcp_multi", endpoint=moto.url, cache_dir="none")
    assert m.keys() == local.keys()
    for k in local.keys():
        assert np.array_equal(m[k], local[k]), k
    assert m.metadata == local.metadata
    moto.upload("models", fixture("dcp/hostile/path_dotdot"), "dcp_dotdot")
    h = modelfs.open("s3://models/dcp_dotdot", endpoint=moto.url, cache_dir="none")
    with pytest.raises(modelfs.SourceError, match="refused"):
        h["model/embed.weight"]


def test_a_flipped_byte_is_an_error_and_a_verdict():
    m = modelfs.open(fixture("dcp/hostile/flipped_byte"))
    with pytest.raises(modelfs.SourceError, match="CRC"):
        m["model/embed.weight"]
    p = cli("verify", fixture("dcp/hostile/flipped_byte"), check=False)
    assert p.returncode == 2 and b"model/embed.weight" in p.stdout
