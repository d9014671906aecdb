import contextlib
import os
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

_Source = Union[str, "os.PathLike[str]"]

PIECE_BYTES: int

class ModelfsError(Exception):
    """Any error of modelfs; the message is the one the `modelfs` command prints."""

class SourceError(ModelfsError):
    """The source could not be read (missing, unrecognised, a fault, changed)."""

class ChecksumError(SourceError):
    """Stored bytes whose checksum does not match."""

class UnavailableError(ModelfsError):
    """The tensor has no form asked for (strings as numbers, a dtype numpy lacks)."""

class UsageError(ModelfsError):
    """An option or argument modelfs refuses."""

class Piece(NamedTuple):
    """Rows `start:stop` of tensor `name`."""

    name: str
    start: int
    stop: int

class _Slicer:
    def __getitem__(self, key: Any) -> np.ndarray: ...

class Model:
    source: str
    options: Dict[str, Any]
    def __init__(self, source: _Source, **options: Any) -> None: ...
    def keys(self) -> List[str]: ...
    def __iter__(self) -> Iterator[str]: ...
    def __len__(self) -> int: ...
    def __contains__(self, name: object) -> bool: ...
    def info(self, name: str) -> Dict[str, Any]: ...
    def __getitem__(self, name: str) -> np.ndarray: ...
    def map(self, name: str) -> np.ndarray: ...
    def slice(self, name: str) -> _Slicer: ...
    def rows(self, name: str, ids: Sequence[int]) -> Tuple[np.ndarray, np.ndarray]: ...
    def pieces(self, name: str, max_bytes: int = ...) -> List[Piece]: ...
    def read_piece(self, piece: Piece) -> np.ndarray: ...

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
