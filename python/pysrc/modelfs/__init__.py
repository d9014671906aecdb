"""modelfs: model artefacts as numpy arrays, read lazily, and as a read-only file system.

Everything modelfs mounts opens here without FUSE: a TensorFlow checkpoint (V2 or V1), a
SavedModel or graph, an Angel model directory, recommendation hash tables (Monolith, TF hash
tables, TFRA, DeepRec EVs), safetensors, PyTorch, numpy and GGUF files — on local disk, S3,
GCS, Azure or HTTP::

    import modelfs
    m = modelfs.open("s3://bucket/run/ckpt-1000")
    m.keys()                        # every tensor, by its path in the mount
    w = m["dense/kernel"]           # numpy array: exactly the mount's dense/kernel.npy
    v = m.map("dense/kernel")       # the same, read-only, over the mapped file (no copy)
    top = m.slice("emb")[0:1000]    # reads only those rows
    ids, rows = m.rows("user_table", [17, 42])   # rows by feature id

Options are the mount's `-o` options as keyword arguments (`verify="none"`,
`cache_dir="none"`, `endpoint="http://…"`, `anonymous=True`). Reads release the GIL; a model
may be used from several threads, and pickles as its source and options (each process that
unpickles it opens its own), so Dask, Ray or Spark workers can read its `pieces` in parallel.

`stats`, `diff`, `diff_rows` and `check` return what the `modelfs` command prints with
`--json` (they run it: one implementation of each answer); `mount` mounts for code that
wants paths.
"""

from __future__ import annotations

import collections.abc as _abc
import contextlib as _contextlib
import io as _io
import json as _json
import os as _os
import shutil as _shutil
import subprocess as _subprocess
import sysconfig as _sysconfig
import tempfile as _tempfile
import time as _time
import zipfile as _zipfile
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as _np

from . import _native
from ._errors import (
    ChecksumError,
    ModelfsError,
    SourceError,
    SourceNotFoundError,
    UnavailableError,
    UsageError,
)

#: The crate version and the git commit the extension is built from (``0.1.0+g1a2b3c4d5e6f``,
#: PEP 440's local form), as ``modelfs --version`` says it.
__version__: str = _native.__version__

__all__ = [
    "open",
    "Model",
    "Piece",
    "TablePiece",
    "stats",
    "diff",
    "diff_rows",
    "check",
    "verify",
    "mount",
    "ModelfsError",
    "SourceError",
    "SourceNotFoundError",
    "ChecksumError",
    "UnavailableError",
    "UsageError",
    "__version__",
]

# Bytes of rows one piece covers by default: large enough that a task's overhead is small,
# small enough that a worker holds little.
PIECE_BYTES = 64 << 20

# What `False`/`None` means for an option that has an "off" value (the mount's `-o` forms:
# `cache_dir=DIR|none`, `verify=crc|none`, `refresh=SECS|never`); the flags (`anonymous`,
# `debug`, …) are off when left out. Any other option given `False` or `None` is refused:
# dropping it silently would apply the default the caller meant to turn off.
_OFF = {"cache_dir": "none", "verify": "none", "refresh": "never"}
_FLAGS = {"allow_other", "allow_root", "auto_unmount", "debug", "anonymous", "hdfs"}


def _options(options: Dict[str, Any]) -> Dict[str, Any]:
    """Keyword options as applied: `False`/`None` made the option's "off" value, lists and
    tuples joined with `,`, paths made absolute; what `Model.options` shows."""
    out: Dict[str, Any] = {}
    for key, value in options.items():
        if value is False or value is None:
            if key in _OFF:
                out[key] = _OFF[key]
            elif key in _FLAGS:
                continue
            else:
                raise UsageError(f"{key}={value!r}: {key} has no off value; leave it out for "
                                 "its default")
        elif value is True:
            if key in _OFF and key != "refresh":
                raise UsageError(f"{key}=True: give {key} a value (its default is on)")
            out[key] = True
        elif isinstance(value, (list, tuple, set, frozenset)):
            out[key] = ",".join(str(v) for v in value)
        elif isinstance(value, _os.PathLike):
            out[key] = _os.fspath(value)
        else:
            out[key] = value
    if isinstance(out.get("cache_dir"), str) and out["cache_dir"] != "none":
        # A pickled model is opened again by a worker whose working directory is not ours.
        out["cache_dir"] = _os.path.abspath(out["cache_dir"])
    return out


def _option_args(options: Dict[str, Any]) -> List[str]:
    """Options (as `_options` made them) as `-o` strings: `True` a bare flag."""
    out = []
    for key, value in _options(options).items():
        out.append(key if value is True else f"{key}={value}")
    return out


def _parse_npy_header(header: bytes) -> Tuple[Tuple[int, ...], bool, _np.dtype]:
    fp = _io.BytesIO(header)
    version = _np.lib.format.read_magic(fp)
    if version == (1, 0):
        return _np.lib.format.read_array_header_1_0(fp)
    return _np.lib.format.read_array_header_2_0(fp)


class Piece(NamedTuple):
    """Rows `start:stop` of tensor `name`: a unit of work another process can read alone."""

    name: str
    start: int
    stop: int


class TablePiece(NamedTuple):
    """Scan pieces `first:stop` (`stop` -1: to the end) of part `part` of the stored rows of
    keyed tensor or hash table `name` (`Model.table_pieces`): a unit of work another process
    can read alone."""

    name: str
    part: int
    first: int
    stop: int


def _absolute(source: str) -> str:
    """A local path made absolute; a URL (`s3://…`, `https://…`) as given."""
    return source if "://" in source else _os.path.abspath(source)


# Models unpickled in this process, by source and options: an engine's worker reading many
# pieces of one model (each task's closure unpickled anew) opens it once.
_REOPENED: "collections.OrderedDict[Tuple[str, str], Model]" = None  # type: ignore[assignment]


def _reopen(source: str, options: Dict[str, Any]) -> "Model":
    global _REOPENED
    import collections
    if _REOPENED is None:
        _REOPENED = collections.OrderedDict()
    key = (source, _json.dumps(options, sort_keys=True, default=str))
    m = _REOPENED.get(key)
    if m is None or m.closed:
        m = Model(source, **options)
        _REOPENED[key] = m
        while len(_REOPENED) > 8:
            _REOPENED.popitem(last=False)
    _REOPENED.move_to_end(key)
    return m


class _MountFile(_io.RawIOBase):
    """A file of the mount read through the model (`zipfile` reads `NAME.csr.npz` with it)."""

    def __init__(self, native, path: str) -> None:
        self._m, self._path = native, path
        self._size = native.file_size(path)
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._at, 2: self._size}[whence]
        self._at = max(base + offset, 0)
        return self._at

    def tell(self) -> int:
        return self._at

    def readinto(self, b) -> int:
        n = max(min(len(b), self._size - self._at), 0)
        if n:
            view = _np.frombuffer(b, dtype=_np.uint8, count=n)
            self._m.read_file_into(self._path, self._at, view)
            self._at += n
        return n


def _npy_of(native, path: str) -> _np.ndarray:
    """The `.npy` file of the mount at `path` as an array."""
    with _io.BufferedReader(_MountFile(native, path), buffer_size=1 << 20) as f:
        return _np.lib.format.read_array(f, allow_pickle=False)


def _npy_rows(native, path: str) -> int:
    """The first dimension of the mount's `.npy` at `path`, from its header only."""
    with _io.BufferedReader(_MountFile(native, path), buffer_size=1 << 12) as f:
        version = _np.lib.format.read_magic(f)
        shape, _, _ = (_np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                       else _np.lib.format.read_array_header_2_0(f))
    return int(shape[0]) if shape else 0


class Model(_abc.Mapping):
    """A model opened from SOURCE (a path or a URL) with the mount's options: a read-only
    mapping of every tensor's mount path to its numpy array (`m[name]`, `m.get`, `m.items()`
    read lazily), whose other names (a hash table's, a document's) answer too."""

    def __init__(self, source: "os.PathLike[str] | str", **options: Any) -> None:
        """Opens SOURCE now (what `modelfs.open` does): its format is recognised and its index
        read, no tensor's data. Raises `SourceNotFoundError` if nothing is there,
        `SourceError` if it cannot be read, `UsageError` for an option modelfs refuses."""
        # Made absolute here, not only in the native open: a pickled model is opened again by
        # a worker whose working directory is not ours.
        self.source = _absolute(_os.fspath(source))
        self.options = _options(options)
        self._typed: Optional[Dict[str, str]] = None
        self._keys: Optional[List[str]] = None
        self._named: Dict[str, bool] = {}
        self._tables: Optional[List[str]] = None
        self._native_model = _native.Model(self.source, _option_args(self.options))

    # -- life ------------------------------------------------------------------------------

    @property
    def _m(self):
        m = self._native_model
        if m is None:
            raise ModelfsError(f"{self.source}: the model is closed")
        return m

    def close(self) -> None:
        """Lets go of the model's files (descriptors, mappings) now; any later call raises
        `ModelfsError`. Arrays already returned stay valid (`map`'s keep their mapping)."""
        self._native_model = None

    @property
    def closed(self) -> bool:
        """True once `close` has run (or the `with` block ended)."""
        return self._native_model is None

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __reduce__(self):
        return (_reopen, (self.source, self.options))

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self.options.items())
        closed = " (closed)" if self.closed else ""
        return f"modelfs.open({self.source!r}{opts}){closed}"

    # -- what is there ---------------------------------------------------------------------

    def _typed_keys(self) -> Dict[str, str]:
        if self._native_model is None:
            self._m  # raises: a closed model answers nothing, not its remembered keys
        if self._typed is None:
            self._typed = dict(self._m.keys())
            self._keys = list(self._typed)
        return self._typed

    def keys(self, dtype: Any = None) -> List[str]:  # type: ignore[override]
        """Every tensor's path in the mount, sorted (`modelfs list`'s first column); with
        `dtype` (a numpy dtype, `"string"`, or a stored form such as `"Q4_K"`) only those of
        that dtype."""
        typed = self._typed_keys()
        if dtype is None:
            return list(self._keys or [])
        want = dtype if isinstance(dtype, str) and not _is_numpy_dtype(dtype) else \
            _np.dtype(dtype).name
        if want == "bytes" or want == "object":
            want = "string"
        return [k for k, d in typed.items() if d == want]

    def __iter__(self) -> Iterator[str]:
        self._typed_keys()
        return iter(self._keys or [])

    def __len__(self) -> int:
        return len(self._typed_keys())

    def _ipython_key_completions_(self) -> List[str]:
        return self.keys()

    def __contains__(self, name: object) -> bool:
        """A listed tensor, or any name the mount answers by name: a hash table (`item_emb`,
        whose buckets are the listed tensors), a member's `latest/W`."""
        if not isinstance(name, str):
            return False
        name = name.strip("/")
        if name in self._typed_keys():
            return True
        known = self._named.get(name)
        if known is None:
            known = self._named[name] = bool(name) and self._m.exists(f"{name}.json")
        return known

    def tables(self) -> List[str]:
        """The hash tables whose buckets are listed as tensors of their own (a TF
        `MutableHashTable` or `DenseHashTable`): their names, for `table`, `ids`, `rows`."""
        if self._tables is None:
            self._tables = self._m.tables()
        return list(self._tables)

    def info(self, name: str) -> Dict[str, Any]:
        """The tensor's `NAME.json` (dtype, shape, partitions, problems, …), read no data."""
        return _json.loads(self._m.json(name))

    @property
    def metadata(self) -> Dict[str, Any]:
        """The model's own key/values: a GGUF's (architecture, context length, tokenizer,
        chat template…), a safetensors file's `__metadata__`, a torch file's plain values
        (epoch, config): the mount's `__metadata__.json` and `__values__.json`, merged."""
        out: Dict[str, Any] = {}
        for doc in ("__metadata__.json", "__values__.json"):
            if not self._m.exists(doc):
                continue
            size = self._m.file_size(doc)
            buf = _np.empty(size, dtype=_np.uint8)
            if size:
                self._m.read_file_into(doc, 0, buf)
            got = _json.loads(buf.tobytes())
            if doc == "__values__.json" and isinstance(got, dict):
                got = got.get("values", got)
            if isinstance(got, dict):
                out.update(got)
        return out

    # -- values ----------------------------------------------------------------------------

    def _layout(self, name: str):
        header, size = self._m.npy_header(name)
        shape, fortran, dtype = _parse_npy_header(header)
        return header, size, tuple(shape), fortran, dtype

    def __getitem__(self, name: str) -> _np.ndarray:
        """The tensor as a numpy array: the bytes of the mount's `NAME.npy`; a string tensor
        as an array of `bytes` objects (dtype object: each element exactly as stored, NUL
        bytes included), in the tensor's shape."""
        try:
            header, size, shape, fortran, dtype = self._layout(name)
        except (UnavailableError, KeyError):
            if self._is_table(name):
                return self._table_rows(name.strip("/"), 0, None)
            if self.info(name).get("dtype") != "string":
                raise
            return self._strings(name)
        data = size - len(header)
        buf = _np.empty(data, dtype=_np.uint8)
        if data:
            self._m.read_npy_into(name, len(header), buf)
        return buf.view(dtype).reshape(shape, order="F" if fortran else "C")

    def _strings(self, name: str) -> _np.ndarray:
        shape = tuple(self.info(name).get("shape", []))
        got = self._m.strings(name)
        out = _np.empty(len(got), dtype=object)
        out[:] = got
        return out.reshape(shape)

    def raw(self, name: str) -> bytes:
        """The tensor's stored bytes as the mount's `NAME.bin` gives them: a GGUF tensor's
        quantized blocks (IQ*, MXFP4 — to re-pack), an `F4` tensor's bytes, else its
        elements."""
        size = self._m.raw_size(name)
        buf = _np.empty(size, dtype=_np.uint8)
        if size:
            self._m.read_raw_into(name, 0, buf)
        return buf.tobytes()

    def map(self, name: str) -> _np.ndarray:
        """The tensor as a read-only numpy array over the mapped file, with no copy, where
        the stored bytes are the array's (a local file, stored as numpy holds it: TF
        checkpoints, safetensors, .npy, torch's zip), checked against the tensor's checksum
        first; elsewhere a read-only copy (`m[name]`). As with `np.load(mmap_mode="r")`, the
        pages are the page cache's, and a file cut short while the array lives faults."""
        header, size, shape, fortran, dtype = self._layout(name)
        lent = self._m.lend(name) if size > len(header) else None
        if lent is None:
            a = self[name]
            a.flags.writeable = False
            return a
        return _np.frombuffer(lent, dtype=dtype).reshape(shape, order="F" if fortran else "C")

    def slice(self, name: str) -> "_Slicer":
        """`m.slice(name)[a:b, ...]` reads only rows `a:b` (then indexes the rest; a step
        reads the rows between and keeps every n-th)."""
        return _Slicer(self, name)

    def _rows_of(self, name: str, start: int, stop: int) -> _np.ndarray:
        header, size, shape, fortran, dtype = self._layout(name)
        if fortran or not shape:
            return self[name][start:stop]
        start, stop, _ = slice(start, stop).indices(shape[0])
        stop = max(stop, start)
        row = int(_np.prod(shape[1:], dtype=_np.int64)) * dtype.itemsize
        buf = _np.empty((stop - start) * row, dtype=_np.uint8)
        if buf.size:
            self._m.read_npy_into(name, len(header) + start * row, buf)
        return buf.view(dtype).reshape((stop - start,) + shape[1:])

    def rows(self, name: str, ids: Iterable[int]) -> Tuple[_np.ndarray, _np.ndarray]:
        """The rows of keyed tensor `name` (an embedding, a hash table) with feature ids
        `ids` (any iterable of ints, a numpy integer array too), as `NAME.rows/ID.npy` gives
        each: `(found_ids, values)`, the ids found in the order asked and one row of
        `values` per found id."""
        # Feature ids are 64-bit patterns: an unsigned one (a Monolith id of 2^63 or more) is
        # the signed id the table stores and the mount names.
        if isinstance(ids, _np.ndarray) and ids.dtype.kind in "iu":
            asked = ids.astype(_np.uint64).view(_np.int64).ravel().tolist()
        else:
            asked = [int(i) - (1 << 64) if int(i) >= (1 << 63) else int(i) for i in ids]
        found, descr, width, values = self._m.rows(name, asked)
        found = _np.array(found, dtype=_np.int64)
        dtype = _np.dtype(descr) if descr else _np.dtype(_np.float32)
        arr = _np.frombuffer(bytearray(values), dtype=dtype)
        return found, arr.reshape(len(found), width)

    def ids(self, name: str) -> _np.ndarray:
        """Every id of hash table (or keyed tensor) `name`, ascending, sentinels never among
        them: the mount's `NAME.csr.ids.npy`."""
        return _npy_of(self._m, f"{name.strip('/')}.csr.ids.npy")

    def table(self, name: str) -> Tuple[_np.ndarray, _np.ndarray]:
        """Hash table (or keyed tensor) `name` whole: `(ids, values)`, ids ascending (as
        `ids`) and one row of values per id — the mount's `NAME.csr.ids.npy` and the `data`
        of its `NAME.csr.npz`. A big table is read by pieces: `pieces(name)` cuts its rows,
        `read_piece` reads one (`m[name]` is all its values)."""
        name = name.strip("/")
        if self._by_id(name):
            # Its stored rows read in pieces on every core and sorted here: the mount's CSR
            # view gathers them row by row in id order (and checksums its zip member first).
            pieces = self.table_pieces(name)
            if len(pieces) == 1:
                got = [self.read_table_piece(pieces[0])]
            else:
                import concurrent.futures as _futures
                with _futures.ThreadPoolExecutor(min(len(pieces), _os.cpu_count() or 1)) as ex:
                    got = list(ex.map(self.read_table_piece, pieces))
            got = [g for g in got if len(g[0])] or got[:1]
            ids = _np.concatenate([g[0] for g in got])
            order = _np.argsort(ids, kind="stable")
            ids = ids[order]
            # Ids are unique in any table modelfs reads whole; else the CSR view says how.
            if ids.size < 2 or bool(_np.all(ids[1:] != ids[:-1])):
                values = _np.concatenate([g[1] for g in got])
                return ids, values[order]
        return self.ids(name), self._table_rows(name, 0, None)

    def _is_table(self, name: str) -> bool:
        name = name.strip("/")
        return name not in self._typed_keys() and name in self.tables()

    def _table_data(self, name: str):
        """Where a table's values start in its `NAME.csr.npz` (its `data` member, stored):
        (file, offset, dtype, rows, width)."""
        path = f"{name}.csr.npz"
        raw = _io.BufferedReader(_MountFile(self._m, path), buffer_size=1 << 16)
        with _zipfile.ZipFile(raw) as z:
            member = z.getinfo("data.npy")
            if member.compress_type != _zipfile.ZIP_STORED:
                raise ModelfsError(f"{path}: data.npy is not stored")
            with z.open(member) as f:
                version = _np.lib.format.read_magic(f)
                shape, _, dtype = (_np.lib.format.read_array_header_1_0(f) if version == (1, 0)
                                   else _np.lib.format.read_array_header_2_0(f))
                in_member = f.tell()
            raw.seek(member.header_offset)
            local = raw.read(30)
            start = (member.header_offset + 30 + int.from_bytes(local[26:28], "little")
                     + int.from_bytes(local[28:30], "little"))
        # The row count from the ids file's header alone: a piece of a table of 10^9 ids
        # must not read its 8 GB of ids.
        n = _npy_rows(self._m, f"{name}.csr.ids.npy") if shape and shape[0] else 0
        width = (shape[0] // n) if n else 0
        return path, start + in_member, dtype, n, width

    def _table_rows(self, name: str, start: int, stop: Optional[int]) -> _np.ndarray:
        path, at, dtype, n, width = self._table_data(name)
        start, stop, _ = slice(start, stop).indices(n)
        stop = max(stop, start)
        buf = _np.empty((stop - start) * width * dtype.itemsize, dtype=_np.uint8)
        if buf.size:
            self._m.read_file_into(path, at + start * width * dtype.itemsize, buf)
        return buf.view(dtype).reshape(stop - start, width)

    # -- beyond one machine ----------------------------------------------------------------

    def pieces(self, name: str, max_bytes: int = PIECE_BYTES) -> List[Piece]:
        """Independent pieces of tensor `name`: runs of whole rows of at most `max_bytes` (one
        row at least), cut where the tensor's partitions start a new band of rows (an Angel
        matrix's, a partitioned variable's), so that a piece reads the files of one band.
        Read one with `read_piece`, in any process. A hash table's pieces are runs of its
        rows in id order (`table`)."""
        if self._is_table(name):
            _, _, dtype, n, width = self._table_data(name.strip("/"))
            per = max(max_bytes // max(width * dtype.itemsize, 1), 1)
            return [Piece(name, a, min(a + per, n)) for a in range(0, n, per)] or \
                [Piece(name, 0, 0)]
        header, size, shape, fortran, dtype = self._layout(name)
        if not shape:
            return [Piece(name, 0, 1)]
        rows = shape[0]
        row = max(int(_np.prod(shape[1:], dtype=_np.int64)) * dtype.itemsize, 1)
        per = max(max_bytes // row, 1)
        starts = {0, rows}
        for part in self.info(name).get("partitions", []):
            extent = part.get("extent") or []
            if extent and 0 < extent[0][0] < rows:
                starts.add(int(extent[0][0]))
        bands = sorted(starts)
        out = [Piece(name, a, min(a + per, hi))
               for lo, hi in zip(bands, bands[1:]) for a in range(lo, hi, per)]
        return out or [Piece(name, 0, 0)]

    def table_pieces(self, name: str, max_bytes: int = PIECE_BYTES) -> List[TablePiece]:
        """Independent pieces of the rows of keyed tensor or hash table `name` (a TF hash
        table, TFRA, Monolith, a DeepRec EV, an Angel matrix with row ids) in stored order, of
        about `max_bytes` of values each: what an engine's tasks read, with
        `read_table_piece`, in any process. Nothing sorted, nothing gathered: a piece reads
        only its own rows' bytes. A Monolith table's piece is one shard, read without looking
        at the others (its entry count is in its data only: planning reads none of them)."""
        name = name.strip("/")
        parts = self._m.scan_parts(name)
        if parts > 1:
            return [TablePiece(name, p, 0, -1) for p in range(parts)]
        pieces, _, _, _, piece_bytes, _ = self._m.scan_info(name, 0)
        per = max(max_bytes // max(piece_bytes, 1), 1)
        return [TablePiece(name, 0, a, min(a + per, pieces)) for a in range(0, pieces, per)] \
            or [TablePiece(name, 0, 0, 0)]

    def table_layout(self, name: str) -> Tuple[_np.dtype, int, Optional[int]]:
        """(values' dtype, elements per row, rows stored or None) of `table_pieces(name)`,
        from its metadata or its first part with rows (a Monolith shard: one is read); the
        rows stored count empty buckets a table leaves out (None for a table in parts)."""
        name = name.strip("/")
        parts = self._m.scan_parts(name)
        for part in range(parts):
            _, rows, width, descr, _, _ = self._m.scan_info(name, part)
            if parts == 1:
                return _np.dtype(descr), int(width), rows
            if rows:
                return _np.dtype(descr), int(width), None
        return _np.dtype(descr), int(width), None

    def _by_id(self, name: str) -> bool:
        """Whether `name`'s rows are found by ids it stores (a table), not by index."""
        try:
            name = name.strip("/")
            parts = self._m.scan_parts(name)
            return parts > 1 or bool(self._m.scan_info(name, 0)[5])
        except (UnavailableError, KeyError):
            return False

    def read_table_piece(self, piece: TablePiece) -> Tuple[_np.ndarray, _np.ndarray]:
        """The rows of `piece`: `(ids, values)`, one row of values per id, in stored order,
        empty buckets left out. Reading it again gives the same rows (an engine may retry)."""
        got = list(self.iter_table_piece(piece))
        if len(got) == 1:
            return got[0]
        if not got:
            _, _, width, descr, _, _ = self._m.scan_info(piece.name, piece.part)
            return _np.empty(0, dtype=_np.int64), _np.empty((0, width), dtype=_np.dtype(descr))
        return _np.concatenate([g[0] for g in got]), _np.concatenate([g[1] for g in got])

    def iter_table_piece(self, piece: TablePiece) -> Iterator[Tuple[_np.ndarray, _np.ndarray]]:
        """The rows of `piece` as `read_table_piece` gives them, a few MiB at a time: a task
        holds one step of its piece (a Monolith shard of 10^7 rows is streamed)."""
        pieces, _, width, descr, _, _ = self._m.scan_info(piece.name, piece.part)
        dtype = _np.dtype(descr)
        stop = pieces if piece.stop < 0 else piece.stop
        for k in range(piece.first, stop):
            i, v = self._m.scan_read(piece.name, piece.part, k)
            yield _np.frombuffer(i, dtype=_np.int64), \
                _np.frombuffer(v, dtype=dtype).reshape(-1, width)

    def read_piece(self, piece: Piece) -> _np.ndarray:
        """The rows of `piece` (a scalar tensor's one piece is the scalar)."""
        if self._is_table(piece.name):
            return self._table_rows(piece.name.strip("/"), piece.start, piece.stop)
        header, size, shape, fortran, dtype = self._layout(piece.name)
        if not shape:
            return self[piece.name]
        return self._rows_of(piece.name, piece.start, piece.stop)


def _is_numpy_dtype(name: str) -> bool:
    try:
        _np.dtype(name)
        return True
    except TypeError:
        return False


class _Slicer:
    def __init__(self, model: Model, name: str) -> None:
        self._model, self._name = model, name

    def __getitem__(self, key) -> _np.ndarray:
        if isinstance(key, tuple) and not key:
            return self._model[self._name]
        first, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if isinstance(first, (bool, _np.bool_)):
            return self._model[self._name][key]
        if isinstance(first, (int, _np.integer)):
            header, size, shape, _, _ = self._model._layout(self._name)
            i = int(first) + (shape[0] if shape and first < 0 else 0)
            if not shape or not 0 <= i < shape[0]:
                raise IndexError(f"index {first} is out of bounds for {self._name}")
            rows = self._model._rows_of(self._name, i, i + 1)
            return rows[(0,) + tuple(rest)]
        if isinstance(first, slice):
            header, size, shape, _, _ = self._model._layout(self._name)
            if not shape:
                raise IndexError(f"{self._name} is a scalar")
            start, stop, step = first.indices(shape[0])
            lo, hi = (start, stop) if step > 0 else (stop + 1, start + 1)
            rows = self._model._rows_of(self._name, lo, max(hi, lo))
            picked = rows[:: step] if step > 0 else rows[::-1][:: -step]
            return picked[(slice(None),) + tuple(rest)] if rest else picked
        return self._model[self._name][key]


def open(source: "os.PathLike[str] | str", **options: Any) -> Model:  # noqa: A001
    """Opens SOURCE — every form and URL the `modelfs` command takes — with the mount's
    `-o` options as keyword arguments."""
    return Model(source, **options)


# -- whole-model answers: the `modelfs` command's, as its --json gives them --------------------


def _binary() -> str:
    """The `modelfs` command: $MODELFS_BIN, the one installed with this package, or PATH's."""
    given = _os.environ.get("MODELFS_BIN")
    if given:
        return given
    beside = _os.path.join(_sysconfig.get_path("scripts"), "modelfs")
    if _os.access(beside, _os.X_OK):
        return beside
    found = _shutil.which("modelfs")
    if found:
        return found
    raise ModelfsError("the modelfs command is not installed (pip install modelfs installs it)")


def _raise_for(status: int, stderr: str, mounting: bool = False) -> None:
    message = stderr.strip().removeprefix("modelfs: ") or f"modelfs exited with status {status}"
    if status == 64:
        raise KeyError(message)
    if status == 1:
        raise UsageError(message)
    if mounting and status == 3:
        raise ModelfsError(message)
    raise SourceError(message)


def _run(args: List[str], options: Dict[str, Any], ok=(0,), lines: bool = False) -> Any:
    """The command's --json output; an exit status outside `ok` raises with its message (an
    answer printed before a failure is not returned as if it were whole)."""
    o = _option_args(options)
    cmd = [_binary(), *args, "--json"] + (["-o", ",".join(o)] if o else [])
    p = _subprocess.run(cmd, stdout=_subprocess.PIPE, stderr=_subprocess.PIPE, encoding="utf-8")
    # A status in `ok` other than 0 is an answer ("they differ", "problems found") only when
    # the answer was printed: with nothing on stdout it is the source's failure.
    if p.returncode not in ok or (p.returncode != 0 and not p.stdout.strip()):
        _raise_for(p.returncode, p.stderr)
    try:
        if lines:
            return [_json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        return _json.loads(p.stdout)
    except _json.JSONDecodeError as e:
        raise ModelfsError(f"modelfs {args[0]}: unreadable --json output ({e})") from None


def _paths(source, paths: Sequence[str]) -> List[str]:
    return [_os.fspath(source), *[_os.fspath(p) for p in paths]]


def stats(source, *paths: str, **options: Any) -> List[Dict[str, Any]]:
    """`modelfs stats --json SOURCE [PATHS]`: per tensor count, min, max, mean, std, NaN and
    infinity counts, zeros, L2 norm. A tensor that could not be read is named in the answer
    (the command's exit status 2), not raised."""
    return _run(["stats", *_paths(source, paths)], options, ok=(0, 2))


def diff(a, b, map: Sequence[str] = (), transpose: bool = False, **options: Any):  # noqa: A002
    """`modelfs diff --json A B`: one object per tensor (only in A, only in B, retyped,
    changed with max |Δ| and relative L2, identical). `map` are `REGEX=REPLACEMENT` rules."""
    args = ["diff", _os.fspath(a), _os.fspath(b)]
    for rule in [map] if isinstance(map, str) else map:
        args += ["--map", rule]
    if transpose:
        args.append("--transpose")
    return _run(args, options, ok=(0, 1))


def diff_rows(a, b, *tables: str, **options: Any) -> List[Dict[str, Any]]:
    """`modelfs diff --rows --json A B [TABLES]`: one object per id that differs, then one
    summary object per table."""
    return _run(["diff", "--rows", _os.fspath(a), _os.fspath(b), *tables], options, ok=(0, 1),
                lines=True)


def check(source, *paths: str, max_abs: Optional[float] = None, **options: Any):
    """`modelfs check --json SOURCE [PATHS]`: optimizer slots hold their table's ids, every
    float is finite and at most `max_abs` in magnitude."""
    args = ["check", *_paths(source, paths)]
    if max_abs is not None:
        args += ["--max-abs", repr(float(max_abs))]
    return _run(args, options, ok=(0, 2))


def verify(source, **options: Any) -> Dict[str, Any]:
    """`modelfs verify --json SOURCE`: every byte of every tensor read, every checksum and
    extent checked. `problems` (damage, a pickle's dangerous import) are what would make the
    command exit 2; `notes` (a class not run, a dtype not decoded) are not problems. Each is
    `{"name": mount path or None, "detail": text}`."""
    return _run(["verify", _os.fspath(source)], options, ok=(0, 2))


@_contextlib.contextmanager
def mount(source, path: Optional[str] = None, timeout: float = 30.0, **options: Any):
    """Mounts SOURCE (at `path`, else a temporary directory) for the `with` block and yields
    the mount point; unmounts on exit. Raises `ModelfsError` where FUSE is unavailable."""
    if not _os.path.exists("/dev/fuse"):
        raise ModelfsError("FUSE is not available here (no /dev/fuse): use modelfs.open")
    made = path is None
    point = _tempfile.mkdtemp(prefix="modelfs-") if made else _os.path.abspath(_os.fspath(path))
    if _os.path.ismount(point):
        raise ModelfsError(f"{point}: something is mounted there already")
    o = _option_args(options)
    cmd = [_binary(), "mount", "-f", _absolute(_os.fspath(source)), point] + (
        ["-o", ",".join(o)] if o else [])
    # The daemon's messages go to a file, read on failure: a pipe nobody reads would fill
    # and stop the daemon mid-request.
    log = _tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    daemon = _subprocess.Popen(cmd, stdout=_subprocess.DEVNULL, stderr=log)
    try:
        deadline = _time.monotonic() + timeout
        while not _os.path.ismount(point):
            if daemon.poll() is not None:
                log.seek(0)
                _raise_for(daemon.returncode or 3, log.read(), mounting=True)
            if _time.monotonic() > deadline:
                raise ModelfsError(f"{point}: not mounted after {timeout} s")
            _time.sleep(0.02)
        yield point
    finally:
        # SIGTERM unmounts (the daemon's own way out). A mount a reader still holds stays
        # busy: it is then detached lazily, so that no mount point is left behind, and the
        # daemon goes on serving the files still open and ends when the last one closes.
        if daemon.poll() is None:
            daemon.terminate()
        with _contextlib.suppress(_subprocess.TimeoutExpired):
            daemon.wait(timeout=min(timeout, 5.0))
        if _os.path.ismount(point):
            for umount in (["fusermount3", "-uz", point], ["fusermount", "-uz", point],
                           ["umount", "-l", point]):
                with _contextlib.suppress(OSError):
                    if _subprocess.run(umount, stdout=_subprocess.DEVNULL,
                                      stderr=_subprocess.DEVNULL).returncode == 0:
                        break
        log.close()
        if made:
            with _contextlib.suppress(OSError):
                _os.rmdir(point)


def __dir__() -> List[str]:
    # What `dir(modelfs)` and completion show: the API, not the modules it uses.
    return sorted(__all__ + ["PIECE_BYTES"])
