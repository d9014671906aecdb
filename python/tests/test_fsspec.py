"""The fsspec filesystem `modelfs`: every file of a mount, by URL, without FUSE — the same
names, sizes and bytes as a real mount of the model (and ranges of them); the chained and the
explicit URL forms; pandas and numpy reading through it; S3 (moto) as the source; refusals."""

import json
import os

import numpy as np
import pytest

import modelfs
from conftest import fixture, needs, needs_fuse

# A model of each kind a mount shows (a TF checkpoint, partitioned variables, hash tables, a
# SavedModel, Angel's formats, Monolith, DeepRec, safetensors, torch, numpy, GGUF).
SOURCES = ["tf/multi_shard/ckpt", "tf/partitioned/ckpt", "tf/hashtable/tf1", "tf/savedmodel",
           "angel/nolf/model", "angel/formats/model", "monolith/ps_export",
           "deeprec/clean/model.ckpt", "safetensors/sharded", "safetensors/dtypes.safetensors",
           "torch/checkpoint.pt", "torch/dtypes.pt", "numpy/arrays.npz", "numpy/fortran_i4.npy",
           "gguf/kquants.gguf"]
# Most files compared per source (each read whole and in a range).
MOST = 1000


def unsized(doc):
    v = json.loads(doc)
    for layout in v.get("layouts") or []:
        layout["size"] = None
    return v


def mount_files(point):
    # Symlinks followed, as fsspec's `find` follows them (its local file system's too): a
    # directory of checkpoints' `latest` is walked as the checkpoint it names.
    out = {}
    for d, _, files in os.walk(point, followlinks=True):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, point)] = p
    return out


@pytest.mark.parametrize("rel", SOURCES)
def test_every_file_equals_the_mounts(rel):
    fsspec = needs("fsspec")
    needs_fuse()
    src = fixture(rel)
    fs = fsspec.filesystem("modelfs", fo=src, cache_dir="none", skip_instance_cache=True)
    with modelfs.mount(src, cache_dir="none") as point:
        want = mount_files(point)
        got = sorted(fs.find("", withdirs=False))
        assert got == sorted(want), rel
        dirs = {os.path.relpath(d, point) for d, _, _ in os.walk(point, followlinks=True)} - {"."}
        assert sorted(fs.find("", withdirs=True)) == sorted(set(want) | dirs)
        for name in sorted(want)[:MOST]:
            with open(want[name], "rb") as f:
                data = f.read()
            if name.endswith(".json"):
                # A document names its tensor's other files' sizes where known: the mount may
                # have learnt a text size this process has not. The same but for those, and
                # its own size is its bytes'.
                got = fs.cat_file(name)
                assert fs.size(name) == len(got), name
                assert unsized(got) == unsized(data), name
                continue
            assert fs.size(name) == len(data) == os.path.getsize(want[name]), name
            assert fs.cat_file(name) == data, name
            a, b = len(data) // 3, 2 * len(data) // 3 + 1
            assert fs.cat_file(name, a, b) == data[a:b], name
            assert fs.cat_file(name, -7) == data[-7:], name
            with fs.open(name, block_size=1 << 12) as f:
                f.seek(a)
                assert f.read(b - a) == data[a:b], name


def test_url_forms_numpy_and_pandas():
    fsspec = needs("fsspec")
    pandas = needs("pandas")
    base = fixture("tf/multi_shard")
    local = modelfs.open(os.path.join(base, "ckpt"))
    name = local.keys()[0]
    want = local[name]
    # The model, then the file in its mount; and the same split explicitly.
    for url in (f"modelfs::{base}/ckpt/{name}.npy", f"modelfs://{name}.npy::{base}/ckpt"):
        with fsspec.open(url, modelfs={"cache_dir": "none"}) as f:
            got = np.load(f)
        assert got.dtype == want.dtype and np.array_equal(got, want), url
    # A text layout read by pandas: the values the mount's csv gives.
    fs = fsspec.filesystem("modelfs", fo=os.path.join(base, "ckpt"), layouts="csv")
    with fs.open(f"{name}.csv") as f:
        table = pandas.read_csv(f, header=None)
    assert np.allclose(table.to_numpy().ravel(), want.ravel())
    # What is not there, and what cannot be done.
    with pytest.raises(FileNotFoundError):
        fs.info("no/such.npy")
    with pytest.raises(FileNotFoundError):
        fs.cat_file("no/such.npy")
    with pytest.raises(PermissionError):
        fs.open(f"{name}.npy", "wb")
    with pytest.raises(modelfs.SourceNotFoundError):
        fsspec.filesystem("modelfs", fo="/no/such/model", skip_instance_cache=True)


def test_an_s3_model_through_fsspec(moto):
    fsspec = needs("fsspec")
    moto.upload("models", fixture("monolith/ps_export"), "fs_monolith")
    url = "s3://models/fs_monolith"
    local = fsspec.filesystem("modelfs", fo=fixture("monolith/ps_export"))
    remote_opts = {"endpoint": moto.url, "cache_dir": "none"}
    fs = fsspec.filesystem("modelfs", fo=url, skip_instance_cache=True, **remote_opts)
    names = sorted(local.find("", withdirs=False))
    assert sorted(fs.find("", withdirs=False)) == names
    for n in names[:20]:
        assert fs.cat_file(n) == local.cat_file(n), n


def test_a_listing_renders_nothing(tmp_path):
    """`ls -l` of a mount shows a big text file's size as a placeholder rather than render
    it; so does a listing through fsspec (size None), and `info` learns the exact size."""
    fsspec = needs("fsspec")
    big = np.arange(1_500_000, dtype=np.float32).reshape(1500, 1000) / 7
    np.save(tmp_path / "big.npy", big)
    fs = fsspec.filesystem("modelfs", fo=str(tmp_path / "big.npy"), layouts="txt,npy",
                           cache_dir="none", skip_instance_cache=True)
    listed = {e["name"]: e for e in fs.ls("", detail=True)}
    txt = [n for n in listed if n.endswith(".txt")]
    assert txt and all(listed[n]["size"] is None for n in txt), listed
    npy = [n for n in listed if n.endswith(".npy")]
    assert npy and all(listed[n]["size"] == 128 + big.nbytes for n in npy), listed
    found = fs.find("", detail=True)
    assert all(found[n]["size"] is None for n in txt)
    # A reader's size is exact: the text rendered once, then known to listings too.
    size = fs.info(txt[0])["size"]
    assert size == len(fs.cat_file(txt[0])) > big.size
    assert fs.ls("", detail=True)[[e["name"] for e in fs.ls("", detail=True)].index(txt[0])][
        "size"] == size
    assert fs.du("") == sum(fs.size(n) for n in fs.find(""))


def test_pyarrow_reads_through_fsspec():
    """pyarrow's file system over fsspec's (`FSSpecHandler`): the same bytes and a csv table."""
    fsspec = needs("fsspec")
    pafs = needs("pyarrow.fs")
    pacsv = needs("pyarrow.csv")
    src = fixture("tf/multi_shard/ckpt")
    fs = fsspec.filesystem("modelfs", fo=src, layouts="csv,npy", skip_instance_cache=True)
    arrow = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    local = modelfs.open(src)
    name = [k for k in local.keys() if local[k].ndim == 2][0]
    with arrow.open_input_file(f"{name}.npy") as f:
        assert f.size() == fs.size(f"{name}.npy")
        got = np.load(__import__("io").BytesIO(f.read()))
    assert np.array_equal(got, local[name])
    info = arrow.get_file_info(pafs.FileSelector("", recursive=True))
    assert {i.path for i in info if i.type == pafs.FileType.File} == set(fs.find(""))
    with arrow.open_input_stream(f"{name}.csv") as f:
        table = pacsv.read_csv(f, read_options=pacsv.ReadOptions(autogenerate_column_names=True))
    assert np.allclose(np.stack([c.to_numpy() for c in table.columns], axis=1), local[name])
