"""Ray Data (issue 72): a model's tensor or table as a `ray.data.Dataset` whose read tasks are
its pieces (`Model.table_pieces`, `Model.pieces`), each read by `modelfs.open` in the task's
worker, as Arrow blocks of the same schema as Spark's (`modelfs.spark`).

    import modelfs.ray
    ds = modelfs.ray.read("s3://bucket/ckpt", "user_table")      # (id, vec)
    ds.count(); ds.map_batches(...)
    modelfs.ray.read("hdfs://nn/angel/model")                    # the catalog

Options are `modelfs.open`'s (`verify`, `cache_dir`, `endpoint`, …); `columns="wide"` gives
`v0 … vN-1` for `vec`; `piece_bytes` sizes the tasks (64 MiB).
"""

from __future__ import annotations

import inspect
from typing import Any, List, Optional

from ray.data import Dataset, read_datasource
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from . import PIECE_BYTES, _absolute, _options, _reopen


def read(source: str, tensor: Optional[str] = None, columns: str = "vec",
         piece_bytes: int = PIECE_BYTES, **options: Any) -> Dataset:
    """Tensor or table `tensor` of `source` (a path or a URL) as a Dataset of its rows; with
    no `tensor`, the model's catalog (one row per tensor)."""
    return read_datasource(ModelfsDatasource(source, tensor, columns, piece_bytes, **options))


def _keywords(cls: Any, **given: Any) -> dict:
    """The keyword arguments among `given` that `cls` takes (Ray's signatures move)."""
    params = inspect.signature(cls).parameters
    return {k: v for k, v in given.items() if k in params}


class ModelfsDatasource(Datasource):
    """The read tasks of one tensor's pieces (or the catalog's one task)."""

    def __init__(self, source: str, tensor: Optional[str] = None, columns: str = "vec",
                 piece_bytes: int = PIECE_BYTES, **options: Any) -> None:
        """`read`'s arguments; nothing is opened until Ray asks for the read tasks."""
        self._source = _absolute(str(source))
        self._options = _options(options)
        self._tensor = tensor.strip("/") if tensor else None
        self._columns = columns
        self._piece_bytes = piece_bytes

    def _model(self):
        return _reopen(self._source, self._options)

    def get_name(self) -> str:
        """`"modelfs"`: the name Ray shows for the read stage."""
        return "modelfs"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        """None: not estimated (Ray then plans without a size)."""
        return None

    def get_read_tasks(self, parallelism: int, **_: Any) -> List[ReadTask]:
        """One task per piece of the tensor (`piece_bytes` each; `parallelism` is not used),
        or one for the catalog; each task opens the model in its worker and yields Arrow
        tables."""
        from . import _arrow
        m = self._model()
        source, options, columns = self._source, self._options, self._columns
        if self._tensor is None:
            pieces: List[Any] = [None]
            schema = _arrow.CATALOG
        else:
            pieces = _arrow.pieces(m, self._tensor, self._piece_bytes)
            schema = _arrow.schema(m, self._tensor, columns)

        def task(piece: Any) -> ReadTask:
            def read_fn():
                import pyarrow as pa
                model = _reopen(source, options)
                if piece is None:
                    yield pa.Table.from_batches([_arrow.catalog(model)])
                    return
                for got in _arrow.batches(model, piece, columns):
                    yield pa.Table.from_batches([got])
            rows = None if piece is None else getattr(piece, "stop", 0) - \
                getattr(piece, "start", getattr(piece, "first", 0))
            meta = BlockMetadata(**_keywords(
                BlockMetadata, num_rows=rows if piece is not None and
                hasattr(piece, "start") else None, size_bytes=None, exec_stats=None,
                input_files=None, schema=schema))
            return ReadTask(read_fn, meta, **_keywords(ReadTask, schema=schema))
        return [task(p) for p in pieces]
