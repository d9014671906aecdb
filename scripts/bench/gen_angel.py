"""Angel models of any size for scripts/bench.sh, written as Angel's PS writes them
(formats/angel.md: the default partition grid, files of at most 5 partitions named by their first
id, partitions back to back, ids ascending within a partition), streamed a block at a time.

Usage:
  gen_angel.py DIR MATRICES ROWS COLS     dense float matrices w0.. in ValueBinaryRowFormat
  gen_angel.py DIR lr ENTRIES [PARTS]     LR: 1 x 2147483657 long keys (rowType 12), ENTRIES
                                          stored entries, ColIdValueTextRowFormat
  gen_angel.py DIR lrbin ENTRIES [PARTS]  the same entries in ColIdValueBinaryRowFormat
  gen_angel.py DIR emb IDS [DIMS] [PARTS] [next]
                                          embedding: DIMS x IDS float (rowType 7),
                                          TextColumnFormat (one line per id); `next`: its
                                          next save, for diff --rows (see emb)
  gen_angel.py DIR fc N [PARTS]           N x N double (rowType 0), RowIdColIdValueTextRowFormat
                                          with DecimalFormat("#.######") values

Values are short decimals (k/10^6; k/1000 in the FC), so the text is what a reader parses exactly. Each kind also
writes DIR/<matrix>.samples.json: (row, col, value) triples a test compares with modelfs."""
import json
import os
import struct
import sys

import numpy as np

FMT = "com.tencent.angel.model.output.format."


def files_of(parts):
    """Angel's grouping of one PS's partition ids into files of at most 5 (§4)."""
    if len(parts) <= 5:
        return [parts]
    mid = len(parts) // 2
    return files_of(parts[:mid]) + files_of(parts[mid:])


def write_meta(d, name, fmt, row_type, rows, cols, block_row, block_col, parts, options=None):
    meta = {"matrixId": 0, "matrixName": name, "formatClassName": FMT + fmt,
            "rowType": row_type, "row": rows, "col": cols, "blockRow": block_row,
            "blockCol": block_col, "options": options or {}, "partMetas": parts}
    body = json.dumps(meta, separators=(",", ":")).encode()
    with open(os.path.join(d, "meta"), "wb") as f:
        f.write(struct.pack(">i", len(body)) + body)


def part_meta(pid, sr, er, sc, ec, file, offset, length, row_metas, save_col=0, save_elem=0):
    return {"partId": pid, "startRow": sr, "endRow": er, "startCol": sc, "endCol": ec,
            "nnz": 0, "saveRowNum": 0 if save_col else len(row_metas), "saveColNum": save_col,
            "saveColElemNum": save_elem, "fileName": file, "offset": offset, "length": length,
            "rowMetas": row_metas}


def values(rng, n):
    """n short decimals k/1000 as text and as the float64 they denote."""
    k = rng.integers(-999999, 999999, size=n)
    return k


def text_of(k):
    # k/1000 with Java-like style: at least one fraction digit.
    s = f"{k / 1000!r}"
    return s


def text_of6(k):
    return f"{k / 1e6!r}"


def dense(out, n, rows, cols):
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
        parts = {"0": part_meta(0, 0, rows, 0, cols, "0", 0, rows * cols * 4, row_metas)}
        write_meta(d, name, "ValueBinaryRowFormat", 7, rows, cols, rows, cols, parts)


def lr(out, entries, nparts, binary):
    name = "lrbin" if binary else "lr"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    cols = 2147483657
    block = -(-cols // nparts)
    rng = np.random.default_rng(7)
    parts, samples = {}, []
    per = entries // nparts
    for group in files_of(list(range(nparts))):
        fname = str(group[0])
        offset = 0
        with open(os.path.join(d, fname), "wb") as f:
            for p in group:
                sc, ec = p * block, min(cols, (p + 1) * block)
                n = per + (1 if p < entries % nparts else 0)
                ids = np.sort(rng.choice(ec - sc, size=n, replace=False) if n < (ec - sc) // 4
                              else rng.permutation(ec - sc)[:n]) + sc
                ids = np.unique(ids)
                n = len(ids)
                ks = rng.integers(-999999999, 999999999, size=n)
                length = 0
                step = 1 << 20
                for a in range(0, n, step):
                    ci, kv = ids[a:a + step], ks[a:a + step]
                    if binary:
                        rec = np.empty(len(ci), dtype=[("c", ">i8"), ("v", ">f4")])
                        rec["c"], rec["v"] = ci, (kv / 1e6).astype(np.float32)
                        b = rec.tobytes()
                    else:
                        b = "".join(f"{c},{text_of6(k)}\n" for c, k in zip(ci.tolist(),
                                                                         kv.tolist())).encode()
                    f.write(b)
                    length += len(b)
                for i in (0, n // 2, n - 1):
                    samples.append([0, int(ids[i]), float(np.float32(ks[i] / 1e6))])
                rm = {"0": {"rowId": 0, "offset": offset, "elementNum": int(n), "saveType": 0}}
                parts[str(p)] = part_meta(p, 0, 1, sc, ec, fname, offset, length, rm)
                offset += length
    write_meta(d, name, ("ColIdValueBinaryRowFormat" if binary else "ColIdValueTextRowFormat"),
               12, 1, cols, 1, block, parts)
    json.dump(samples, open(os.path.join(out, name + ".samples.json"), "w"))


def emb(out, ids, dims, nparts, nxt=False):
    """Columns 0..ids + ids // 1000 (the last thousandth left unsaved, the room a next save
    adds ids in). `nxt`: that next save (`diff --rows`, bench target 15): id c left out when
    c % 1000 == 5, value c % dims raised by 0.25 when c % 100 == 1, the last thousandth
    saved; OUT/emb.truth lists each such id (`id<TAB>removed|changed|added`)."""
    name = "emb"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    total = ids + ids // 1000
    block = -(-total // nparts)
    rng = np.random.default_rng(11)
    parts, samples, truth = {}, [], []
    for group in files_of(list(range(nparts))):
        fname = str(group[0])
        offset = 0
        with open(os.path.join(d, fname), "wb") as f:
            for p in group:
                sc, ec = p * block, min(total, (p + 1) * block)
                length = 0
                saved = 0
                step = 1 << 16
                for a in range(sc, ec, step):
                    b = min(ec, a + step)
                    # Micro-units: about 12 bytes a value, as Float.toString writes them.
                    ks = rng.integers(-999999999, 999999999, size=(b - a) * dims)
                    ks = ks.reshape(b - a, dims)
                    lines = []
                    for c, row in zip(range(a, b), ks.tolist()):
                        if c >= ids and not nxt:
                            continue
                        if nxt and c < ids and c % 1000 == 5:
                            truth.append(f"{c}\tremoved\n")
                            continue
                        if nxt and c < ids and c % 100 == 1:
                            row[c % dims] += 250000
                            truth.append(f"{c}\tchanged\n")
                        if nxt and c >= ids:
                            truth.append(f"{c}\tadded\n")
                        lines.append(str(c) + "," + ",".join(map(text_of6, row)) + "\n")
                    data = "".join(lines).encode()
                    f.write(data)
                    length += len(data)
                    saved += len(lines)
                    if (a == sc or b == ec) and b <= ids and not nxt:
                        i = (b - a) // 2
                        for r in (0, dims - 1):
                            samples.append([r, a + i, float(np.float32(ks[i][r] / 1e6))])
                rm = {str(r): {"rowId": r, "offset": -1, "elementNum": saved, "saveType": 0}
                      for r in range(dims)}
                parts[str(p)] = part_meta(p, 0, dims, sc, ec, fname, offset, length, rm,
                                          save_col=saved, save_elem=dims)
                offset += length
    write_meta(d, name, "TextColumnFormat", 7, dims, total, dims, block, parts,
               {"feature.index.range.start": "0", "feature.index.range.end": str(total)})
    if nxt:
        with open(os.path.join(out, name + ".truth"), "w") as f:
            f.writelines(truth)
    else:
        json.dump(samples, open(os.path.join(out, name + ".samples.json"), "w"))


def fc(out, n, nparts):
    name = "fc"
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    block = -(-n // nparts)
    rng = np.random.default_rng(13)
    parts, samples = {}, []
    for group in files_of(list(range(nparts))):
        fname = str(group[0])
        offset = 0
        with open(os.path.join(d, fname), "wb") as f:
            for p in group:
                sr, er = p * block, min(n, (p + 1) * block)
                length = 0
                for r in range(sr, er):
                    ks = values(rng, n).tolist()
                    # DecimalFormat("#.######"): k/1000 has at most 3 fraction digits.
                    data = "".join(f"{r},{c},{_decimal(k)}\n" for c, k in enumerate(ks)).encode()
                    f.write(data)
                    length += len(data)
                    if r in (sr, er - 1):
                        samples.append([r, n // 2, ks[n // 2] / 1000])
                rm = {str(r): {"rowId": r, "offset": offset, "elementNum": n, "saveType": 0}
                      for r in range(sr, er)}
                parts[str(p)] = part_meta(p, sr, er, 0, n, fname, offset, length, rm)
                offset += length
    write_meta(d, name, "RowIdColIdValueTextRowFormat", 0, n, n, block, n, parts)
    json.dump(samples, open(os.path.join(out, name + ".samples.json"), "w"))


def _decimal(k):
    s = f"{abs(k) // 1000}.{abs(k) % 1000:03d}".rstrip("0").rstrip(".")
    return ("-" if k < 0 else "") + s


def main(argv):
    out, kind = argv[1], argv[2]
    os.makedirs(out, exist_ok=True)
    if kind == "lr" or kind == "lrbin":
        lr(out, int(argv[3]), int(argv[4]) if len(argv) > 4 else 8, kind == "lrbin")
    elif kind == "emb":
        emb(out, int(argv[3]), int(argv[4]) if len(argv) > 4 else 16,
            int(argv[5]) if len(argv) > 5 else 8, len(argv) > 6 and argv[6] == "next")
    elif kind == "fc":
        fc(out, int(argv[3]), int(argv[4]) if len(argv) > 4 else 4)
    else:
        dense(out, int(argv[2]), int(argv[3]), int(argv[4]))


if __name__ == "__main__":
    main(sys.argv)
