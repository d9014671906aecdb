"""Records what TensorFlow's own reader returns for a checkpoint, in the conformance format.

Every case folder gets `expected/index.json` and `expected/expected.npz`:

    {"prefix": "<prefix relative to the case folder>",
     "source": "<what to mount, relative to the case folder>"   (only when it is not the prefix)
     "listing": [keys as tf.train.list_variables returns them, in that order],
     "tensors": {key: {"dtype", "shape", "npz_key" | "strings", ["slices": [...]]}},
     ...case-specific extras ("note", "key_encoding", "all_prefixes", "what")}

Values come from `tf.train.load_checkpoint(prefix).get_tensor(key)`; where TF's Python reader
cannot be used (keys that are not UTF-8, slices of a partitioned tensor) they come from
`tf.raw_ops.RestoreV2`, which is the same C++ bundle reader. bfloat16 arrays are stored as their
raw uint16 bits, float8/float4 as their raw uint8 bits, int4/int2/uint4/uint2 widened to
int8/uint8 values (see "npz_encoding"). Strings are stored inline as latin-1 text (one char per
byte), flattened in C order. `_CHECKPOINTABLE_OBJECT_GRAPH` is listed but not recorded as a tensor.
"""
import json
import os

import numpy as np
import tensorflow as tf

import tffix_index

GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"

# TF dtype name -> (how the array is stored in the npz, note for index.json or None)
_RAW_BITS = {"bfloat16": (np.uint16, "raw uint16 bits")}
for _n in ("float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
           "float8_e5m2fnuz", "float4_e2m1fn"):
    _RAW_BITS[_n] = (np.uint8, "raw uint8 bits (one element per byte)")
_WIDENED = {"int4": (np.int8, "int8 values"), "int2": (np.int8, "int8 values"),
            "uint4": (np.uint8, "uint8 values"), "uint2": (np.uint8, "uint8 values")}
_QUANTIZED = {"qint8": np.int8, "quint8": np.uint8, "qint16": np.int16, "quint16": np.uint16,
              "qint32": np.int32}


def dtype_name(dt):
    """The dtype name used in index.json: numpy-style names, TF's name for rarer types."""
    name = tf.as_dtype(dt).name
    return {"half": "float16"}.get(name, name)


def key_text(key):
    """index.json text of a key: str keys as they are, bytes keys as latin-1 (one char per byte)."""
    return key.decode("latin-1") if isinstance(key, bytes) else key


class Expected:
    """Accumulates the expected values of one case, then writes expected/ beside the checkpoint."""

    def __init__(self, case_dir):
        self.case_dir = case_dir
        self.arrays = {}
        self.tensors = {}

    def _npz_key(self):
        return "t%05d" % len(self.arrays)

    def value_entry(self, dtname, arr, share=None):
        """{"npz_key"} or {"strings"} (+ "npz_encoding") for one numpy array returned by TF.
        `share`: an existing npz key to reuse when the caller knows the value is identical."""
        arr = np.asarray(arr)
        if dtname == "string":
            flat = arr.reshape(-1).tolist()
            return {"strings": [bytes(s).decode("latin-1") for s in flat]}
        out = {}
        if dtname in _RAW_BITS:
            store, note = _RAW_BITS[dtname]
            arr = np.array(arr, order="C").view(store)
            out["npz_encoding"] = note
        elif dtname in _WIDENED:
            store, note = _WIDENED[dtname]
            arr = arr.astype(store)
            out["npz_encoding"] = note
        elif dtname in _QUANTIZED:
            arr = np.array(arr, order="C").view(_QUANTIZED[dtname])
            out["npz_encoding"] = "raw %s values (no scale/offset)" % np.dtype(_QUANTIZED[dtname]).name
        if share is not None:
            have = self.arrays[share]
            if have.dtype != arr.dtype or have.shape != arr.shape or have.tobytes() != arr.tobytes():
                raise AssertionError("shared npz value differs")
            out["npz_key"] = share
            return out
        k = self._npz_key()
        self.arrays[k] = np.array(arr, order="C")
        out["npz_key"] = k
        return out

    def add(self, key, dtname, shape, arr, **extra):
        if arr is not None and list(np.shape(arr)) != list(shape):
            raise AssertionError("%r: read-back shape %s != listed %s" % (key, np.shape(arr), shape))
        e = {"dtype": dtname, "shape": [int(d) for d in shape]}
        if arr is not None:
            e.update(self.value_entry(dtname, arr, share=extra.pop("share", None)))
        e.update(extra)
        self.tensors[key_text(key)] = e
        return e

    def write(self, prefix, listing, source=None, compact=False, **extra):
        d = os.path.join(self.case_dir, "expected")
        os.makedirs(d, exist_ok=True)
        idx = {"prefix": prefix}
        if source is not None:
            idx["source"] = source
        idx.update(extra)
        idx["listing"] = [key_text(k) for k in listing]
        idx["tensors"] = self.tensors
        with open(os.path.join(d, "index.json"), "w", encoding="utf-8") as f:
            if compact:
                json.dump(idx, f, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
            else:
                json.dump(idx, f, ensure_ascii=False, indent=1, sort_keys=False)
            f.write("\n")
        # np.savez writes zip members with a fixed timestamp, so the file is reproducible.
        np.savez(os.path.join(d, "expected.npz"), **self.arrays)


def restore(prefix, key, dtype, spec=""):
    """One tensor (or one slice, spec like "10 4 0,4:-") through tf.raw_ops.RestoreV2."""
    names = tf.constant([key if isinstance(key, bytes) else key.encode("utf-8")])
    out = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names, shape_and_slices=[spec],
                               dtypes=[tf.as_dtype(dtype)])
    return out[0].numpy()


def spec_extent(spec):
    """"10 4 0,4:-" -> full shape [10, 4], extent [[0, 4], [0, 4]] (whole dims spelled out)."""
    parts = spec.split(" ")
    full = [int(x) for x in parts[:-1]]
    ext = []
    for d, e in zip(full, parts[-1].split(":")):
        if e == "-":
            ext.append([0, d])
        else:
            s, n = e.split(",")
            ext.append([int(s), int(n)])
    return full, ext


def record_checkpoint(exp, prefix_abs, slice_specs=None, skip_full=(), notes=None):
    """Reads every listed tensor of prefix_abs with TF and adds it to `exp`; returns the listing.

    slice_specs: {key: [spec, …]} in the full entry's slice order; each slice is read back on
    its own with RestoreV2 and recorded under tensors[key]["slices"].
    skip_full: {key: (array, note)} partitioned tensors TF cannot reassemble: the full value comes
    from the caller's inputs (said in "note"), the slices still from TF.
    """
    slice_specs = dict(slice_specs or {})
    if prefix_abs.endswith("/"):
        # An empty base name (`dir/.index`): list_variables/load_checkpoint take a directory
        # for its state file, whose "." they cannot open; TF's reader takes the prefix as is.
        from tensorflow.python.training import py_checkpoint_reader
        r = py_checkpoint_reader.NewCheckpointReader(prefix_abs)
        listing = sorted(r.get_variable_to_shape_map().items())
        load = lambda p: py_checkpoint_reader.NewCheckpointReader(p)  # noqa: E731
    else:
        listing = tf.train.list_variables(prefix_abs)
        load = tf.train.load_checkpoint
    # Slices as the index stores them (read without TF): must agree with what the caller saved.
    _, entries = tffix_index.read_index(prefix_abs + ".index")
    by_key = dict(entries)
    for key, shape in listing:
        found = tffix_index.slice_specs(by_key[key.encode("utf-8")], shape)
        if key in slice_specs and slice_specs[key] != found:
            raise AssertionError("%s: saved slices %s, index has %s" % (key, slice_specs[key], found))
        if found:
            slice_specs[key] = found
    reader = load(prefix_abs)
    dtypes = reader.get_variable_to_dtype_map()
    for key, shape in listing:
        if key == GRAPH_KEY:
            continue
        dtname = dtype_name(dtypes[key])
        extra = {}
        if key in skip_full:
            arr, note = skip_full[key]
            extra["note"] = note
        else:
            arr = reader.get_tensor(key)
        if key in slice_specs:
            extra["slices"] = record_slices(exp, prefix_abs, key, dtypes[key], slice_specs[key])
        exp.add(key, dtname, shape, arr, **extra)
    return [k for k, _ in listing]


def record_slices(exp, prefix_abs, key, dtype, specs):
    out = []
    for spec in specs:
        full, ext = spec_extent(spec)
        arr = restore(prefix_abs, key, dtype, spec)
        shape = [n for _, n in ext]
        if list(arr.shape) != shape:
            raise AssertionError("%s %s: slice shape %s" % (key, spec, arr.shape))
        e = {"spec": spec, "extent": ext, "shape": shape}
        e.update(exp.value_entry(dtype_name(dtype), arr))
        out.append(e)
    return out
