import contextlib
import os
from collections.abc import Mapping
from typing import (
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

import numpy as np
import numpy.typing as npt

__version__: str

_Source = Union[str, "os.PathLike[str]"]

PIECE_BYTES: int

class ModelfsError(Exception):
    """Any error of modelfs; the message is the one the `modelfs` command prints."""

    message: str
    def __init__(self, message: str = ..., **fields: Any) -> None: ...

class SourceError(ModelfsError):
    """The source could not be read (unrecognised, damaged, a fault, changed)."""

class SourceNotFoundError(SourceError, FileNotFoundError):
    """No file, key or checkpoint prefix of that name."""

class ChecksumError(SourceError):
    """Stored bytes whose checksum does not match."""

    tensor: Optional[str]
    path: Optional[str]
    expected: Optional[int]
    actual: Optional[int]

class UnavailableError(ModelfsError):
    """The tensor has no form asked for (a dtype numpy lacks, rows of an unkeyed tensor)."""

class UsageError(ModelfsError, ValueError):
    """An option or argument modelfs refuses."""

class Piece(NamedTuple):
    """Rows `start:stop` of tensor `name`."""

    name: str
    start: int
    stop: int

class TablePiece(NamedTuple):
    """Scan pieces `first:stop` of part `part` of the stored rows of table `name`."""

    name: str
    part: int
    first: int
    stop: int

class _Slicer:
    def __getitem__(self, key: Any) -> np.ndarray: ...

class Model(Mapping[str, np.ndarray]):
    source: str
    options: Dict[str, Any]
    def __init__(self, source: _Source, **options: Any) -> None: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def __enter__(self) -> "Model": ...
    def __exit__(self, *exc: Any) -> None: ...
    def keys(self, dtype: Any = ...) -> List[str]: ...  # type: ignore[override]
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def __contains__(self, name: object) -> bool: ...
    def _ipython_key_completions_(self) -> List[str]: ...
    def tables(self) -> List[str]: ...
    def info(self, name: str) -> Dict[str, Any]: ...
    @property
    def metadata(self) -> Dict[str, Any]: ...
    def __getitem__(self, name: str) -> np.ndarray: ...
    def raw(self, name: str) -> bytes: ...
    def map(self, name: str) -> np.ndarray: ...
    def slice(self, name: str) -> _Slicer: ...
    def rows(
        self, name: str, ids: Union[Iterable[int], npt.NDArray[np.integer[Any]]]
    ) -> Tuple[np.ndarray, np.ndarray]: ...
    def ids(self, name: str) -> np.ndarray: ...
    def table(self, name: str) -> Tuple[np.ndarray, np.ndarray]: ...
    def pieces(self, name: str, max_bytes: int = ...) -> List[Piece]: ...
    def read_piece(self, piece: Piece) -> np.ndarray: ...
    def table_pieces(self, name: str, max_bytes: int = ...) -> List[TablePiece]: ...
    def table_layout(self, name: str) -> Tuple[np.dtype, int, Optional[int]]: ...
    def read_table_piece(self, piece: TablePiece) -> Tuple[np.ndarray, np.ndarray]: ...
    def iter_table_piece(self, piece: TablePiece) -> Iterator[Tuple[np.ndarray, np.ndarray]]: ...

def open(source: _Source, **options: Any) -> Model: ...
def stats(source: _Source, *paths: str, **options: Any) -> List[Dict[str, Any]]: ...
def diff(
    a: _Source,
    b: _Source,
    map: Union[str, Sequence[str]] = ...,
    transpose: bool = ...,
    **options: Any,
) -> List[Dict[str, Any]]: ...
def diff_rows(a: _Source, b: _Source, *tables: str, **options: Any) -> List[Dict[str, Any]]: ...
def check(
    source: _Source, *paths: str, max_abs: Optional[float] = ..., **options: Any
) -> Dict[str, Any]: ...
def verify(source: _Source, **options: Any) -> Dict[str, Any]: ...
def mount(
    source: _Source, path: Optional[str] = ..., timeout: float = ..., **options: Any
) -> contextlib.AbstractContextManager[str]: ...
