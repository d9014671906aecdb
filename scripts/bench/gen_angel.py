"""Writes a dense Angel model for scripts/bench.sh: MATRICES float matrices of ROWS x COLS in
ValueBinaryRowFormat (formats/angel.md §7.2), one partition each, streamed a row block at a
time. Usage: gen_angel.py DIR MATRICES ROWS COLS"""
import json
import os
import struct
import sys

import numpy as np

out, n, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
for m in range(n):
    name = f"w{m}"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(m)
    with open(os.path.join(d, "0"), "wb") as f:
        step = max(1, (64 << 20) // (cols * 4))
        for r in range(0, rows, step):
            k = min(step, rows - r)
            f.write(rng.uniform(-0.25, 0.25, size=(k, cols)).astype(">f4").tobytes())
    row_metas = {str(r): {"rowId": r, "offset": 0, "elementNum": cols, "saveType": 0}
                 for r in range(rows)}
    meta = {"matrixId": m, "matrixName": name,
            "formatClassName": "com.tencent.angel.model.output.format.ValueBinaryRowFormat",
            "rowType": 7, "row": rows, "col": cols, "blockRow": rows, "blockCol": cols,
            "options": {}, "partMetas": {"0": {
                "partId": 0, "startRow": 0, "endRow": rows, "startCol": 0, "endCol": cols,
                "nnz": rows * cols, "saveRowNum": rows, "saveColNum": 0, "saveColElemNum": 0,
                "fileName": "0", "offset": 0, "length": rows * cols * 4, "rowMetas": row_metas}}}
    body = json.dumps(meta, separators=(",", ":")).encode()
    with open(os.path.join(d, "meta"), "wb") as f:
        f.write(struct.pack(">i", len(body)) + body)
