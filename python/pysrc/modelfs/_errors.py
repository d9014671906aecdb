"""The exceptions of modelfs, defined in Python so that they are `modelfs.ChecksumError` in a
traceback and cross process boundaries: `pickle` rebuilds each by reference, with its message
and its fields, so a `ProcessPoolExecutor` or a Dask worker hands its caller the error the
reader raised, not a `PicklingError`. The native module raises these same classes."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional


def _rebuild(cls: type, message: str, fields: Dict[str, Any]) -> "ModelfsError":
    return cls(message, **fields)


class ModelfsError(Exception):
    """Any error of modelfs. `message` is what the `modelfs` command prints for it."""

    def __init__(self, message: str = "", **fields: Any) -> None:
        """`message` as `str(e)`; each keyword in `fields` becomes an attribute (`tensor`,
        `path`, …) and is kept when the error is pickled."""
        super().__init__(message)
        self.message = message
        self._fields = dict(fields)
        for key, value in fields.items():
            setattr(self, key, value)

    def __reduce__(self):
        return (_rebuild, (type(self), self.message, self._fields))

    def __str__(self) -> str:
        return self.message


class UsageError(ModelfsError, ValueError):
    """An option or argument modelfs refuses."""


class UnavailableError(ModelfsError):
    """The tensor has no form asked for (strings as numbers, a dtype numpy lacks)."""


class SourceError(ModelfsError):
    """The source could not be read (unrecognised, damaged, a fault, changed)."""


class SourceNotFoundError(SourceError, FileNotFoundError):
    """No file, key or checkpoint prefix of that name: also a `FileNotFoundError`, as numpy,
    safetensors and torch raise for a missing file."""

    def __init__(self, message: str = "", **fields: Any) -> None:
        """As `ModelfsError`'s; `filename` (`FileNotFoundError`'s) is the `path` field."""
        ModelfsError.__init__(self, message, **fields)
        self.filename = fields.get("path")


class ChecksumError(SourceError):
    """Stored bytes whose checksum does not match. `tensor`: the name read; `path`: the data
    file, where the reader names it; `expected`/`actual`: the stored checksum and the one of
    the bytes read, where the format says them (TensorFlow's masked CRC-32C), else None."""

    tensor: Optional[str]
    path: Optional[str]
    expected: Optional[int]
    actual: Optional[int]


for _cls in (ModelfsError, UsageError, UnavailableError, SourceError, SourceNotFoundError,
             ChecksumError):
    _cls.__module__ = "modelfs"

_CRCS = re.compile(r"stored (0x[0-9a-fA-F]+), read (0x[0-9a-fA-F]+)")
_DATA_FILE = re.compile(r"\(data file ([^)]+)\)")


def _raise(kind: str, message: str, name: Optional[str], source: str) -> Exception:
    """The exception the native module raises for an error of `kind` (`modelfs::api`'s
    `ErrorKind`), met reading `name` (None: opening) of `source`."""
    if kind == "usage":
        return UsageError(message)
    if kind == "not_found":
        return KeyError(message)
    if kind == "unavailable":
        return UnavailableError(message, tensor=name)
    if kind == "missing":
        return SourceNotFoundError(message, path=source)
    if kind == "checksum":
        crcs = _CRCS.search(message)
        data = _DATA_FILE.search(message)
        return ChecksumError(
            message,
            tensor=name,
            path=data.group(1) if data else source,
            expected=int(crcs.group(1), 16) if crcs else None,
            actual=int(crcs.group(2), 16) if crcs else None,
        )
    if kind == "interrupted":
        return KeyboardInterrupt(message)
    return SourceError(message, tensor=name, path=source)
