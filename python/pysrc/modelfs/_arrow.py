"""A model's tensors and tables as Arrow record batches: the one shape Spark, Ray and Dask get
(`modelfs.spark`, `modelfs.ray`, `modelfs.dask`), so the three engines read the same rows.

- The catalog: one row per tensor — `name, dtype, shape, bytes, format, role, problem` — from
  each tensor's `NAME.json` (no tensor data read).
- A table (a keyed tensor or hash table: TF hash tables, TFRA, Monolith, DeepRec EVs, Angel
  matrices with row ids): `(id bigint, vec array<…>)`, its stored rows in stored order, empty
  buckets never rows; its pieces are `Model.table_pieces`.
- A dense tensor: `(row bigint, vec array<…>)`, its trailing dimensions flattened; one of one
  dimension `(row bigint, value …)`; a scalar one row. Its pieces are `Model.pieces`.
- `columns="wide"`: `v0 … vN-1` columns instead of `vec`.

Element types Spark has no such type for are widened exactly: float16 and bfloat16 to float,
unsigned integers to the next signed width (uint64 to decimal(20, 0)).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, NamedTuple, Tuple, Union

import numpy as np
import pyarrow as pa

from . import PIECE_BYTES, Model, ModelfsError, Piece, TablePiece, UnavailableError

CATALOG = pa.schema([
    ("name", pa.string()), ("dtype", pa.string()), ("shape", pa.list_(pa.int64())),
    ("bytes", pa.int64()), ("format", pa.string()), ("role", pa.string()),
    ("problem", pa.string()),
])

# Widened where Spark has no such type; exact either way.
_WIDER = {"e": np.float32, "B": np.int16, "H": np.int32, "I": np.int64}


def _arrow_values(values: np.ndarray) -> Tuple[np.ndarray, pa.DataType]:
    """`values` as a numpy array Arrow takes and Spark reads, and its Arrow type."""
    if values.dtype.name == "bfloat16":
        # The high half of a float32: exact.
        wide = values.view(np.uint16).astype(np.uint32) << 16
        values = wide.view(np.float32)
    elif values.dtype.char in _WIDER:
        values = values.astype(_WIDER[values.dtype.char])
    elif values.dtype == np.uint64:
        import decimal
        objs = np.array([decimal.Decimal(int(v)) for v in values.ravel()], dtype=object)
        return objs.reshape(values.shape), pa.decimal128(20, 0)
    elif values.dtype.kind not in "fiub":
        raise UnavailableError(f"{values.dtype} elements have no Arrow column type here")
    return values, pa.from_numpy_dtype(values.dtype)


def _value_type(dtype: np.dtype) -> pa.DataType:
    return _arrow_values(np.zeros(0, dtype=dtype))[1]


class Shape(NamedTuple):
    """How a tensor is read as rows: a table (`id`) or dense (`row`), elements per row
    (0: one value a row), the elements' numpy type."""

    keyed: bool
    width: int
    dtype: np.dtype
    scalar: bool = False


def shape_of(m: Model, name: str) -> Shape:
    if m._by_id(name):
        dtype, width, _ = m.table_layout(name)
        return Shape(True, width, dtype)
    _, _, shape, _, dtype = m._layout(name)
    if dtype.kind in "OSUV" and dtype.name != "bfloat16":
        raise UnavailableError(f"{name}: {dtype} elements are not rows of numbers")
    if not shape:
        return Shape(False, 0, dtype, scalar=True)
    width = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 0
    return Shape(False, width, dtype)


def schema(m: Model, name: str, columns: str = "vec") -> pa.Schema:
    """The Arrow schema of tensor `name`'s rows (see the module's help)."""
    s = shape_of(m, name)
    key = "id" if s.keyed else "row"
    value = _value_type(s.dtype)
    if s.width == 0 and not s.keyed:
        return pa.schema([(key, pa.int64()), ("value", value)])
    if columns == "wide":
        return pa.schema([(key, pa.int64())] + [(f"v{j}", value) for j in range(s.width)])
    if columns != "vec":
        raise ValueError(f"columns={columns!r}: 'vec' or 'wide'")
    return pa.schema([(key, pa.int64()), ("vec", pa.list_(value))])


AnyPiece = Union[Piece, TablePiece]


def pieces(m: Model, name: str, max_bytes: int = PIECE_BYTES) -> List[AnyPiece]:
    """Tensor `name`'s independent pieces, each a task's: a table's runs of stored rows, a
    dense tensor's runs of rows."""
    if shape_of(m, name).keyed:
        return list(m.table_pieces(name, max_bytes))
    return list(m.pieces(name, max_bytes))


def describe(piece: AnyPiece) -> str:
    if isinstance(piece, TablePiece):
        stop = "" if piece.stop < 0 else piece.stop
        return (f"{piece.name}, part {piece.part}, pieces {piece.first}..{stop} of its stored "
                "rows")
    return f"{piece.name}, rows {piece.start}..{piece.stop}"


def batches(m: Model, piece: AnyPiece, columns: str = "vec") -> Iterator[pa.RecordBatch]:
    """The rows of `piece` as record batches of `schema(m, piece.name, columns)`, a few MiB
    each (a task holds one at a time). An error says the model, the tensor, the piece and
    the cause, as the same class (`ChecksumError` stays one across processes)."""
    want = schema(m, piece.name, columns)
    try:
        if isinstance(piece, TablePiece):
            for keys, values in m.iter_table_piece(piece):
                yield _to_batch(want, keys, values)
        else:
            values = m.read_piece(piece)
            values = np.asarray(values).reshape(1, -1) if values.ndim == 0 else values
            keys = np.arange(piece.start, piece.start + len(values), dtype=np.int64)
            yield _to_batch(want, keys, values)
    except ModelfsError as e:
        e.message = f"{m.source}: {describe(piece)}: {e.message}"
        e.args = (e.message,)
        e._fields["piece"] = tuple(piece)
        e.piece = tuple(piece)  # type: ignore[attr-defined]
        raise


def batch(m: Model, piece: AnyPiece, columns: str = "vec") -> pa.RecordBatch:
    """The rows of `piece` as one record batch (`batches`, joined)."""
    got = list(batches(m, piece, columns))
    if len(got) == 1:
        return got[0]
    want = schema(m, piece.name, columns)
    if not got:
        return pa.RecordBatch.from_pylist([], schema=want)
    return pa.Table.from_batches(got, schema=want).combine_chunks().to_batches()[0]


def _to_batch(want: pa.Schema, keys: np.ndarray, values: np.ndarray) -> pa.RecordBatch:
    n = len(keys)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=want)
    values, _ = _arrow_values(np.ascontiguousarray(values).reshape(n, -1))
    cols: List[pa.Array] = [pa.array(keys, type=pa.int64())]
    if want.names[1] == "value":
        cols.append(pa.array(values.reshape(n), type=want.field(1).type))
    elif want.names[1] == "vec":
        width = values.shape[1]
        offsets = pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int64)
                           if width else np.zeros(n + 1, dtype=np.int64))
        flat = pa.array(values.reshape(-1), type=want.field(1).type.value_type)
        # int64 offsets (a batch may hold 2^31 elements), cast to Spark's list type.
        cols.append(pa.LargeListArray.from_arrays(offsets, flat).cast(want.field(1).type))
    else:
        for j in range(len(want.names) - 1):
            cols.append(pa.array(values[:, j], type=want.field(j + 1).type))
    return pa.RecordBatch.from_arrays(cols, schema=want)


def catalog_rows(m: Model) -> List[Dict[str, Any]]:
    """One row per tensor and table, from its `.json` and listing alone (no data read):
    `bytes` are its stored bytes (its `.bin`), `role` a table (rows by id), a (sparse) matrix
    or a tensor, `problem` what the mount says is wrong with it."""
    tables = set(m.tables())
    out = []
    for name in sorted(set(m.keys()) | tables):
        row: Dict[str, Any] = {"name": name}
        try:
            doc = m.info(name)
        except ModelfsError as e:
            out.append({**row, "problem": str(e)})
            continue
        files = {lay.get("layout") for lay in doc.get("layouts") or []}
        if "sparse" in doc:
            role = "matrix"
        elif name in tables or "rows" in files or m._m.exists(f"{name}.rows"):
            role = "table"
        else:
            role = "tensor"
        try:
            stored = int(m._m.raw_size(name))
        except (ModelfsError, KeyError):
            stored = None
        problem = doc.get("problem") or doc.get("last_error")
        out.append({
            **row,
            "dtype": doc.get("dtype"),
            "shape": [int(d) for d in doc.get("shape") or []],
            "bytes": stored,
            "format": doc.get("format"),
            "role": role,
            "problem": problem if problem is None or isinstance(problem, str)
            else json.dumps(problem),
        })
    return out


def catalog(m: Model) -> pa.RecordBatch:
    rows = catalog_rows(m)
    return pa.RecordBatch.from_pylist(rows, schema=CATALOG)
