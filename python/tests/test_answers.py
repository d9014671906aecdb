"""Rows by id, the whole-model answers (`stats`, `diff`, `diff_rows`, `check`, `verify` equal
the command's `--json`), `mount`, and pieces read in parallel by Dask workers."""

import contextlib
import io
import json
import os
import time

import numpy as np
import pytest

import modelfs
from conftest import cli, fixture, needs, needs_fuse

MONOLITH = "monolith/ps_export"
TABLE = "hash_tables/MonolithHashTable_0a1b_0"


def test_rows_by_id_are_the_mount_rows():
    src = fixture(MONOLITH)
    samples = json.load(open(fixture("monolith/MonolithHashTable_0a1b_0.samples.json")))
    ids = [int(i) for i in samples][:20]
    missing = 123456789123
    assert str(missing) not in samples
    m = modelfs.open(src)
    found, rows = m.rows(TABLE, ids[:10] + [missing] + ids[10:])
    assert list(found) == ids and rows.shape == (len(ids), 8) and rows.dtype == np.float32
    for i, row in zip(found, rows):
        # What the writer saved, and byte for byte the mount's NAME.rows/ID.npy.
        assert np.allclose(row, samples[str(i)], rtol=0, atol=1e-7)
        npy = cli("cat", src, f"{TABLE}.rows/{i}.npy").stdout
        assert row.tobytes() == np.load(io.BytesIO(npy)).tobytes()
    empty_ids, empty = m.rows(TABLE, [missing])
    assert len(empty_ids) == 0 and empty.shape == (0, 8) and empty.dtype == np.float32
    # An id given unsigned (2^64 - 1) is the signed id the table stores (-1): asked, not
    # refused.
    assert len(m.rows(TABLE, [2**64 - 1])[0]) == 0
    with pytest.raises(modelfs.UnavailableError, match="keyed"):
        modelfs.open(fixture("tf/multi_shard/ckpt")).rows("a", [1])


def json_of(*args, ok=(0,)):
    p = cli(*args, check=False)
    assert p.returncode in ok, p.stderr.decode()
    return p.stdout.decode()


def test_stats_is_the_command_json():
    src = fixture("tf/dtypes/ckpt")
    assert modelfs.stats(src) == json.loads(json_of("stats", "--json", src, ok=(0, 2)))
    assert modelfs.stats(src, "float32") == json.loads(json_of("stats", "--json", src, "float32"))
    with pytest.raises(KeyError):
        modelfs.stats(src, "no/such/tensor")


def test_diff_is_the_command_json():
    a, b = fixture("tf/multi_shard/ckpt"), fixture("tf/dtypes/ckpt")
    got = modelfs.diff(a, b)
    assert got == json.loads(json_of("diff", "--json", a, b, ok=(1,)))
    assert {d["status"] for d in got} >= {"only_a", "only_b"}
    assert all(d["status"] == "identical" for d in modelfs.diff(a, a))
    torch, tf = fixture("port/torch.pt"), fixture("port/tf/ckpt")
    rules = [r"\.weight$=/kernel", r"\.bias$=/bias", r"\.=/"]
    args = ["diff", "--json", "--transpose", tf, torch]
    for r in rules:
        args += ["--map", r]
    assert modelfs.diff(tf, torch, map=rules, transpose=True) == json.loads(
        json_of(*args, ok=(0, 1)))


def test_diff_rows_is_the_command_json():
    a, b = fixture("tf/hashtable/step/a"), fixture("tf/hashtable/step/b")
    got = modelfs.diff_rows(a, b)
    lines = json_of("diff", "--rows", "--json", a, b, ok=(0, 1)).splitlines()
    assert got == [json.loads(line) for line in lines if line.strip()]
    assert any(d.get("status") == "changed" for d in got)


def test_check_is_the_command_json():
    src = fixture("deeprec/clean/model.ckpt")
    assert modelfs.check(src) == json.loads(json_of("check", "--json", src, ok=(0, 2)))
    tight = modelfs.check(src, max_abs=1e-9)
    assert tight == json.loads(json_of("check", "--json", "--max-abs", "1e-09", src, ok=(0, 2)))
    assert tight["problems"], tight


def test_verify_is_the_command_json_with_notes_apart():
    # Unrun classes (TorchScript modules, build_intlist) are notes: no problem, exit 0.
    src = fixture("torch/more/scripted.pt")
    got = modelfs.verify(src)
    assert got == json.loads(json_of("verify", "--json", src))
    assert got["problems"] == [] and got["notes"], got
    assert any("build_intlist" in n["detail"] for n in got["notes"]), got
    # A dangerous call is a problem (the command's exit 2 is an answer, not an exception).
    bad = modelfs.verify(fixture("torch/hostile_eval.pt"))
    assert bad["problems"] and "dangerous" in bad["problems"][0]["detail"], bad


def test_a_missing_name_suggests_the_other_spelling():
    # The state dict's names, dotted, for the net saved whole too; `/` for `.` is suggested.
    m = modelfs.open(fixture("torch/more/module.pt"))
    assert "backbone.0.conv.weight" in m.keys()
    assert m["backbone.0.conv.weight"].shape == (4, 3, 3, 3)
    with pytest.raises(KeyError, match="did you mean backbone.0.conv.weight"):
        m["backbone/0/conv/weight"]
    with pytest.raises(KeyError) as e:
        m["nope"]
    assert "did you mean" not in str(e.value)


def test_mount_gives_paths_and_unmounts():
    needs_fuse()
    src = fixture("tf/multi_shard/ckpt")
    m = modelfs.open(src)
    with modelfs.mount(src) as root:
        assert os.path.ismount(root)
        for name in m.keys():
            path = os.path.join(root, name + ".npy")
            if os.path.exists(path):
                assert np.load(path).tobytes() == m[name].tobytes()
    assert not os.path.exists(root)


def test_mount_says_why_it_failed(tmp_path):
    if not os.path.exists("/dev/fuse"):
        with pytest.raises(modelfs.ModelfsError, match="FUSE"):
            with modelfs.mount(fixture("tf/multi_shard/ckpt")):
                pass
        return
    with pytest.raises(modelfs.SourceError, match="not recognised|no such|No such"):
        with modelfs.mount(tmp_path / "nothing"):
            pass


def merged(parts):
    n = sum(p["count"] for p in parts)
    total = sum(p["sum"] for p in parts)
    mean = total / n
    var = sum(p["sumsq"] for p in parts) / n - mean * mean
    return {"count": n, "min": min(p["min"] for p in parts),
            "max": max(p["max"] for p in parts), "mean": mean, "std": max(var, 0.0) ** 0.5}


def piece_stats(model, piece):
    a = model.read_piece(piece).astype(np.float64).ravel()
    return {"count": a.size, "sum": float(a.sum()), "sumsq": float((a * a).sum()),
            "min": float(a.min()), "max": float(a.max())}


@pytest.mark.parametrize("rel,name,piece_bytes", [
    (MONOLITH, TABLE, 4096),
    ("angel/formats/model", "ValueBinary_float_intkey_dense", 40),  # 5 rows of 10 floats
])
def test_dask_workers_read_pieces(rel, name, piece_bytes):
    distributed = needs("distributed")
    src = fixture(rel)
    m = modelfs.open(src, cache_dir="none")
    assert name in m, m.keys()
    pieces = m.pieces(name, max_bytes=piece_bytes)
    assert len(pieces) >= 4
    assert sum(p.stop - p.start for p in pieces) == m.info(name)["shape"][0]
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        # The model goes to each worker pickled (its source and options); each opens its own.
        futures = client.map(piece_stats, [m] * len(pieces), pieces)
        parts = client.gather(futures)
        workers = client.run(os.getpid)
    assert len(set(workers.values())) == 3
    got = merged(parts)
    want = next(s for s in modelfs.stats(src, name) if s["name"] == name)
    assert got["count"] == want["count"]
    assert got["min"] == want["min"] and got["max"] == want["max"]
    assert abs(got["mean"] - want["mean"]) <= 1e-9 * max(1.0, abs(want["mean"]))
    assert abs(got["std"] - want["std"]) <= 1e-6 * max(1.0, want["std"])


def test_failures_raise_and_are_never_an_empty_answer(tmp_path):
    a = fixture("tf/hashtable/step/a")
    missing = str(tmp_path / "nothing")
    with pytest.raises(modelfs.SourceError):
        modelfs.diff_rows(a, missing)
    with pytest.raises(KeyError):
        modelfs.diff_rows(a, a, "no/such/table")
    with pytest.raises(modelfs.SourceError):
        modelfs.diff(a, missing)
    with pytest.raises(modelfs.SourceError):
        modelfs.stats(missing)
    with pytest.raises(modelfs.SourceError):
        modelfs.check(missing)
    with pytest.raises(modelfs.UsageError):
        modelfs.stats(a, nosuch="1")


def test_a_busy_mount_point_is_refused_and_nothing_is_left_mounted(tmp_path):
    needs_fuse()
    src = fixture("tf/multi_shard/ckpt")
    with modelfs.mount(src, path=tmp_path) as root:
        with pytest.raises(modelfs.ModelfsError, match="mounted there already"):
            with modelfs.mount(src, path=root):
                pass
        assert os.path.ismount(root)
        # A reader still holding a file when the block ends.
        held = open(os.path.join(root, "a.txt"))
        ended = time.monotonic()
    assert time.monotonic() - ended < 15
    assert not os.path.ismount(str(tmp_path))
    # Detached, not killed: the file still open still reads (what `modelfs cat` gives).
    assert held.read() == cli("cat", src, "a.txt").stdout.decode()
    held.close()


def test_pieces_follow_partition_bands_and_cover_every_row_once():
    m = modelfs.open(fixture("angel/formats/model"))
    name = "ValueBinary_float_intkey_dense"
    bands = sorted({p["extent"][0][0] for p in m.info(name)["partitions"]})
    assert len(bands) > 1, bands
    whole = m[name]
    for max_bytes in (1 << 30, 40, 1):
        pieces = m.pieces(name, max_bytes=max_bytes)
        rows = [r for p in pieces for r in range(p.start, p.stop)]
        assert rows == list(range(whole.shape[0])), (max_bytes, pieces)
        # No piece crosses the start of a band of partitions.
        assert all(not (p.start < b < p.stop) for p in pieces for b in bands), pieces
        assert np.array_equal(np.concatenate([m.read_piece(p) for p in pieces]), whole)
    assert len(m.pieces(name, max_bytes=1 << 30)) == len(bands)
