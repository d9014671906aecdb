"""The fsspec filesystem `modelfs`: every file a mount of a model shows, by URL, without FUSE.

    fsspec.open("modelfs::s3://bucket/ckpt/dense/kernel.npy")      # the model, then the file
    fsspec.open("modelfs://dense/kernel.npy::s3://bucket/ckpt")    # the same, split explicitly
    fs = fsspec.filesystem("modelfs", fo="hdfs://nn/angel/model", verify="none")
    pandas.read_csv(fs.open("w.csv"), header=None)

The tree, names, sizes and bytes are the mount's (`modelfs.open` resolves them through the
same tree); nothing is decoded to list or size a file but what the mount itself decodes. In
`modelfs::URL`, the model is the longest leading part of URL that opens as a model and the
rest is the path in its mount; `modelfs://PATH::URL` names the model as URL whole. Keyword
options are `modelfs.open`'s (`verify=`, `cache_dir=`, `endpoint=`, `hdfs=`, ...); in a
chained URL they go under the `modelfs` key (`fsspec.open(url, modelfs={"verify": "none"})`).
Read-only: opening for writing is refused. A chained URL asks fsspec for the inner protocol's
class (`s3fs` for `s3://`, `gcsfs` for `gs://`): without it, name the model with `fo=`.
"""

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

try:  # fsspec >= 2025.5: how `modelfs::URL` hands the filesystem URL's path as `fo`.
    from fsspec.implementations.chained import ChainedFileSystem as _Base
except ImportError:  # pragma: no cover - older fsspec
    _Base = AbstractFileSystem


def _model_of(source: str, fo: str, options: Dict[str, Any]) -> Tuple[Any, str]:
    """The model `source` names, or the nearest parent of it that is one; with the part of
    `fo` (the same path, without the protocol) that names the model."""
    import modelfs

    parts = source.rstrip("/").split("/")
    # No shorter candidate than `s3://b` (a bucket's root) or `/a`.
    floor = 2 if "://" in source else 1
    fo_parts = fo.rstrip("/").split("/")
    first: Optional[BaseException] = None
    for cut in range(len(parts), floor, -1):
        candidate = "/".join(parts[:cut])
        try:
            model = modelfs.open(candidate, **options)
        except (modelfs.SourceError, FileNotFoundError) as e:
            first = first or e
            continue
        dropped = len(parts) - cut
        base = "/".join(fo_parts[: len(fo_parts) - dropped]) if dropped else fo.rstrip("/")
        return model, base
    assert first is not None
    raise first


class ModelFileSystem(_Base):
    """Every file a mount of the model shows (see the module's help)."""

    protocol = "modelfs"
    root_marker = ""

    def __init__(self, fo: str = "", target_protocol: Optional[str] = None,
                 target_options: Optional[Dict[str, Any]] = None, **options: Any) -> None:
        """Opens the model `fo` names (with `target_protocol`, as in a chained
        `modelfs::s3://…` URL), or the nearest parent of that path that is a model; `options`
        are `modelfs.open`'s. Raises `ValueError` if `fo` is empty."""
        super().__init__(fo=fo, target_protocol=target_protocol, target_options=target_options,
                         **options)
        if not fo:
            raise ValueError("modelfs: no model named (fo=SOURCE, or modelfs::URL)")
        local = target_protocol in (None, "", "file", "local")
        source = fo if local else f"{target_protocol}://{fo}"
        if local and not fo.startswith("/") and "://" not in fo:
            import os
            source = os.path.abspath(fo)
        # fsspec's own keywords, not the model's options.
        options = {k: v for k, v in options.items()
                   if k not in ("skip_instance_cache", "use_listings_cache", "listings_expiry_time",
                                "max_paths", "asynchronous", "loop")}
        self.model, self._base = _model_of(source, fo, options)
        self._native = self.model._m

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        path = str(path)
        if path.startswith("modelfs://"):
            path = path[len("modelfs://"):]
        return path.split("::", 1)[0].strip("/")

    def _rel(self, path: str) -> str:
        """`path` as a path of the mount: a name under the model's own part of the URL, or
        relative to the mount's root already."""
        path = self._strip_protocol(path)
        base = self._base.strip("/")
        if base and (path == base or path.startswith(base + "/")):
            path = path[len(base):]
        return path.strip("/")

    def _name(self, rel: str) -> str:
        # Names are the mount's (`fs.find("")` lists what `find MOUNTPOINT` does); a chained
        # URL's path, which repeats the model's, is taken too (`_rel`).
        return rel

    def _entry(self, rel: str, is_dir: bool, size: Optional[int]) -> Dict[str, Any]:
        if is_dir:
            return {"name": self._name(rel), "size": 0, "type": "directory"}
        return {"name": self._name(rel), "size": size, "type": "file"}

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        """The exact size, as a reader needs it (a big text file is sized: rendered once)."""
        rel = self._rel(path)
        try:
            is_dir, size = self._native.stat(rel)
            if not is_dir and size is None:
                size = self._native.file_size(rel)
        except KeyError as e:  # a name not in the mount
            raise FileNotFoundError(path) from e
        return self._entry(rel, is_dir, size)

    def ls(self, path: str = "", detail: bool = True, **kwargs: Any) -> List[Any]:
        """Metadata only, as `ls -l` of the mount: a size that needs rendering (a big text
        file's) is None; `info` or `size` learns it."""
        rel = self._rel(path)
        try:
            is_dir, size = self._native.stat(rel)
            if not is_dir:
                entry = self._entry(rel, False, size)
                return [entry] if detail else [entry["name"]]
            listed = self._native.list_dir(rel)
        except KeyError as e:
            raise FileNotFoundError(path) from e
        out = []
        for name, child_dir, size in listed:
            child = f"{rel}/{name}" if rel else name
            out.append(self._entry(child, child_dir, size) if detail else self._name(child))
        return out

    def du(self, path: str, total: bool = True, maxdepth: Optional[int] = None,
           withdirs: bool = False, **kwargs: Any) -> Any:
        """Exact sizes: those a listing leaves unknown are learnt."""
        found = self.find(path, maxdepth=maxdepth, withdirs=withdirs, detail=True, **kwargs)
        sizes = {name: (e["size"] if e["size"] is not None else self.size(name))
                 for name, e in found.items()}
        return sum(sizes.values()) if total else sizes

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None,
                 **kwargs: Any) -> bytes:
        """Bytes `start:end` of file `path` (negative: from the end, as Python slices), read
        straight from the model; `FileNotFoundError` for a name the mount does not show."""
        rel = self._rel(path)
        try:
            size = self._native.file_size(rel)
        except KeyError as e:
            raise FileNotFoundError(path) from e
        start = 0 if start is None else (max(size + start, 0) if start < 0 else min(start, size))
        end = size if end is None else (max(size + end, 0) if end < 0 else min(end, size))
        if end <= start:
            return b""
        out = np.empty(end - start, dtype=np.uint8)
        self._native.read_file_into(rel, start, out)
        return out.tobytes()

    def _open(self, path: str, mode: str = "rb", block_size: Any = None, autocommit: bool = True,
              cache_options: Any = None, **kwargs: Any) -> "ModelFile":
        if mode != "rb":
            raise PermissionError(f"{path}: modelfs is read-only")
        return ModelFile(self, path, mode, block_size or 4 << 20, cache_options=cache_options,
                         size=self.info(path)["size"])

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise PermissionError("modelfs is read-only")

    mkdir = makedirs = rm_file = rm = cp_file = mv = pipe_file = touch = _read_only


class ModelFile(AbstractBufferedFile):
    """A file of the mount, read in ranges (fsspec buffers them)."""

    def _fetch_range(self, start: int, end: int) -> bytes:
        return self.fs.cat_file(self.path, start, end)
