"""Dask (issue 72): a tensor or a table as a lazy `dask.array`, one chunk per `Model.pieces`
piece, each read by whichever worker Dask gives it (the model travels pickled: its source and
options; each worker opens its own). Nothing is read until the array is computed.

    import modelfs.dask
    w = modelfs.dask.array("s3://bucket/ckpt", "dense/kernel")      # chunks of ~64 MiB of rows
    w.sum().compute()
"""

from typing import Any, Union

import numpy as np

import dask
import dask.array as da

from . import PIECE_BYTES, Model, Piece
from . import open as _open


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
