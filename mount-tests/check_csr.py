"""Checks NAME.csr.npz through a mount (issue 42): scipy.sparse.load_npz reads it; a sparse
matrix's equals its dense view (NAME.npy); a hash table's row i is the row of id ids[i]
(NAME.csr.ids.npy, ascending) as NAME.rows/<id>.npy gives it; XGBoost trains on one.

    python3 check_csr.py MOUNT < spec.json     (spec: [{"name": path, "kind": "sparse"|"table"}],
                                                a table may add "rows" and "sentinels")
"""
import json
import os
import sys

import numpy as np
import scipy.sparse
import xgboost

mount = sys.argv[1]
spec = json.load(sys.stdin)
checked = 0
trained = 0
for item in spec:
    name, kind = item["name"], item["kind"]
    path = os.path.join(mount, name)
    m = scipy.sparse.load_npz(path + ".csr.npz")
    assert m.format == "csr", (name, m.format)
    if kind == "sparse" and os.path.exists(path + ".npy"):
        dense = np.load(path + ".npy")
        assert m.shape == dense.shape, (name, m.shape, dense.shape)
        assert np.array_equal(m.toarray(), dense, equal_nan=True), name
    elif kind == "sparse":
        # Too big for a dense view: each row's stored entries as the libsvm layout has them.
        with open(path + ".libsvm") as f:
            for line in f:
                label, *pairs = line.split()
                row = m.getrow(int(label))
                cols = [int(p.split(":")[0]) for p in pairs]
                num = int if row.dtype.kind in "iu" else float
                vals = [num(p.split(":")[1]) for p in pairs]
                assert list(row.indices) == cols, (name, label)
                assert np.array_equal(row.data, np.array(vals, row.dtype), equal_nan=True), (name, label)
    else:
        ids = np.load(path + ".csr.ids.npy")
        assert ids.dtype == np.int64 and len(ids) == m.shape[0], name
        # A DenseHashTable's: its entries, no sentinel bucket.
        assert item.get("rows", m.shape[0]) == m.shape[0], (name, m.shape, item)
        assert len(set(ids) & set(item.get("sentinels", []))) == 0, (name, "a sentinel as a row")
        assert np.all(ids[1:] >= ids[:-1]), f"{name}: ids not ascending"
        rows = m.toarray()
        assert m.nnz == m.shape[0] * m.shape[1], name
        for i, id_ in enumerate(ids):
            want = np.load(os.path.join(path + ".rows", f"{id_}.npy"))
            assert np.array_equal(rows[i], want.reshape(-1), equal_nan=True), (name, id_)
    # XGBoost keeps per-column state: not for the 2^31-column long-key matrices.
    if m.shape[0] >= 2 and m.shape[1] <= 1 << 20 and m.dtype.kind == "f" and np.isfinite(m.data).all():
        label = (np.arange(m.shape[0]) % 2).astype(np.float32)
        d = xgboost.DMatrix(m, label=label)
        xgboost.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 1}, d, 2)
        trained += 1
    checked += 1
print(f"checked {checked} CSR files, XGBoost trained on {trained}")
