"""Beyond one machine (issue 72): a local Spark (`local[2]`), a local Ray and Dask read a model's
tables and tensors through `modelfs.spark`, `modelfs.ray` and `modelfs.dask.dataframe`, a
piece per task, no FUSE. What they read equals what modelfs answers (`rows`, `table`, the
arrays) and what the table's writer recorded (`gen_monolith`'s samples); a Spark SQL join of
two saves equals `modelfs diff --rows` and the writer's own record of what changed; the
catalog equals every tensor's `.json`; a damaged tensor fails the job with the tensor, the
piece and the cause."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import modelfs
from conftest import REPO, fixture, needs, required

# A Monolith table of N ids in SHARDS shards (16 MiB of values a Spark partition: 4 of them).
N, DIM, SHARDS = 2_000_000, 8, 4
TABLE = "MonolithHashTable_big_0"
NAME = f"hash_tables/{TABLE}"
PIECE = 16 << 20
CATALOGS = ["tf/multi_shard/ckpt", "tf/partitioned/ckpt", "tf/hashtable/tf1", "tf/savedmodel",
            "tf/dtypes", "angel/nolf/model", "angel/formats/model", "monolith/ps_export",
            "deeprec/clean/model.ckpt", "safetensors/sharded", "safetensors/dtypes.safetensors",
            "torch/checkpoint.pt", "torch/dtypes.pt", "numpy/arrays.npz", "gguf/kquants.gguf"]


def _gen_monolith():
    # `cargo test` builds examples without copying them to `examples/`: build it here then.
    path = os.path.join(REPO, "target", "release", "examples", "gen_monolith")
    if not os.path.exists(path):
        try:
            subprocess.run(["cargo", "build", "--release", "--quiet", "--example", "gen_monolith"],
                           cwd=REPO, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            if required():
                pytest.fail(f"{path} missing and not built: {e}")
            pytest.skip("gen_monolith not built")
    return path


@pytest.fixture(scope="module")
def saves(tmp_path_factory):
    """Two saves of one table: `a`, and `b` with ids removed, changed and added (`truth`)."""
    gen = _gen_monolith()
    base = tmp_path_factory.mktemp("saves")
    out = {}
    for which, extra in (("a", []), ("b", ["next"])):
        model = base / which
        subprocess.run([gen, str(model / "assets"), TABLE, str(N), str(DIM), str(SHARDS), *extra],
                       check=True)
        out[which] = str(model)
    truth = {}
    with open(base / "b" / f"{TABLE}.truth") as f:
        for line in f:
            i, what = line.split()
            truth[int(i)] = what
    with open(base / "a" / f"{TABLE}.samples.json") as f:
        samples = {int(k): v for k, v in json.load(f).items()}
    out.update(truth=truth, samples=samples)
    return out


@pytest.fixture(scope="module")
def spark(moto):
    # After `moto`: the executors' Python workers inherit the environment the JVM started
    # with (the S3 credentials).
    needs("pyspark")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master("local[2]").appName("modelfs-tests")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.shuffle.partitions", "4")
         .getOrCreate())
    import modelfs.spark
    modelfs.spark.register(s)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def ray_local():
    needs("ray")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             _node_ip_address="127.0.0.1")
    yield ray
    ray.shutdown()


def _want(m, name):
    """The table as modelfs answers it: {id: row}."""
    ids, values = m.table(name)
    return ids, values


def test_spark_reads_a_big_table_in_pieces(spark, saves):
    src = saves["a"]
    m = modelfs.open(src)
    df = (spark.read.format("modelfs").option("tensor", NAME).option("piece_bytes", PIECE)
          .load(src))
    assert df.schema.simpleString() == "struct<id:bigint,vec:array<float>>"
    assert df.rdd.getNumPartitions() == 4
    df.createOrReplaceTempView("t")
    got = spark.sql("SELECT count(*) AS n, count(DISTINCT id) AS ids, "
                    "sum(aggregate(vec, 0D, (a, x) -> a + x)) AS total FROM t").collect()[0]
    ids, values = _want(m, NAME)
    assert got["n"] == got["ids"] == len(ids) == N
    assert got["total"] == pytest.approx(values.astype(np.float64).sum(), rel=1e-9)
    # The writer's own record of some rows, and modelfs's rows by id.
    asked = sorted(saves["samples"])[:50]
    rows = {r["id"]: r["vec"] for r in df.where(df.id.isin(asked)).collect()}
    assert sorted(rows) == asked
    found, vals = m.rows(NAME, asked)
    for i, v in zip(found, vals):
        assert np.array_equal(np.array(rows[int(i)], dtype=np.float32), v)
        assert np.array_equal(np.array(saves["samples"][int(i)], dtype=np.float32), v)
    # Wide columns: the same values.
    wide = (spark.read.format("modelfs").option("tensor", NAME).option("columns", "wide")
            .option("piece_bytes", PIECE).load(src))
    assert wide.columns == ["id"] + [f"v{j}" for j in range(DIM)]
    first = wide.where(wide.id == asked[0]).collect()[0]
    assert [first[f"v{j}"] for j in range(DIM)] == rows[asked[0]]


def test_a_spark_join_of_two_saves_is_diff_rows(spark, saves):
    load = (lambda s: spark.read.format("modelfs").option("tensor", NAME)
            .option("piece_bytes", PIECE).load(s))
    load(saves["a"]).createOrReplaceTempView("a")
    load(saves["b"]).createOrReplaceTempView("b")
    kinds = spark.sql("""
        SELECT CASE WHEN b.id IS NULL THEN 'removed' WHEN a.id IS NULL THEN 'added'
                    ELSE 'changed' END AS what, coalesce(a.id, b.id) AS id
        FROM a FULL OUTER JOIN b ON a.id = b.id
        WHERE a.id IS NULL OR b.id IS NULL OR a.vec <> b.vec""").collect()
    got = {r["id"]: r["what"] for r in kinds}
    assert got == saves["truth"]
    summary = [d for d in modelfs.diff_rows(saves["a"], saves["b"], NAME) if "id" not in d]
    counts = {k: sum(1 for w in got.values() if w == k) for k in ("removed", "added", "changed")}
    assert summary, "diff --rows gave no summary"
    s = summary[-1]
    assert (s.get("removed"), s.get("added"), s.get("changed")) == \
        (counts["removed"], counts["added"], counts["changed"]), s


def test_spark_catalog_of_every_fixture(spark):
    from modelfs import _arrow
    for rel in CATALOGS:
        src = fixture(rel)
        got = [r.asDict() for r in spark.read.format("modelfs").load(src).collect()]
        want = _arrow.catalog_rows(modelfs.open(src))
        norm = (lambda rows: sorted((r["name"], r.get("dtype"), list(r.get("shape") or []),
                                     r.get("bytes"), r.get("role")) for r in rows))
        assert norm(got) == norm(want), rel
        names = {r["name"] for r in got}
        m = modelfs.open(src)
        assert names == set(m.keys()) | set(m.tables()), rel


def test_spark_dense_and_keyed_tensors_equal_modelfs(spark):
    # A dense 2-D variable, 1-D ones, a TF hash table in 3 shards, Angel matrices by row id.
    cases = [("tf/multi_shard/ckpt", None), ("tf/hashtable/tf1", "model/user_emb"),
             ("tf/hashtable/tf2", "m/dense"), ("angel/formats/model", None)]
    for rel, only in cases:
        src = fixture(rel)
        m = modelfs.open(src)
        names = [only] if only else [k for k in m.keys()
                                     if m.info(k)["dtype"] not in ("string", "complex64")][:6]
        for name in names:
            df = spark.read.format("modelfs").option("tensor", name).load(src)
            rows = df.collect()
            key = df.columns[0]
            if key == "id":
                ids = [r["id"] for r in rows]
                found, vals = m.rows(name, ids)
                assert list(found) == ids, (rel, name)
                assert np.array_equal(np.array([r["vec"] for r in rows], dtype=vals.dtype)
                                      .reshape(vals.shape), vals), (rel, name)
                # Sentinels (empty buckets) are never rows: as many as the table's ids.
                assert len(ids) == len(set(ids)), (rel, name)
                if m._m.exists(f"{name}.csr.ids.npy"):
                    assert sorted(ids) == list(m.ids(name)), (rel, name)
            else:
                want = m[name]
                rows.sort(key=lambda r: r["row"])
                got = np.array([r["vec"] if "vec" in df.columns else r["value"] for r in rows])
                assert np.array_equal(got.reshape(want.shape).astype(want.dtype), want), \
                    (rel, name)


def test_spark_reads_s3(spark, moto):
    moto.upload("models", fixture("monolith/ps_export"), "spark_monolith")
    src = "s3://models/spark_monolith"
    local = modelfs.open(fixture("monolith/ps_export"))
    name = "hash_tables/MonolithHashTable_0a1b_0"
    df = (spark.read.format("modelfs").option("tensor", name).option("endpoint", moto.url)
          .option("cache_dir", "none").load(src))
    got = {r["id"]: r["vec"] for r in df.collect()}
    ids, values = local.table(name)
    assert sorted(got) == list(ids)
    assert np.array_equal(np.array([got[int(i)] for i in ids], dtype=np.float32), values)
    cat = spark.read.format("modelfs").option("endpoint", moto.url).load(src)
    assert cat.count() == len(set(local.keys()) | set(local.tables()))


def test_a_damaged_tensor_fails_the_job_naming_tensor_piece_and_cause(spark, tmp_path):
    from test_open import damaged_copy
    src = str(damaged_copy(tmp_path))
    m = modelfs.open(src, cache_dir="none")
    bad = [k for k in m.keys() if _fails(m, k)]
    assert bad, "the damaged copy has a damaged tensor"
    df = (spark.read.format("modelfs").option("tensor", bad[0]).option("cache_dir", "none")
          .load(src))
    with pytest.raises(Exception) as e:
        df.collect()
    text = str(e.value)
    assert "ChecksumError" in text and f"{bad[0]}, rows 0.." in text and src in text, text


def _fails(m, name):
    try:
        m[name]
        return False
    except modelfs.ChecksumError:
        return True
    except modelfs.UnavailableError:
        return False


def test_ray_reads_the_same_rows(ray_local, saves):
    import modelfs.ray
    src = saves["a"]
    ds = modelfs.ray.read(src, NAME, piece_bytes=PIECE)
    assert ds.count() == N
    asked = sorted(saves["samples"])[:20]
    wanted = np.array(asked, dtype=np.int64)
    got = ds.map_batches(lambda b: {k: v[np.isin(b["id"], wanted)] for k, v in b.items()},
                         batch_format="numpy").take_all()
    assert sorted(r["id"] for r in got) == asked
    for r in got:
        assert np.array_equal(np.asarray(r["vec"], dtype=np.float32),
                              np.array(saves["samples"][r["id"]], dtype=np.float32))
    total = ds.map_batches(lambda b: {"s": [float(np.sum(np.concatenate(b["vec"])))]},
                           batch_format="numpy").sum("s")
    _, values = modelfs.open(src).table(NAME)
    assert total == pytest.approx(values.astype(np.float64).sum(), rel=1e-6)
    cat = modelfs.ray.read(fixture("monolith/ps_export")).to_pandas()
    assert sorted(cat["name"]) == sorted(set(modelfs.open(fixture("monolith/ps_export")).keys())
                                         | set(modelfs.open(fixture("monolith/ps_export"))
                                               .tables()))


def test_dask_dataframe_reads_the_same_rows(saves):
    needs("dask.dataframe")
    import modelfs.dask
    src = saves["a"]
    df = modelfs.dask.dataframe(src, NAME, max_bytes=PIECE)
    assert df.npartitions == 4
    ids = df["id"].compute()
    assert len(ids) == ids.nunique() == N
    asked = sorted(saves["samples"])[:20]
    picked = df[df["id"].isin(asked)].compute()
    assert sorted(picked["id"]) == asked
    for i, v in zip(picked["id"], picked["vec"]):
        assert np.array_equal(np.asarray(v, dtype=np.float32),
                              np.array(saves["samples"][int(i)], dtype=np.float32))
    # Every Angel matrix by row id, through Dask: modelfs's rows.
    m = modelfs.open(fixture("angel/formats/model"))
    keyed = [name for name in m.keys() if m._by_id(name)]
    assert len(keyed) > 10
    for name in keyed:
        got = modelfs.dask.dataframe(m, name).compute()
        found, vals = m.rows(name, list(got["id"]))
        assert list(found) == list(got["id"]), name
        assert np.array_equal(np.stack([np.asarray(v) for v in got["vec"]]).astype(vals.dtype)
                              if len(got) else vals, vals), name


def test_a_monolith_shard_is_planned_and_read_alone(tmp_path):
    """Planning a Monolith table's pieces reads no shard, and a task reads only its own: a
    damaged shard fails its piece alone (the whole table, which looks at every shard, fails);
    a table missing a shard is not read in parts either."""
    import shutil
    src = tmp_path / "ps"
    shutil.copytree(fixture("monolith/ps_export"), src)
    name = "hash_tables/MonolithHashTable_0a1b_0"
    good = modelfs.open(fixture("monolith/ps_export"), cache_dir="none")
    all_ids = set(good.table(name)[0].tolist())
    shard = src / "assets" / "MonolithHashTable_0a1b_0-00002-of-00004"
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    shard.write_bytes(bytes(raw))
    m = modelfs.open(str(src), cache_dir="none")
    pieces = m.table_pieces(name)
    assert [p.part for p in pieces] == [0, 1, 2, 3]
    seen = set()
    for p in pieces:
        if p.part == 2:
            with pytest.raises(modelfs.SourceError, match="00002-of-00004"):
                m.read_table_piece(p)
            continue
        ids, values = m.read_table_piece(p)
        assert values.shape == (len(ids), 8)
        found, want = good.rows(name, ids)
        assert list(found) == list(ids) and np.array_equal(values, want)
        seen |= set(ids.tolist())
    assert seen < all_ids and len(seen) > len(all_ids) // 2
    with pytest.raises(modelfs.ModelfsError):
        m.rows(name, [next(iter(seen))])
    (src / "assets" / "MonolithHashTable_0a1b_0-00001-of-00004").unlink()
    m = modelfs.open(str(src), cache_dir="none")
    for p in m.table_pieces(name):
        with pytest.raises(modelfs.ModelfsError, match="missing shard 00001"):
            m.read_table_piece(p)


def test_a_dask_join_of_two_saves_is_the_writers_record(saves):
    dd = needs("dask.dataframe")
    import modelfs.dask
    a = modelfs.dask.dataframe(saves["a"], NAME, columns="wide")
    b = modelfs.dask.dataframe(saves["b"], NAME, columns="wide")
    j = dd.merge(a, b, on="id", how="outer", indicator=True, suffixes=("_a", "_b"))
    only = j[j["_merge"] != "both"][["id", "_merge"]].compute()
    both = j[j["_merge"] == "both"]

    def differing(part):
        a = np.stack([part[f"v{k}_a"].to_numpy(dtype=np.float32) for k in range(DIM)], axis=1)
        b = np.stack([part[f"v{k}_b"].to_numpy(dtype=np.float32) for k in range(DIM)], axis=1)
        return part["id"][np.any(a != b, axis=1)]

    changed = both.map_partitions(differing, meta=both["id"]._meta).compute()
    what = {"left_only": "removed", "right_only": "added"}
    got = {int(i): what[str(m)] for i, m in zip(only["id"], only["_merge"])}
    got.update({int(i): "changed" for i in changed})
    assert got == saves["truth"]
