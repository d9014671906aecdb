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

import contextlib
import io
import json
import os
import shutil
import subprocess
import sysconfig
import tempfile
import time
from typing import Any, Dict, Iterable, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from . import _native
from ._native import (
    ChecksumError,
    ModelfsError,
    SourceError,
    UnavailableError,
    UsageError,
)

__all__ = [
    "open",
    "Model",
    "Piece",
    "stats",
    "diff",
    "diff_rows",
    "check",
    "verify",
    "mount",
    "ModelfsError",
    "SourceError",
    "ChecksumError",
    "UnavailableError",
    "UsageError",
]

# Bytes of rows one piece covers by default: large enough that a task's overhead is small,
# small enough that a worker holds little.
PIECE_BYTES = 64 << 20


def _option_args(options: Dict[str, Any]) -> List[str]:
    """Keyword options as `-o` strings: `True` is a bare flag, `False`/`None` left out."""
    out = []
    for key, value in options.items():
        if value is True:
            out.append(key)
        elif value is False or value is None:
            continue
        else:
            out.append(f"{key}={value}")
    return out


def _parse_npy_header(header: bytes) -> Tuple[Tuple[int, ...], bool, np.dtype]:
    fp = io.BytesIO(header)
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(fp)
    return np.lib.format.read_array_header_2_0(fp)


class Piece(NamedTuple):
    """Rows `start:stop` of tensor `name`: a unit of work another process can read alone."""

    name: str
    start: int
    stop: int


def _absolute(source: str) -> str:
    """A local path made absolute; a URL (`s3://…`, `https://…`) as given."""
    return source if "://" in source else os.path.abspath(source)


def _reopen(source: str, options: Dict[str, Any]) -> "Model":
    return Model(source, **options)


class Model:
    """A model opened from SOURCE (a path or a URL) with the mount's options."""

    def __init__(self, source: "os.PathLike[str] | str", **options: Any) -> None:
        # Made absolute here, not only in the native open: a pickled model is opened again by
        # a worker whose working directory is not ours.
        self.source = _absolute(os.fspath(source))
        self.options = dict(options)
        if isinstance(self.options.get("cache_dir"), (str, os.PathLike)):
            if os.fspath(self.options["cache_dir"]) != "none":
                self.options["cache_dir"] = os.path.abspath(os.fspath(self.options["cache_dir"]))
        self._m = _native.Model(self.source, _option_args(self.options))

    def __reduce__(self):
        return (_reopen, (self.source, self.options))

    def __repr__(self) -> str:
        return f"modelfs.open({self.source!r})"

    # -- what is there ---------------------------------------------------------------------

    def keys(self) -> List[str]:
        """Every tensor's path in the mount, sorted (`modelfs list`'s first column)."""
        return self._m.keys()

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.strip("/") in set(self.keys())

    def info(self, name: str) -> Dict[str, Any]:
        """The tensor's `NAME.json` (dtype, shape, partitions, problems, …), read no data."""
        return json.loads(self._m.json(name))

    # -- values ----------------------------------------------------------------------------

    def _layout(self, name: str):
        header, size = self._m.npy_header(name)
        shape, fortran, dtype = _parse_npy_header(header)
        return header, size, tuple(shape), fortran, dtype

    def __getitem__(self, name: str) -> np.ndarray:
        """The tensor as a numpy array: the bytes of the mount's `NAME.npy`."""
        header, size, shape, fortran, dtype = self._layout(name)
        data = size - len(header)
        buf = np.empty(data, dtype=np.uint8)
        if data:
            self._m.read_npy_into(name, len(header), buf)
        return buf.view(dtype).reshape(shape, order="F" if fortran else "C")

    def map(self, name: str) -> np.ndarray:
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
        return np.frombuffer(lent, dtype=dtype).reshape(shape, order="F" if fortran else "C")

    def slice(self, name: str) -> "_Slicer":
        """`m.slice(name)[a:b, ...]` reads only rows `a:b` (then indexes the rest; a step
        reads the rows between and keeps every n-th)."""
        return _Slicer(self, name)

    def _rows_of(self, name: str, start: int, stop: int) -> np.ndarray:
        header, size, shape, fortran, dtype = self._layout(name)
        if fortran or not shape:
            return self[name][start:stop]
        start, stop, _ = slice(start, stop).indices(shape[0])
        stop = max(stop, start)
        row = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
        buf = np.empty((stop - start) * row, dtype=np.uint8)
        if buf.size:
            self._m.read_npy_into(name, len(header) + start * row, buf)
        return buf.view(dtype).reshape((stop - start,) + shape[1:])

    def rows(self, name: str, ids: Iterable[int]) -> Tuple[np.ndarray, np.ndarray]:
        """The rows of keyed tensor `name` (an embedding, a hash table) with feature ids
        `ids`, as `NAME.rows/ID.npy` gives each: `(found_ids, values)`, the ids found in the
        order asked and one row of `values` per found id."""
        # Feature ids are 64-bit patterns: an unsigned one (a Monolith id of 2^63 or more) is
        # the signed id the table stores and the mount names.
        asked = [int(i) - (1 << 64) if int(i) >= (1 << 63) else int(i) for i in ids]
        found, descr, width, values = self._m.rows(name, asked)
        found = np.array(found, dtype=np.int64)
        dtype = np.dtype(descr) if descr else np.dtype(np.float32)
        arr = np.frombuffer(bytearray(values), dtype=dtype)
        return found, arr.reshape(len(found), width)

    # -- beyond one machine ----------------------------------------------------------------

    def pieces(self, name: str, max_bytes: int = PIECE_BYTES) -> List[Piece]:
        """Independent pieces of tensor `name`: runs of whole rows of at most `max_bytes` (one
        row at least), cut where the tensor's partitions start a new band of rows (an Angel
        matrix's, a partitioned variable's), so that a piece reads the files of one band.
        Read one with `read_piece`, in any process."""
        header, size, shape, fortran, dtype = self._layout(name)
        if not shape:
            return [Piece(name, 0, 1)]
        rows = shape[0]
        row = max(int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize, 1)
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

    def read_piece(self, piece: Piece) -> np.ndarray:
        """The rows of `piece` (a scalar tensor's one piece is the scalar)."""
        header, size, shape, fortran, dtype = self._layout(piece.name)
        if not shape:
            return self[piece.name]
        return self._rows_of(piece.name, piece.start, piece.stop)


class _Slicer:
    def __init__(self, model: Model, name: str) -> None:
        self._model, self._name = model, name

    def __getitem__(self, key) -> np.ndarray:
        if isinstance(key, tuple) and not key:
            return self._model[self._name]
        first, rest = (key[0], key[1:]) if isinstance(key, tuple) else (key, ())
        if isinstance(first, (bool, np.bool_)):
            return self._model[self._name][key]
        if isinstance(first, (int, np.integer)):
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
    given = os.environ.get("MODELFS_BIN")
    if given:
        return given
    beside = os.path.join(sysconfig.get_path("scripts"), "modelfs")
    if os.access(beside, os.X_OK):
        return beside
    found = shutil.which("modelfs")
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
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding="utf-8")
    # A status in `ok` other than 0 is an answer ("they differ", "problems found") only when
    # the answer was printed: with nothing on stdout it is the source's failure.
    if p.returncode not in ok or (p.returncode != 0 and not p.stdout.strip()):
        _raise_for(p.returncode, p.stderr)
    try:
        if lines:
            return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise ModelfsError(f"modelfs {args[0]}: unreadable --json output ({e})") from None


def _paths(source, paths: Sequence[str]) -> List[str]:
    return [os.fspath(source), *[os.fspath(p) for p in paths]]


def stats(source, *paths: str, **options: Any) -> List[Dict[str, Any]]:
    """`modelfs stats --json SOURCE [PATHS]`: per tensor count, min, max, mean, std, NaN and
    infinity counts, zeros, L2 norm. A tensor that could not be read is named in the answer
    (the command's exit status 2), not raised."""
    return _run(["stats", *_paths(source, paths)], options, ok=(0, 2))


def diff(a, b, map: Sequence[str] = (), transpose: bool = False, **options: Any):  # noqa: A002
    """`modelfs diff --json A B`: one object per tensor (only in A, only in B, retyped,
    changed with max |Δ| and relative L2, identical). `map` are `REGEX=REPLACEMENT` rules."""
    args = ["diff", os.fspath(a), os.fspath(b)]
    for rule in [map] if isinstance(map, str) else map:
        args += ["--map", rule]
    if transpose:
        args.append("--transpose")
    return _run(args, options, ok=(0, 1))


def diff_rows(a, b, *tables: str, **options: Any) -> List[Dict[str, Any]]:
    """`modelfs diff --rows --json A B [TABLES]`: one object per id that differs, then one
    summary object per table."""
    return _run(["diff", "--rows", os.fspath(a), os.fspath(b), *tables], options, ok=(0, 1),
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
    return _run(["verify", os.fspath(source)], options, ok=(0, 2))


@contextlib.contextmanager
def mount(source, path: Optional[str] = None, timeout: float = 30.0, **options: Any):
    """Mounts SOURCE (at `path`, else a temporary directory) for the `with` block and yields
    the mount point; unmounts on exit. Raises `ModelfsError` where FUSE is unavailable."""
    if not os.path.exists("/dev/fuse"):
        raise ModelfsError("FUSE is not available here (no /dev/fuse): use modelfs.open")
    made = path is None
    point = tempfile.mkdtemp(prefix="modelfs-") if made else os.path.abspath(os.fspath(path))
    if os.path.ismount(point):
        raise ModelfsError(f"{point}: something is mounted there already")
    o = _option_args(options)
    cmd = [_binary(), "mount", "-f", _absolute(os.fspath(source)), point] + (
        ["-o", ",".join(o)] if o else [])
    # The daemon's messages go to a file, read on failure: a pipe nobody reads would fill
    # and stop the daemon mid-request.
    log = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
    daemon = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log)
    try:
        deadline = time.monotonic() + timeout
        while not os.path.ismount(point):
            if daemon.poll() is not None:
                log.seek(0)
                _raise_for(daemon.returncode or 3, log.read(), mounting=True)
            if time.monotonic() > deadline:
                raise ModelfsError(f"{point}: not mounted after {timeout} s")
            time.sleep(0.02)
        yield point
    finally:
        # SIGTERM unmounts (the daemon's own way out). A mount a reader still holds stays
        # busy: it is then detached lazily, so that no mount point is left behind, and the
        # daemon goes on serving the files still open and ends when the last one closes.
        if daemon.poll() is None:
            daemon.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            daemon.wait(timeout=min(timeout, 5.0))
        if os.path.ismount(point):
            for umount in (["fusermount3", "-uz", point], ["fusermount", "-uz", point],
                           ["umount", "-l", point]):
                with contextlib.suppress(OSError):
                    if subprocess.run(umount, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL).returncode == 0:
                        break
        log.close()
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(point)
