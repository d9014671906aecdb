"""`modelfs.dask.array`: a tensor and a hash table as lazy dask arrays whose chunks are the
model's pieces, computed on a local cluster of worker processes, equal `m[name]`."""

import numpy as np
import pytest

import modelfs
from conftest import fixture, needs


@pytest.mark.parametrize("rel,name,piece_bytes", [
    ("tf/multi_shard/ckpt", None, 8),
    ("monolith/ps_export", "hash_tables/MonolithHashTable_0a1b_0", 4096),
    ("angel/formats/model", "ValueBinary_float_intkey_dense", 40),
])
def test_a_dask_array_is_the_tensor(rel, name, piece_bytes):
    distributed = needs("distributed")
    needs("dask")
    import modelfs.dask as mdask
    src = fixture(rel)
    m = modelfs.open(src, cache_dir="none")
    if name is None:
        name = max(m.keys(), key=lambda k: m.info(k)["shape"][:1] or [0])
    want = m[name]
    a = mdask.array(src, name, max_bytes=piece_bytes, cache_dir="none")
    assert a.shape == want.shape and a.dtype == want.dtype
    assert len(a.chunks[0]) == len(m.pieces(name, piece_bytes)) >= 2
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        got = a.compute()
    assert got.dtype == want.dtype and np.array_equal(got, want)
    # Lazily sliced and reduced without the whole array.
    assert np.array_equal(a[1:2].compute(scheduler="sync"), want[1:2])
