"""`modelfs.open` of models on a real HDFS (a MiniDFSCluster run by scripts/hdfs, files put by
Hadoop's own client): by `hdfs://`, `webhdfs://` and `hdfs=True` with a bare path, every
tensor equals the local model's; a missing path and another user's refusal are the typed
errors."""

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

import modelfs
from conftest import FIXTURES, REPO, required

JAR = os.path.join(REPO, "scripts", "hdfs", "target", "minihdfs.jar")
SOURCES = ["tf/multi_shard", "angel/nolf/model", "monolith/ps_export", "safetensors/sharded"]


@pytest.fixture(scope="module")
def cluster():
    if not (shutil.which("java") and os.path.exists(JAR)):
        if required():
            pytest.fail(f"{JAR} is not built (scripts/hdfs/build.sh), and CI requires it")
        pytest.skip("scripts/hdfs is not built")
    base = tempfile.mkdtemp(prefix="minihdfs-")
    p = subprocess.Popen(["java", "-Xmx512m", "-jar", JAR, base], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready = json.loads(p.stdout.readline())

    def command(line):
        p.stdin.write(line + "\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "ok", line

    for i, s in enumerate(SOURCES):
        command(f"put {os.path.join(FIXTURES, s)} /m{i}")
    conf = os.path.join(base, "client-conf")
    os.makedirs(conf)
    with open(os.path.join(conf, "core-site.xml"), "w") as f:
        f.write("<configuration><property><name>fs.defaultFS</name>"
                f"<value>{ready['namenode']}</value></property></configuration>")
    ready["conf"] = conf
    ready["command"] = command
    yield ready
    command("quit")
    p.wait(timeout=30)
    shutil.rmtree(base, ignore_errors=True)


def source(rel):
    # A checkpoint prefix is named in its directory; the rest are the directory itself.
    return {"tf/multi_shard": "/ckpt"}.get(rel, "")


@pytest.mark.parametrize("i", range(len(SOURCES)))
def test_models_on_hdfs_read_like_local(cluster, i, monkeypatch):
    rel = SOURCES[i]
    local = modelfs.open(os.path.join(FIXTURES, rel) + source(rel))
    web = cluster["webhdfs"].replace("http://", "webhdfs://")
    monkeypatch.setenv("HADOOP_CONF_DIR", cluster["conf"])
    for url, opts in [(f"{cluster['namenode']}/m{i}{source(rel)}", {}),
                      (f"{web}/m{i}{source(rel)}", {}),
                      (f"/m{i}{source(rel)}", {"hdfs": True})]:
        with modelfs.open(url, cache_dir=None, **opts) as m:
            assert m.keys() == local.keys(), url
            for k in local.keys()[::3]:
                try:
                    b = local[k]
                except modelfs.UnavailableError:
                    # Too large to be dense (an Angel matrix of 2^31 columns): refused alike.
                    with pytest.raises(modelfs.UnavailableError):
                        m[k]
                    continue
                a = m[k]
                assert a.dtype == b.dtype and a.shape == b.shape, (url, k)
                assert a.tobytes() == b.tobytes(), (url, k)


def test_missing_and_refused_are_typed(cluster, monkeypatch):
    with pytest.raises(modelfs.SourceNotFoundError) as e:
        modelfs.open(f"{cluster['namenode']}/no/such/model")
    assert "no/such/model" in str(e.value)
    cluster["command"]("chmod 700 /m0")
    monkeypatch.setenv("HADOOP_USER_NAME", "someone")
    try:
        for url in (cluster["namenode"], cluster["webhdfs"].replace("http://", "webhdfs://")):
            with pytest.raises(modelfs.ModelfsError) as e:
                modelfs.open(f"{url}/m0/ckpt")
            assert "someone" in str(e.value), str(e.value)
    finally:
        monkeypatch.delenv("HADOOP_USER_NAME")
        cluster["command"]("chmod 755 /m0")
    np.testing.assert_array_equal(
        modelfs.open(f"{cluster['namenode']}/m0/ckpt").keys(),
        modelfs.open(os.path.join(FIXTURES, "tf/multi_shard/ckpt")).keys())


def test_engines_read_a_table_on_hdfs(cluster):
    """Dask reads a Monolith table on HDFS, a partition per shard: the same rows as the local
    table, by `hdfs://` from every task; a piece read twice gives the same rows."""
    pytest.importorskip("dask.dataframe") if not required() else __import__("dask.dataframe")
    import modelfs.dask
    i = SOURCES.index("monolith/ps_export")
    url = f"{cluster['namenode']}/m{i}"
    name = "hash_tables/MonolithHashTable_0a1b_0"
    ids, values = modelfs.open(os.path.join(FIXTURES, "monolith/ps_export")).table(name)
    df = modelfs.dask.dataframe(url, name, cache_dir="none")
    assert df.npartitions == 4, "a partition per shard"
    got = df.compute()
    order = np.argsort(got["id"].to_numpy())
    assert np.array_equal(got["id"].to_numpy()[order], ids)
    vec = np.stack([np.asarray(v, dtype=np.float32) for v in got["vec"]])[order]
    assert np.array_equal(vec, values)
    # A piece read again gives the same rows (an engine's retry).
    m = modelfs.open(url, cache_dir="none")
    p = m.table_pieces(name)[1]
    a, b = m.read_table_piece(p), m.read_table_piece(p)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and len(a[0])
