"""Issue 70: Python as complete as the mount — tables whole, exceptions that cross processes,
Pythonic options, strings, close(), one descriptor per file, a cached key set, Mapping,
metadata, stored bytes, a tidy namespace."""

import concurrent.futures
import json
import os
import pickle
import resource
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

import modelfs
from conftest import cli, fixture
from test_open import damaged_copy

DENSE = "tf/hashtable/dense/savedmodel/a"


def test_a_hash_table_answers_by_name_and_whole():
    src = fixture(DENSE)
    m = modelfs.open(src)
    assert m.tables() == ["dht"]
    assert "dht" in m and "dht" not in m.keys()
    info = m.info("dht")
    assert info["hash_table"]["kind"] == "DenseHashTable"
    ids, values = m.table("dht")
    # The mount's NAME.csr.ids.npy, byte for byte; sentinels never among the ids.
    want_ids = np.load(__import__("io").BytesIO(cli("cat", src, "dht.csr.ids.npy").stdout))
    assert np.array_equal(ids, want_ids) and np.array_equal(m.ids("dht"), want_ids)
    assert not set(info["hash_table"]["sentinel_keys"]) & set(ids.tolist())
    assert values.shape == (len(ids), 3) and values.dtype == np.float32
    # Each row is the one found by id.
    found, rows = m.rows("dht", ids)
    assert np.array_equal(found, ids) and np.array_equal(rows, values)
    # m[...] and pieces, as for any tensor.
    assert np.array_equal(m["dht"], values)
    pieces = m.pieces("dht", max_bytes=400)
    assert len(pieces) > 2
    assert np.array_equal(np.concatenate([m.read_piece(p) for p in pieces]), values)


def _raise_in_worker(model, piece):
    return model.read_piece(piece).sum()


def test_a_checksum_error_crosses_a_process_pool(tmp_path):
    m = modelfs.open(damaged_copy(tmp_path), cache_dir=None)
    bad = None
    for name in m.keys():
        try:
            m[name]
        except modelfs.ChecksumError as e:
            bad, err = name, e
        except modelfs.UnavailableError:
            pass
    assert bad is not None
    assert type(err).__module__ == "modelfs" and err.tensor == bad
    assert err.expected is not None and err.actual is not None and err.expected != err.actual
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is modelfs.ChecksumError and str(back) == str(err)
    assert (back.tensor, back.path, back.expected, back.actual) == \
        (err.tensor, err.path, err.expected, err.actual)
    with concurrent.futures.ProcessPoolExecutor(2) as pool:
        futures = [pool.submit(_raise_in_worker, m, p) for p in m.pieces(bad)]
        with pytest.raises(modelfs.ChecksumError) as got:
            for f in futures:
                f.result()
    assert got.value.tensor == bad and "checksum" in str(got.value)


def test_a_missing_source_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError) as got:
        modelfs.open(tmp_path / "no-such-model")
    assert isinstance(got.value, modelfs.SourceError)
    assert isinstance(pickle.loads(pickle.dumps(got.value)), FileNotFoundError)


def test_options_are_pythonic():
    src = fixture("tf/multi_shard/ckpt")
    m = modelfs.open(src, verify=False, cache_dir=None, layouts=["npy", "txt"])
    assert m.options == {"verify": "none", "cache_dir": "none", "layouts": "npy,txt"}
    assert "verify='none'" in repr(m)
    assert modelfs.open(src, anonymous=False).options == {}
    with pytest.raises(modelfs.UsageError):
        modelfs.open(src, threads=None)
    with pytest.raises(ValueError):
        modelfs.open(src, max_dense=False)


def test_strings_are_bytes_arrays():
    m = modelfs.open(fixture("tf/strings/ckpt"))
    got = {k: m[k] for k in m}
    grid = got["grid_2x3"]
    assert grid.dtype == object and grid.shape == (2, 3) and grid[0, 1] == b"r0c1"
    assert got["scalar"].shape == () and got["scalar"][()] == b"only one"
    assert m.keys(dtype="string") == sorted(got)
    # The README quick start's model reads whole.
    q = modelfs.open(fixture("tf/multi_shard/ckpt"))
    assert all(isinstance(v, np.ndarray) for v in q.values())


def test_close_and_with():
    src = fixture("tf/multi_shard/ckpt")
    with modelfs.open(src) as m:
        assert m.keys()
    assert m.closed
    with pytest.raises(modelfs.ModelfsError, match="closed"):
        m.keys()
    with pytest.raises(modelfs.ModelfsError, match="closed"):
        m["emb"]


def _write_safetensors(path, tensors):
    header, data = {}, b""
    for name, a in tensors.items():
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """A 163-shard safetensors model of 23,607 tensors with its index (the tour's "MoE")."""
    d = tmp_path_factory.mktemp("moe")
    n, shards = 23607, 163
    names = [f"model.layers.{i // 100}.experts.{i % 100}.w" for i in range(n)]
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        fname = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        _write_safetensors(d / fname, {k: np.full(2, s, np.float32) for k in part})
        weight_map.update({k: fname for k in part})
    with open(d / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return str(d), names


def test_membership_is_a_set_lookup(moe):
    src, names = moe
    m = modelfs.open(src)
    assert len(m) == len(names)
    probes = [names[i % len(names)] for i in range(10**5)]
    t = time.perf_counter()
    hits = sum(1 for p in probes if p in m)
    took = time.perf_counter() - t
    assert hits == len(probes)
    assert took < 0.1, f"10^5 `in` took {took:.3f} s"


def test_a_163_shard_model_opens_three_times_under_ulimit_256(moe):
    """Fails with a descriptor (or two) per shard held for the model's life."""
    src, names = moe
    code = f"""
import resource, modelfs
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
# Descriptors kept by a bounded table (a share of the limit), not one or two per shard for
# the model's life: three models of it alive at once, and a fourth opened over the third.
models = [modelfs.open({src!r}) for _ in range(3)]
for m in models:
    assert m[{names[-1]!r}].tolist() == [{(len(names) - 1) % 163}.0] * 2
    assert m[{names[0]!r}].tolist() == [0.0, 0.0]
m = models[-1]
m = modelfs.open({src!r})
assert len(m) == {len(names)}
with modelfs.open({src!r}) as again:
    assert again[{names[1]!r}].tolist() == [1.0, 1.0]
print("ok")
"""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


def test_a_mapping_with_metadata_raw_bytes_and_a_tidy_namespace():
    m = modelfs.open(fixture("gguf/model.gguf"))
    assert isinstance(m, __import__("collections").abc.Mapping)
    assert m.get("no/such") is None
    first = m.keys()[0]
    assert dict(m.items())[first].shape == m[first].shape
    assert m._ipython_key_completions_() == m.keys()
    meta = m.metadata
    assert meta["general.architecture"] == "llama"
    torch = modelfs.open(fixture("torch/checkpoint.pt")).metadata
    assert torch["epoch"] == 7 and torch["config"]["name"] == "tiny"
    st = json.loads(cli("cat", fixture("safetensors/dtypes.safetensors"),
                        "__metadata__.json").stdout)
    assert modelfs.open(fixture("safetensors/dtypes.safetensors")).metadata == st
    # Stored bytes: the mount's NAME.bin (GGUF quantized blocks as stored).
    k = modelfs.open(fixture("gguf/kquants.gguf"))
    name = k.keys()[0]
    assert k.raw(name) == cli("cat", "-o", "layouts=bin", fixture("gguf/kquants.gguf"),
                              f"{name}.bin").stdout
    assert isinstance(modelfs.__version__, str) and modelfs.__version__
    shown = dir(modelfs)
    for leaked in ("os", "json", "np", "subprocess", "Any", "_native"):
        assert leaked not in shown, leaked
    for api in ("open", "Model", "ChecksumError", "SourceNotFoundError", "__version__"):
        assert api in shown
    # Rows by a numpy id array.
    src = fixture(DENSE)
    found, _ = modelfs.open(src).rows("dht", np.array([1000, 1001], dtype=np.int64))
    assert found.tolist() == [1000, 1001]


def test_the_stubs_take_numpy_ids_under_mypy_strict(tmp_path):
    mypy = pytest.importorskip("mypy.api") if not os.environ.get("CI") else \
        __import__("mypy.api").api
    user = tmp_path / "user.py"
    user.write_text(
        "import numpy as np\nimport modelfs\n"
        "m = modelfs.open('x')\n"
        "found, rows = m.rows('t', np.array([1, 2], dtype=np.int64))\n"
        "ids, vals = m.table('t')\n"
        "with modelfs.open('y') as m2:\n    v: np.ndarray = m2['a']\n"
        "print(m.get('a'), m.metadata, modelfs.__version__)\n")
    out, err, status = mypy.run(["--strict", "--no-incremental", str(user)])
    assert status == 0, out + err


def test_the_version_names_the_commit_the_package_and_the_binary_are_built_from():
    """`modelfs.__version__` is the crate version plus the commit (PEP 440's local form), and
    the binary the package runs says the same commit (`modelfs 0.1.0 (1a2b3c4d5e6f 2026-12-07)`)."""
    import re
    v = modelfs.__version__
    m = re.fullmatch(r"(\d+\.\d+\.\d+)(?:\+g([0-9a-f]{12}))?", v)
    assert m, v
    shown = cli("--version").stdout.decode().strip()
    if m.group(2):
        dated = rf"modelfs {re.escape(m.group(1))} \({m.group(2)} \d{{4}}-\d{{2}}-\d{{2}}\)"
        assert re.fullmatch(dated, shown), (v, shown)
    else:
        assert shown == f"modelfs {v} (commit unknown)", (v, shown)
