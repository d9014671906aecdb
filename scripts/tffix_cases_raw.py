"""Fixture cases written with tf.raw_ops.SaveV2 / MergeV2Checkpoints (exact names, dtypes, slices).

Each case function takes the case folder, writes the checkpoint with TensorFlow, records what TF
reads back (tffix_record) and returns a one-line description for fixtures/tf/README.md.
"""
import hashlib
import os

import numpy as np
import tensorflow as tf

import tffix_index
from tffix_record import Expected, dtype_name, record_checkpoint, restore

F32_BITS = lambda *u: np.array(u, dtype="<u4").view(np.float32)  # noqa: E731
F64_BITS = lambda *u: np.array(u, dtype="<u8").view(np.float64)  # noqa: E731


def save_v2(prefix, items):
    """items: [(name: str | bytes, spec: str, value: tf.Tensor | np.ndarray)] in one SaveV2 call."""
    names = tf.constant([n if isinstance(n, bytes) else n.encode("utf-8") for n, _, _ in items])
    specs = tf.constant([s for _, s, _ in items])
    tensors = [v if isinstance(v, tf.Tensor) else tf.constant(v) for _, _, v in items]
    tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=specs, tensors=tensors)


def _float_specials(dt):
    fi = np.finfo(dt)
    return np.array([0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 1e-4, 1e-5, 123456789.0, 1e16, 1e15,
                     float(fi.max), -float(fi.max), float(fi.tiny), float(fi.smallest_subnormal),
                     float(fi.smallest_subnormal) * 3, float(fi.eps), np.nan, np.inf, -np.inf,
                     1.0 / 3.0, 2.0 / 3.0, 100.0, 1e-7, 9.999999e-5, 65504.0, 16777217.0],
                    dtype=np.float64).astype(dt)


def _int_specials(dt):
    ii = np.iinfo(dt)
    vals = [ii.min, ii.min + 1, -1, 0, 1, 2, 127, ii.max - 1, ii.max]
    return np.array([v for v in vals if ii.min <= v <= ii.max], dtype=dt)


def case_dtypes(d):
    """Every common dtype with special values; plus a rank-3 tensor."""
    p = os.path.join(d, "ckpt")
    f32 = np.concatenate([_float_specials(np.float32),
                          F32_BITS(0xFFC00000, 0x7F800001, 0x7FC00001, 0x00000001, 0x80000001)])
    f64 = np.concatenate([_float_specials(np.float64),
                          np.array([0.1 + 0.2, 9999999999999998.0, 1.7976931348623157e308,
                                    2.2250738585072014e-308, 1e-310, 5e-324, 1e300, 1e-300]),
                          F64_BITS(0xFFF8000000000000, 0x7FF0000000000001)])
    with np.errstate(over="ignore"):
        f16 = np.concatenate([_float_specials(np.float16),
                              np.array([6e-8, 6.1e-5, 0.333, 1000.5, 2049.0], np.float16)])
        bf16 = np.array([0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 1e-5, 1e-4, 123456789.0, 1e16, 3.38e38,
                         -3.38e38, 1.18e-38, 9.2e-41, 1e-40, np.nan, np.inf, -np.inf, 1.0 / 3.0,
                         256.0, 257.0, 65280.0], np.float32)
    bools = np.array([True, False, True, True, False])
    c64 = np.array([1 + 2j, -0.5 - 1e-5j, complex(np.nan, np.inf), complex(-0.0, 0.0),
                    1e16 + 123456789j, complex(0.1, -np.inf), 3.4028235e38 - 1.4e-45j], np.complex64)
    c128 = np.array([1 + 2j, -0.5 - 1e-5j, complex(np.nan, -np.inf), complex(-0.0, -0.0),
                     1e16 + 123456789j, 0.1 + 0.2j, 5e-324 + 1.7976931348623157e308j], np.complex128)
    items = [("float16", "", f16), ("bfloat16", "", tf.cast(tf.constant(bf16), tf.bfloat16)),
             ("float32", "", f32), ("float64", "", f64), ("bool", "", bools),
             ("complex64", "", c64), ("complex128", "", c128)]
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
        items.append((np.dtype(dt).name, "", _int_specials(dt)))
    items.append(("rank3/float32_2x3x4", "", np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8))
    items.append(("rank2/int64_3x2", "", np.array([[-(2 ** 63), 2 ** 63 - 1], [0, -1], [1, 2 ** 40]],
                                                  np.int64)))
    items.append(("rank4/float64_1x1x1x1", "", np.full((1, 1, 1, 1), -2.5)))
    save_v2(p, items)
    exp = Expected(d)
    listing = record_checkpoint(exp, p)
    exp.write("ckpt", listing)
    return ("every common dtype (f16, bf16, f32, f64, bool, complex64/128, i8-i64, u8-u64) with NaN "
            "(incl. negative / payload NaNs), ±inf, -0.0, integer extremes, subnormals, 0.1, 1e-5, "
            "1e16, 123456789.0; rank 2, 3 and 4 tensors")


def case_exotic_types(d):
    """Quantized, float8, float4 and int4/int2 types: TF-named dtypes (not in the common set)."""
    p = os.path.join(d, "ckpt")
    E = tf.dtypes.experimental
    items = []
    for name, npdt, vals in (("qint8", np.int8, [-128, -1, 0, 1, 127]),
                             ("quint8", np.uint8, [0, 1, 128, 255]),
                             ("qint16", np.int16, [-32768, -1, 0, 32767]),
                             ("quint16", np.uint16, [0, 1, 65535]),
                             ("qint32", np.int32, [-2 ** 31, -1, 0, 2 ** 31 - 1])):
        dt = getattr(tf, name)
        items.append((name, "", tf.constant(np.array(vals, npdt).astype(dt.as_numpy_dtype))))
    floats = np.array([0.0, -0.0, 1.0, -1.5, 0.25, 3.0, 448.0, np.nan, np.inf], np.float32)
    for name in ("float8_e5m2", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e4m3b11fnuz",
                 "float8_e5m2fnuz", "float4_e2m1fn"):
        dt = getattr(E, name, None)
        if dt is None:
            continue
        with np.errstate(all="ignore"):
            items.append((name, "", tf.constant(floats.astype(dt.as_numpy_dtype))))
    for name, vals in (("int4", [-8, -1, 0, 1, 7]), ("uint4", [0, 1, 8, 15]),
                       ("int2", [-2, -1, 0, 1]), ("uint2", [0, 1, 2, 3])):
        dt = getattr(E, name, None)
        if dt is not None:
            items.append((name, "", tf.constant(np.array(vals, np.int64).astype(dt.as_numpy_dtype))))
    save_v2(p, items)
    exp = Expected(d)
    listing = record_checkpoint(exp, p)
    exp.write("ckpt", listing, note="dtypes outside the common set; see npz_encoding per tensor. "
              "TF writes int4/int2 as one element per byte holding the low bits only "
              "(int4 -1 is byte 0x0f, not 0xff).")
    return ("rarer dtypes: qint8/quint8/qint16/quint16/qint32, float8 (e5m2, e4m3fn, e4m3fnuz, "
            "e4m3b11fnuz, e5m2fnuz), float4_e2m1fn, int4/uint4/int2/uint2 (dtype names are TF's)")


def case_scalars_empty(d):
    p = os.path.join(d, "ckpt")
    items = [("scalar/f32", "", np.float32(-1.25)), ("scalar/f64", "", np.float64(1e-300)),
             ("scalar/i64", "", np.int64(-(2 ** 63))), ("scalar/u8", "", np.uint8(255)),
             ("scalar/bool", "", np.bool_(True)), ("scalar/f16", "", np.float16(0.1)),
             ("scalar/bf16", "", tf.constant(0.1, tf.bfloat16)),
             ("scalar/c64", "", np.complex64(1 - 1j)),
             ("scalar/string", "", tf.constant(b"scalar string")),
             ("scalar/empty_string", "", tf.constant(b"")),
             ("empty/f32_0", "", np.zeros([0], np.float32)),
             ("empty/f32_0x3", "", np.zeros([0, 3], np.float32)),
             ("empty/i32_3x0", "", np.zeros([3, 0], np.int32)),
             ("empty/f64_2x0x2", "", np.zeros([2, 0, 2], np.float64)),
             ("empty/bool_0", "", np.zeros([0], np.bool_)),
             ("empty/string_0", "", tf.constant([], dtype=tf.string)),
             ("empty/string_0x2", "", tf.zeros([0, 2], tf.string)),
             ("one/f32_1", "", np.array([7.0], np.float32)),
             ("one/f32_1x1", "", np.array([[7.5]], np.float32))]
    save_v2(p, items)
    exp = Expected(d)
    listing = record_checkpoint(exp, p)
    exp.write("ckpt", listing)
    return ("scalars of many dtypes (incl. string and empty string), empty tensors [0], [0,3], "
            "[3,0], [2,0,2], empty string tensors [0] and [0,2], shapes [1] and [1,1]")


def case_strings(d):
    p = os.path.join(d, "ckpt")
    vec = [b"", b"a", b"two\nlines", b"tab\there", b"back\\slash", b"\x00\xff", b"cr\r\nlf",
           b"x" * 127, b"y" * 128, bytes(range(256)), b"caf\xe9", "h\u00e9llo \u2603".encode(),
           b"\x80\x81 lone continuation", b"\xc3", b"esc\x1b\x7f", b"trailing backslash\\",
           b"literal \\n not newline", b"ends with newline\n", b" lead and trail space ",
           b"z" * 1000, b"ends with NUL\x00", b"\x00"]
    grid = [[b"r0c0", b"r0c1", b""], [b"r1\nc0", b"\xff", b"r1c2"]]
    items = [("vector", "", tf.constant(vec)), ("grid_2x3", "", tf.constant(grid)),
             ("scalar", "", tf.constant(b"only one")),
             ("long_70000", "", tf.constant([b"L" * 70000, b"short"]))]
    save_v2(p, items)
    exp = Expected(d)
    listing = record_checkpoint(exp, p)
    exp.write("ckpt", listing)
    return ("string tensors: empty strings, newlines, tabs, CR, backslashes, NUL and 0xff, all 256 "
            "byte values, lengths 127/128/1000/70000 (1-, 2- and 3-byte varints), non-UTF-8, valid "
            "multi-byte UTF-8, rank 0, 1 and 2")


ODD_KEYS = ["h\u00e9llo/w\u00f6rld", "\u65e5\u672c/\u8a9e", "with space/x y", "colon:0",
            "scope/var:0", "per%cent/100%", "per%25cent", "W", "W/Adam", "W/Adam_1", "W_extra",
            "Wa", "a/b/c/d/e/f/g", "/leading_slash", "trailing_slash/", "double//slash",
            ".", "..", "dots/./x", "dots/../y", "dot.name", "esc..S/.S..", "tab\tkey", "new\nline",
            "back\\slash", "q\"uote", "long/" + "k" * 300, "emoji/\U0001F600"]


def case_odd_keys(d):
    p = os.path.join(d, "ckpt")
    items = [(k, "", np.array([i, -i], np.int32)) for i, k in enumerate(ODD_KEYS)]
    save_v2(p, items)
    exp = Expected(d)
    listing = record_checkpoint(exp, p)
    exp.write("ckpt", listing, note="each key k_i holds int32 [i, -i] (i = position in save order)")
    return ("odd but UTF-8 keys: non-ASCII, spaces, ':', '%', a key that is a leaf and a prefix "
            "(W, W/Adam, W/Adam_1), leading/trailing/double '/', '.', '..', escape-like '..' and "
            "'.S', tab/newline/backslash/quote, a 305-byte key, 4-byte UTF-8")


NON_UTF8_KEYS = [b"caf\xe9", b"\xff\xfe", b"bad\x80byte/leaf", b"dir\xc0/x", b"nul\x00key",
                 b"\x00leading_nul_not_a_slice", b"ok_ascii", b"trunc\xe2\x82"]


def case_nonutf8_keys(d):
    """Keys that are not UTF-8. TF's Python list_variables raises UnicodeDecodeError on them, so
    the listing is the saved names in byte order and values are read with RestoreV2."""
    p = os.path.join(d, "ckpt")
    items = [(k, "", np.float32(i + 0.5)) for i, k in enumerate(NON_UTF8_KEYS)]
    save_v2(p, items)
    try:
        tf.train.list_variables(p)
        listed_by_tf = True
    except UnicodeDecodeError:
        listed_by_tf = False
    exp = Expected(d)
    for k in sorted(NON_UTF8_KEYS):
        arr = restore(p, k, tf.float32)
        exp.add(k, "float32", [], arr)
    note = ("keys are raw bytes; index.json spells them latin-1 (one char per byte). Every "
            "non-ASCII byte here is invalid UTF-8, so this equals SPEC's name with \\u00XX per "
            "invalid byte. Values read back with tf.raw_ops.RestoreV2; listing = saved names in "
            "byte order (tf.train.list_variables %s)."
            % ("works" if listed_by_tf else "raises UnicodeDecodeError on these keys"))
    exp.write("ckpt", sorted(NON_UTF8_KEYS), key_encoding="latin-1", note=note)
    return ("keys that are not UTF-8 (0xff 0xfe, lone 0xe9/0x80/0xc0, truncated sequence), a NUL "
            "inside a key and a key starting with NUL that is not a slice key; key_encoding latin-1")


PARTS = {
    "rows_10x4": ["10 4 0,4:-", "10 4 4,3:-", "10 4 7,3:-"],
    "grid_4x6": ["4 6 0,2:0,3", "4 6 0,2:3,3", "4 6 2,2:0,3", "4 6 2,2:3,3"],
    "shuffled_6": ["6 4,2", "6 0,2", "6 2,2"],
    "cols_3x5_i64": ["3 5 -:0,2", "3 5 -:2,3"],
}


def _slice_of(full, spec):
    _, ext = spec.split(" ")[:-1], spec.split(" ")[-1].split(":")
    idx = []
    for dim, e in zip(full.shape, ext):
        if e == "-":
            idx.append(slice(0, dim))
        else:
            s, n = (int(x) for x in e.split(","))
            idx.append(slice(s, s + n))
    return full[tuple(idx)]


def case_partitioned(d):
    p = os.path.join(d, "ckpt")
    fulls = {"rows_10x4": np.arange(40, dtype=np.float32).reshape(10, 4) * 0.5,
             "grid_4x6": np.arange(24, dtype=np.float64).reshape(4, 6) - 11.5,
             "shuffled_6": np.array([10, 11, 12, 13, 14, 15], np.int32),
             "cols_3x5_i64": np.arange(15, dtype=np.int64).reshape(3, 5) * 1000003}
    items = []
    for name, specs in PARTS.items():
        items += [(name, s, _slice_of(fulls[name], s)) for s in specs]
    items.append(("plain", "", np.array([1.0, 2.0], np.float32)))
    items.append(("whole_as_slice", "2 2 -:-", np.eye(2, dtype=np.float32)))
    save_v2(p, items)
    exp = Expected(d)
    listing = record_checkpoint(exp, p, slice_specs=PARTS)
    for name, full in fulls.items():
        got = tf.train.load_checkpoint(p).get_tensor(name)
        assert got.tobytes() == full.tobytes(), name
    exp.write("ckpt", listing, note="slices[] are in save order, which is the order of the full "
              "entry's slices list; each slice value was read back with RestoreV2 and its spec")
    return ("partitioned variables via SaveV2 slice specs: a [10,4] f32 in 3 row blocks, a [4,6] "
            "f64 in 2x2 blocks, a [6] i32 whose slices were saved out of order, a [3,5] i64 in "
            "column blocks, and a slice spec covering everything (stored as a plain entry)")


def case_partitioned_strings(d):
    p = os.path.join(d, "ckpt")
    full = np.array([[b"a0", b"a1"], [b"b\n0", b""], [b"\xff\x00", b"c" * 200], [b"d0", b"d1"]],
                    dtype=object)
    specs = ["4 2 0,1:-", "4 2 1,2:-", "4 2 3,1:-"]
    save_v2(p, [("strs", s, tf.constant(_slice_of(full, s).tolist())) for s in specs] +
            [("other", "", np.int32(5))])
    exp = Expected(d)
    note = ("TF cannot reassemble a partitioned string tensor (get_tensor: 'Dtype string not "
            "supported'), so the full value comes from the generator's input; each slice was read "
            "back by TF (RestoreV2 with its spec)")
    listing = record_checkpoint(exp, p, slice_specs={"strs": specs},
                                skip_full={"strs": (full, note)})
    exp.write("ckpt", listing)
    return "a [4,2] string tensor saved in 3 row slices (values partly from inputs, see note)"


def case_multi_shard(d):
    """Three SaveV2 bundles merged with MergeV2Checkpoints: 3 data files, slices of one tensor
    in different shards (the full entry's slices list is concatenated in merge order)."""
    p = os.path.join(d, "ckpt")
    tmp = [os.path.join(d, "tmp_part%d" % i, "part") for i in range(3)]
    emb = np.arange(10, dtype=np.float32).reshape(5, 2) + 0.25
    save_v2(tmp[0], [("a", "", np.array([1.5, 2.5, 3.5], np.float32)),
                     ("emb", "5 2 0,2:-", emb[0:2]), ("s", "", tf.constant([b"shard0", b"\n"]))])
    save_v2(tmp[1], [("b", "", np.array([-(2 ** 40)], np.int64)), ("emb", "5 2 2,3:-", emb[2:5])])
    save_v2(tmp[2], [("c/d", "", np.float64(0.1))])
    tf.raw_ops.MergeV2Checkpoints(checkpoint_prefixes=tf.constant(tmp), destination_prefix=p,
                                  delete_old_dirs=True)
    for t in tmp:  # MergeV2Checkpoints removes the dirs if empty; make sure nothing is left over
        if os.path.isdir(os.path.dirname(t)):
            os.rmdir(os.path.dirname(t))
    exp = Expected(d)
    listing = record_checkpoint(exp, p, slice_specs={"emb": ["5 2 0,2:-", "5 2 2,3:-"]})
    assert tf.train.load_checkpoint(p).get_tensor("emb").tobytes() == emb.tobytes()
    exp.write("ckpt", listing)
    return ("3 bundles merged by MergeV2Checkpoints (num_shards 3, data-0000{0,1,2}-of-00003), "
            "a partitioned [5,2] f32 with its slices in shards 0 and 1")


def case_many_keys(d, n=8000):
    """Enough keys for a multi-block index (TF's block size is 256 KiB of entries). Keys start
    with a hash so that neighbours share few bytes: large entries, few keys, small JSON."""
    p = os.path.join(d, "ckpt")
    keys = ["m/%s/%04d" % (hashlib.sha256(b"%d" % i).hexdigest()[:40], i) for i in range(n)]
    vals = [np.float32(i % 251) for i in range(n)]
    save_v2(p, [(k, "", v) for k, v in zip(keys, vals)])
    listing = tf.train.list_variables(p)
    reader = tf.train.load_checkpoint(p)
    exp = Expected(d)
    shared = {}
    by_key = dict(zip(keys, vals))
    for k, shape in listing:
        got = reader.get_tensor(k)
        assert got.tobytes() == by_key[k].tobytes() and shape == []
        v = int(got)
        e = exp.add(k, "float32", [], got, share=shared.get(v))
        shared.setdefault(v, e["npz_key"])
    index, _ = tffix_index.read_index(p + ".index")
    assert len(index) >= 2, "many_keys: only %d data block(s)" % len(index)
    exp.write("ckpt", [k for k, _ in listing], compact=True, data_blocks=len(index),
              index_separators=[sep.decode("latin-1") for sep, _ in index],
              note="%d scalar f32 keys; value = index %% 251; tensors with equal values share "
              "an npz_key" % n)
    return ("%d scalar f32 keys in one SaveV2 call: an index with %d data blocks (separators "
            "in index.json are not keys)" % (n, len(index)))
