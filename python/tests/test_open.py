"""`modelfs.open`: every fixture model's tensors equal the mount's `.npy` files byte for byte,
locally and from S3; metadata, slices, errors, pickling and threads."""

import _thread
import contextlib
import glob
import io
import json
import os
import pickle
import shutil
import signal
import threading
import time

import numpy as np
import pytest

import modelfs
from conftest import FIXTURES, cli, fixture, npy_of, required

# One of every reader and source form: TF (multi-shard, every dtype, hash tables), Angel,
# Monolith, DeepRec, safetensors (file, shards), torch (zip, shards, legacy), numpy, GGUF
# (plain, K-quants); then every real file other projects wrote.
SOURCES = [
    "tf/multi_shard/ckpt",
    "tf/dtypes/ckpt",
    "tf/hashtable/tf2",
    "angel/formats/model",
    "monolith/ps_export",
    "deeprec/clean/model.ckpt",
    "safetensors/dtypes.safetensors",
    "safetensors/sharded",
    "torch/checkpoint.pt",
    "torch/sharded",
    "numpy/arrays.npz",
    "gguf/model.gguf",
    "gguf/kquants.gguf",
    "dcp/single",
    "dcp/multi",
    "dcp/zstd",
    "onnx/dtypes.onnx",
    "keras/keras-3.15.1_tensorflow.keras",
    "keras/tf-keras-2.21.0_model.h5",
    "orbax/ocdbt",
    "orbax/sharded_zarr3",
    "orbax/zarr2_plain",
    "orbax/manager/2",
    "keras/h5py-chunked.h5",
    "keras/keras-3.15.1_jax_sharded.weights.json",
    "dcp/safetensors_multi",
]
REAL = sorted(
    os.path.relpath(p, FIXTURES)
    for kind in ("torch", "safetensors", "numpy", "gguf", "onnx", "keras")
    for p in glob.glob(os.path.join(FIXTURES, "real", kind, "*"))
    if not p.endswith((".json", ".md"))
)
# Most tensors compared per source (the Angel fixture has 128: every eighth is enough).
MOST = 40


def real_mounts():
    """Whether to compare with a real mount (FUSE here, or required by CI: then a missing
    /dev/fuse fails the mount) or, where FUSE is missing, with `modelfs cat` (the mount's own
    tree without the kernel)."""
    return os.path.exists("/dev/fuse") or required()


def compare_with_mount(source):
    m = modelfs.open(source)
    keys = m.keys()
    listed = json.loads(cli("list", "--json", source).stdout)
    assert keys == sorted(t["path"] for t in listed), source
    step = max(1, len(keys) // MOST)
    compared = 0
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(modelfs.mount(source)) if real_mounts() else None
        for name in keys[::step]:
            if root is not None:
                path = os.path.join(root, name + ".npy")
                mounted = open(path, "rb").read() if os.path.exists(path) else None
            else:
                mounted = npy_of(source, name)
                mounted = mounted and mounted[0]
            if mounted is None and m.info(name).get("dtype") == "string":
                # Strings: an array of bytes objects in the tensor's shape.
                got = m[name]
                assert got.dtype == object and list(got.shape) == m.info(name)["shape"]
                continue
            if mounted is None:
                # No .npy in the mount: open must refuse it too, and say why.
                with pytest.raises((modelfs.UnavailableError, modelfs.SourceError)):
                    m[name]
                continue
            want = np.load(io.BytesIO(mounted), allow_pickle=False)
            got = m[name]
            assert got.dtype == want.dtype and got.shape == want.shape, name
            assert got.tobytes() == want.tobytes(), name
            compared += 1
    return compared


@pytest.mark.parametrize("rel", SOURCES)
def test_fixture_models_equal_the_mount(rel):
    assert compare_with_mount(fixture(rel)) > 0


@pytest.mark.parametrize("rel", REAL)
def test_real_files_equal_the_mount(rel):
    # Every tensor either equals the mount's .npy or, where the mount has none (object and
    # structured arrays, a vocabulary-only GGUF), is refused by both.
    compare_with_mount(fixture(rel))


def test_real_files_are_there():
    # The real-file matrix above must not shrink to nothing when a directory moves.
    assert len(REAL) >= 30, REAL


@pytest.mark.parametrize("rel", ["tf/multi_shard/ckpt", "monolith/ps_export",
                                 "safetensors/sharded", "torch/checkpoint.pt",
                                 "gguf/kquants.gguf", "angel/formats/model"])
def test_from_s3_equal_local(moto, rel):
    local = fixture(rel)
    key = "models/" + rel.replace("/", "_")
    if os.path.isdir(local):
        moto.upload("models", local, rel.replace("/", "_"))
        url = f"s3://{key}"
    elif rel.endswith("/ckpt"):
        base = os.path.dirname(local)
        moto.upload("models", base, rel.replace("/", "_"))
        url = f"s3://{key}/ckpt"
    else:
        moto.upload("models", local, rel.replace("/", "_"))
        url = f"s3://{key}"
    remote = modelfs.open(url, endpoint=moto.url, cache_dir="none")
    here = modelfs.open(local)
    assert remote.keys() == here.keys()
    compared = 0
    for name in here.keys():
        try:
            want = here[name]
        except modelfs.UnavailableError:
            with pytest.raises(modelfs.UnavailableError):
                remote[name]
            continue
        got = remote[name]
        same = (got.tolist() == want.tolist() if want.dtype == object
                else got.tobytes() == want.tobytes())
        assert got.dtype == want.dtype and same, name
        compared += 1
    assert compared > 0


def test_info_is_the_json_file():
    src = fixture("tf/multi_shard/ckpt")
    m = modelfs.open(src)
    for name in m.keys():
        assert m.info(name) == __import__("json").loads(cli("cat", src, f"{name}.json").stdout)
    assert "a" in m and "nope" not in m and len(m) == len(m.keys())


def test_slices_read_rows():
    src = fixture("safetensors/dtypes.safetensors")
    m = modelfs.open(src)
    for name in m.keys():
        try:
            whole = m[name]
        except modelfs.UnavailableError:
            continue
        if whole.ndim == 0:
            continue
        n = whole.shape[0]
        if n == 0:
            assert m.slice(name)[0:5].shape == whole[0:5].shape
            continue
        for key in [slice(0, 1), slice(1, n), slice(None, None, 2), slice(-1, None),
                    slice(n, n + 3), slice(None, None, -1)]:
            got = m.slice(name)[key]
            assert np.array_equal(got, whole[key], equal_nan=whole.dtype.kind == "f"), (name, key)
        for i in (0, n - 1, -1, -n):
            assert np.array_equal(m.slice(name)[i], whole[i], equal_nan=whole.dtype.kind == "f")
        for key in [slice(None, None, -2), slice(n - 1, 0, -3), slice(-2, None, -1),
                    slice(0, n, 3)]:
            assert np.array_equal(m.slice(name)[key], whole[key],
                                  equal_nan=whole.dtype.kind == "f"), (name, key)
        assert np.array_equal(m.slice(name)[()], whole, equal_nan=whole.dtype.kind == "f")
        if whole.ndim == 2:
            assert np.array_equal(m.slice(name)[0:2, 1:], whole[0:2, 1:],
                                  equal_nan=whole.dtype.kind == "f")
        with pytest.raises(IndexError):
            m.slice(name)[n]


def test_errors_are_typed_and_say_why(tmp_path):
    with pytest.raises(modelfs.SourceError, match="not recognised|No such|no such"):
        modelfs.open(tmp_path / "nothing-here")
    with pytest.raises(modelfs.UsageError, match="nosuch"):
        modelfs.open(fixture("tf/multi_shard/ckpt"), nosuch=1)
    m = modelfs.open(fixture("tf/multi_shard/ckpt"))
    with pytest.raises(KeyError, match="nope"):
        m["nope"]
    # Strings are an array of bytes objects; numbers of them are unavailable.
    assert m["s"].dtype == object
    with pytest.raises(modelfs.UnavailableError, match="string"):
        m.slice("s")[0:1]
    assert issubclass(modelfs.ChecksumError, modelfs.SourceError)
    assert issubclass(modelfs.SourceError, modelfs.ModelfsError)


def damaged_copy(tmp_path):
    """A copy of the TF dtypes checkpoint with the last tensor's last byte flipped; its
    prefix."""
    for f in glob.glob(fixture("tf/dtypes/ckpt") + ".*"):
        shutil.copy(f, tmp_path)
    data = tmp_path / "ckpt.data-00000-of-00001"
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0x40
    data.write_bytes(bytes(raw))
    return tmp_path / "ckpt"


def test_a_corrupted_tensor_raises_checksum_error_while_the_others_read(tmp_path):
    m = modelfs.open(damaged_copy(tmp_path), cache_dir="none")
    bad, good = [], []
    for name in m.keys():
        try:
            m[name]
            good.append(name)
        except modelfs.ChecksumError as e:
            assert "checksum" in str(e).lower(), e
            bad.append(name)
        except modelfs.UnavailableError:
            pass
    assert len(bad) == 1 and len(good) >= 10, (bad, good)
    # The CLI agrees on which.
    assert cli("cat", str(tmp_path / "ckpt"), f"{bad[0]}.npy", "-o", "cache_dir=none",
               check=False).returncode == 2


def test_a_hostile_pickle_runs_nothing():
    # The fixtures' hostile pickles would create the file expected.json names, if run.
    expected = json.load(open(fixture("torch/expected.json")))
    target = expected["_marker"]
    if os.path.exists(target):
        os.remove(target)
    for f, callee in (("hostile_system.pt", "system"), ("hostile_eval.pt", "eval")):
        m = modelfs.open(fixture(f"torch/{f}"))
        # The file's tensor reads; the call is a problem the model names, not a call made.
        assert m.keys() == ["w"] and m["w"].dtype == np.float32, f
        values = json.loads(cli("cat", fixture(f"torch/{f}"), "__values__.json").stdout)
        why = values["problems"]["x"]
        assert callee in why and "not run" in why, why
    assert not os.path.exists(target), "a hostile pickle ran"


def test_pickles_as_its_source_and_options(monkeypatch):
    monkeypatch.chdir(os.path.dirname(FIXTURES))
    m = modelfs.open("fixtures/tf/multi_shard/ckpt", verify="crc", cache_dir="none")
    assert os.path.isabs(m.source)
    monkeypatch.chdir("/")
    again = pickle.loads(pickle.dumps(m))
    assert again.source == m.source and again.options == m.options
    assert again.keys() == m.keys()
    assert np.array_equal(again["emb"], m["emb"])


def test_threads_read_at_once():
    m = modelfs.open(fixture("safetensors/dtypes.safetensors"))
    names = [n for n in m.keys() if m.info(n)["dtype"] in ("float32", "int64")]
    want = {n: m[n].tobytes() for n in names}
    errors = []

    def work():
        try:
            for _ in range(50):
                for n in names:
                    assert m[n].tobytes() == want[n]
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and names


@pytest.mark.parametrize("rel", ["tf/dtypes/ckpt", "safetensors/dtypes.safetensors",
                                 "numpy/arrays.npz", "torch/checkpoint.pt", "gguf/kquants.gguf"])
def test_map_equals_a_copy_and_lends_the_file_where_it_can(rel):
    m = modelfs.open(fixture(rel))
    lent = 0
    for name in m.keys():
        try:
            copy = m[name]
        except modelfs.UnavailableError:
            continue
        view = m.map(name)
        assert view.dtype == copy.dtype and view.shape == copy.shape, name
        assert view.tobytes() == copy.tobytes(), name
        assert not view.flags.writeable, name
        again = m.map(name)
        if view.size and view.__array_interface__["data"][0] == again.__array_interface__["data"][0]:
            # Two reads at one address: views of the one mapping, not copies.
            lent += 1
    if rel.startswith(("tf/", "safetensors/")):
        assert lent >= 5, (rel, lent)


def test_map_checks_the_checksum_first(tmp_path):
    m = modelfs.open(damaged_copy(tmp_path), cache_dir="none")
    raised = 0
    for name in m.keys():
        try:
            m.map(name)
        except modelfs.ChecksumError:
            raised += 1
        except modelfs.UnavailableError:
            pass
    assert raised == 1


def test_ctrl_c_stops_a_long_read(moto, tmp_path):
    # 256 MiB of a .npy on S3 (no checksum pass first: numpy has none; values from 1, so a
    # byte read is told from one not read), read with a small block cache so that every
    # piece is fetched.
    n = 64 << 20
    np.save(tmp_path / "big.npy", np.arange(1, n + 1, dtype=np.int32))
    moto.upload("models", str(tmp_path / "big.npy"), "big.npy")
    m = modelfs.open("s3://models/big.npy", endpoint=moto.url, cache_dir="none", cache="16M")
    name = m.keys()[0]
    header, size = m._m.npy_header(name)
    buf = np.zeros(n, dtype=np.int32)

    def ctrl_c_once_the_first_piece_is_in():
        deadline = time.monotonic() + 60
        while buf[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        _thread.interrupt_main()

    # Python's own Ctrl-C handler, whatever this process inherited: a job started in the
    # background by a shell ignores SIGINT, and then Python installs none.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        watcher = threading.Thread(target=ctrl_c_once_the_first_piece_is_in)
        watcher.start()
        with pytest.raises(KeyboardInterrupt):
            m._m.read_npy_into(name, len(header), buf.view(np.uint8))
        watcher.join()
    finally:
        signal.signal(signal.SIGINT, previous)
    print(f"read {np.count_nonzero(buf) / n:.0%} of the tensor before giving up")
    # Given up before the end: the last 8 MiB piece was never read.
    assert buf[0] == 1 and buf[-1] == 0, (buf[0], buf[-1], np.count_nonzero(buf))
    # And the model reads again afterwards.
    assert m.slice(name)[-3:].tolist() == [n - 2, n - 1, n]
