"""Spark (issue 72): every tensor and table of a model as a DataFrame, read by the executors
through PySpark's Python Data Source API (PySpark >= 4), in Arrow batches; no FUSE, nothing
gathered on the driver (it holds the plan: the pieces' names and ranges).

    import modelfs.spark
    modelfs.spark.register(spark)
    spark.read.format("modelfs").load("hdfs://nn/angel/model")                  # the catalog
    spark.read.format("modelfs").option("tensor", "emb").load("s3://b/ckpt")    # the rows

The catalog has one row per tensor (`name, dtype, shape, bytes, format, role, problem`). A
table (TF hash tables, TFRA, Monolith, DeepRec EVs, Angel matrices with row ids) is
`(id bigint, vec array<…>)`; a dense tensor `(row bigint, vec array<…>)`, one of one dimension
`(row, value)`; `option("columns", "wide")` gives `v0 … vN-1` for `vec`. A partition is a piece
(`Model.table_pieces`, `Model.pieces`) of about `option("piece_bytes", …)` (64 MiB), each read by
`modelfs.open` on its executor (the wheel installed there). Other options are `modelfs.open`'s
(`verify`, `cache_dir`, `endpoint`, `hdfs`, …); credentials come from the executors'
environment.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from . import PIECE_BYTES, Model, _reopen

# The reader's own options; every other one is `modelfs.open`'s.
_OWN = ("path", "tensor", "columns", "piece_bytes")


def register(spark: Any) -> None:
    """Makes `spark.read.format("modelfs")` this source."""
    spark.dataSource.register(ModelfsDataSource)


def _split(options: Dict[str, str]) -> tuple:
    opts = {k.lower(): v for k, v in options.items()}
    source = opts.get("path")
    if not source:
        raise ValueError("modelfs: no model named (spark.read.format('modelfs').load(SOURCE))")
    # Spark's option values are strings: a flag's "true"/"false" is the flag on or off.
    flags = {"true": True, "false": False}
    model_opts = {k: flags.get(v.lower(), v) if isinstance(v, str) else v
                  for k, v in opts.items() if k not in _OWN}
    return source, opts.get("tensor"), opts.get("columns", "vec"), model_opts, opts


def _model(source: str, options: Dict[str, Any]) -> Model:
    # One open model per process and model (executors' Python workers are reused).
    from . import _absolute, _options
    return _reopen(_absolute(source), _options(options))


class ModelfsDataSource(DataSource):
    """`spark.read.format("modelfs")` (see the module's help)."""

    @classmethod
    def name(cls) -> str:
        """`"modelfs"`: the name `spark.read.format` takes."""
        return "modelfs"

    def schema(self) -> Any:
        """The DataFrame's schema: the catalog's, or that of option `tensor`'s rows (`id` or
        `row`, then `vec` or, with `columns="wide"`, `v0 … vN-1`). Opens the model on the
        driver to learn it."""
        from pyspark.sql.pandas.types import from_arrow_schema

        from . import _arrow
        source, tensor, columns, model_opts, _ = _split(self.options)
        m = _model(source, model_opts)
        got = _arrow.CATALOG if tensor is None else _arrow.schema(m, tensor, columns)
        return from_arrow_schema(got)

    def reader(self, schema: Any) -> "DataSourceReader":
        """The reader whose partitions are the tensor's pieces (one for the catalog)."""
        return _Reader(dict(self.options))


class _Piece(InputPartition):
    def __init__(self, piece: Any) -> None:
        super().__init__(piece)
        self.piece = piece


class _Reader(DataSourceReader):
    def __init__(self, options: Dict[str, str]) -> None:
        self.source, self.tensor, self.columns, self.model_opts, opts = _split(options)
        self.piece_bytes = int(opts.get("piece_bytes", PIECE_BYTES))

    def partitions(self) -> List[InputPartition]:
        if self.tensor is None:
            return [_Piece(None)]
        from . import _arrow
        m = _model(self.source, self.model_opts)
        return [_Piece(p) for p in _arrow.pieces(m, self.tensor, self.piece_bytes)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        from . import _arrow
        m = _model(self.source, self.model_opts)
        piece: Optional[Any] = partition.piece  # type: ignore[attr-defined]
        if piece is None:
            yield _arrow.catalog(m)
        else:
            yield from _arrow.batches(m, piece, self.columns)
