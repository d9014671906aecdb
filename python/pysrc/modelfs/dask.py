"""Dask (issue 72): a tensor or a table as a lazy `dask.array`, one chunk per `Model.pieces`
piece, each read by whichever worker Dask gives it (the model travels pickled: its source and
options; each worker opens its own). Nothing is read until the array is computed.

    import modelfs.dask
    w = modelfs.dask.array("s3://bucket/ckpt", "dense/kernel")      # chunks of ~64 MiB of rows
    w.sum().compute()
    t = modelfs.dask.dataframe("s3://bucket/ckpt", "user_table")    # (id, vec), a partition a piece
    t.id.nunique().compute()

`dataframe` has Spark's schema (`modelfs.spark`): a table's `(id, vec)` in stored order, a dense
tensor's `(row, vec)` or `(row, value)`, `columns="wide"` for `v0 … vN-1`, no tensor: the
catalog; `vec` is a pandas column of Arrow lists (`pd.ArrowDtype`).
"""

from typing import Any, Optional, Union

import numpy as np

import dask
import dask.array as da

from . import PIECE_BYTES, Model, Piece
from . import open as _open
from . import _absolute, _options, _reopen


def _read(model: Model, piece: Piece) -> np.ndarray:
    return model.read_piece(piece)


def array(source: Union[str, Model], name: str, max_bytes: int = PIECE_BYTES,
          **options: Any) -> da.Array:
    """Tensor (or hash table) `name` of `source` (a path, a URL or an opened `Model`) as a lazy
    dask array: its chunks are runs of whole rows, `model.pieces(name, max_bytes)`."""
    m = source if isinstance(source, Model) else _open(source, **options)
    if m._is_table(name):
        _, _, dtype, rows, width = m._table_data(name.strip("/"))
        shape: tuple = (rows, width)
    else:
        _, _, shape, _, dtype = m._layout(name)
        shape = tuple(shape)
    if not shape:
        return da.from_delayed(dask.delayed(m.__getitem__)(name), shape=(), dtype=dtype)
    chunks = [
        da.from_delayed(dask.delayed(_read)(m, p), shape=(p.stop - p.start,) + shape[1:],
                        dtype=dtype)
        for p in m.pieces(name, max_bytes)
    ]
    return chunks[0] if len(chunks) == 1 else da.concatenate(chunks, axis=0)


def _frame(piece: Any, model: Model, shape: str) -> Any:
    import pandas as pd

    from . import _arrow
    # (Not `columns`: dask hands a function with that parameter its column projection.)
    got = _arrow.catalog(model) if piece is None else _arrow.batch(model, piece, shape)
    return got.to_pandas(types_mapper=pd.ArrowDtype)


def dataframe(source: Union[str, Model], name: Optional[str] = None, columns: str = "vec",
              max_bytes: int = PIECE_BYTES, **options: Any) -> Any:
    """Table or tensor `name` of `source` (a path, a URL or an opened `Model`) as a lazy dask
    DataFrame, a partition per piece (`Model.table_pieces`, `Model.pieces`); with no `name`,
    the model's catalog."""
    import dask.dataframe as dd
    import pandas as pd

    from . import _arrow
    m = source if isinstance(source, Model) else _reopen(_absolute(str(source)),
                                                         _options(options))
    if name is None:
        pieces: list = [None]
        schema = _arrow.CATALOG
    else:
        pieces = _arrow.pieces(m, name.strip("/"), max_bytes)
        schema = _arrow.schema(m, name.strip("/"), columns)
    meta = schema.empty_table().to_pandas(types_mapper=pd.ArrowDtype)
    return dd.from_map(_frame, pieces, args=(m, columns), meta=meta, enforce_metadata=False,
                       label="modelfs")
