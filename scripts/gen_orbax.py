#!/usr/bin/env python3
"""Writes the Orbax (JAX) checkpoint fixtures (issue 73) with the real orbax-checkpoint writer
on CPU JAX, and what Orbax's own restore returns from them (`expected.json` in each dir), so
that the Rust reader's tests need neither JAX nor Orbax nor TensorStore.

Written with jax 0.10.2, jaxlib 0.10.2, orbax-checkpoint 0.12.8, tensorstore 0.1.86,
numpy 2.4.6, ml_dtypes 0.7.0 (Python 3.11).  Every save runs on 8 CPU devices
(XLA_FLAGS=--xla_force_host_platform_device_count=8, JAX_PLATFORMS=cpu; set below), with
jax_enable_x64 on (else int64/float64 leaves are saved as int32/float32).

  ocdbt/          `ocp.StandardCheckpointer().save(path, tree)`: the defaults of this Orbax,
                  which are OCDBT + zarr **v2** (zstd level 1), not zarr3.  The nested tree:
                  params/dense/{kernel f32[4,3], bias f32[3]}, params/embed bf16[10,4],
                  layers/[0,1]/w f32[2,2], step int32[] (a 0-d jax array), dtypes/{f16, f64,
                  i8, i16, i64, u8, u32, bool}, zeros f32[64] (all fill value), big f32[256,64]
                  saved with SaveArgs(chunk_byte_size=4096) (many chunks), python int and float
                  (value_type "scalar": 0-d int64/float64 arrays in the kvstore).  No string leaf
                  (StandardCheckpointer refuses str) and no [0,3] array (Orbax refuses zero-size
                  arrays): see strings/.
  ocdbt_zarr3/    the same tree, `PyTreeCheckpointHandler(use_zarr3=True)` + ocdbt
                  (`zarr.json`, `sharding_indexed` codec with crc32c index, zstd level 3),
                  `ocdbt_target_data_file_size=16384` so the data is split over several `d/` files.
  strings/        `ocp.PyTreeCheckpointer()` (PyTreeSave) of python str leaves (in `_strings.json`),
                  python int/float/bool scalars, an np.ndarray leaf (value_type np.ndarray).
  sharded/        StandardCheckpointer default (OCDBT + zarr2) of jax arrays on a 2x4 Mesh('x','y')
                  over the 8 CPU devices: xy f32[16,8] P('x','y'), x f32[16,8] P('x', None),
                  rep f32[16,8] P() (fully replicated), plus a bf16[8,4] P(None,'y').
  sharded_zarr3/  the same arrays with use_zarr3=True, and `fine` f32[16,8] P('x','y') with
                  chunk_byte_size=16 (Orbax then writes more, smaller zarr3 chunks: each chunk is
                  still its own `sharding_indexed` shard holding one inner chunk).
  multiprocess/   a real 2-process save (jax.distributed on 127.0.0.1, 4 CPU devices each,
                  gloo): one `ocdbt.process_N/` dir per process, `array_metadatas/process_N`.
  zarr2_plain/    use_ocdbt=False, use_zarr3=False: a dir per array, `.zarray`, chunk files `0.0`.
  zarr3_plain/    use_ocdbt=False, use_zarr3=True: a dir per array, `zarr.json`, `c/0/0`.
  ocdbt_zarr2/    PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=False) spelled out (= the
                  default; kept because the issue names it) with a bf16 and a multi-chunk array.
  omitted_fill/   OCDBT + zarr3 written with Orbax's STORE_ARRAY_DATA_EQUAL_TO_FILL_VALUE set to
                  False (monkeypatched; older Orbax versions wrote this way): chunks equal to the
                  fill value (0) are absent from the kvstore and `_METADATA` says so.  (zarr2
                  arrays have "fill_value": null, so Orbax stores their zero chunks anyway.)
  manager/        `ocp.CheckpointManager` with `args=ocp.args.StandardSave(state)` at steps 0,1,2
                  (w = step + arange(6)): `<step>/default/…`, `<step>/_CHECKPOINT_METADATA`.
  manager_composite/  CheckpointManager saving `ocp.args.Composite(state=StandardSave,
                  meta=JsonSave)` at steps 0,1,2: `<step>/state/…`, `<step>/meta/metadata`.
  v1/             the experimental v1 API `ocp.experimental.v1.save(path, tree)`: its
                  defaults are OCDBT + zarr3; the tree lands in `v1/state/`, next to an empty
                  `orbax.checkpoint` marker file.

expected.json, per fixture (per step for managers): "arrays" keyed by the pytree path joined
with "/" (list indices as numbers, `layers/0/w`): dtype (numpy name, `bfloat16`), shape,
sha256 of the C-order little-endian bytes Orbax's restore returns (restore_type=np.ndarray),
the first values, and "param" (the kvstore name Orbax uses, the path joined by ".");
"values": the non-array leaves as restored (python scalars, strings).  `values/*.npy` hold
the restored bytes of a few small arrays (bf16 stored as its uint16 bits, `*.bf16bits.npy`).
`keys.txt` (OCDBT fixtures): every key of the OCDBT kvstore listed by tensorstore, with the
size of its value.  fixtures/orbax/README.md documents the layouts.

  python3 -m venv /tmp/orbaxv && /tmp/orbaxv/bin/pip install jax jaxlib orbax-checkpoint \\
      tensorstore numpy ml_dtypes
  /tmp/orbaxv/bin/python scripts/gen_orbax.py [OUT]       (default fixtures/orbax)

CPU only; the multiprocess save talks to itself on 127.0.0.1 only.  Timestamps in
`_CHECKPOINT_METADATA`, the absolute path in `commit_success.txt` and the `d/` file names
(random) change from run to run; array bytes and expected.json do not.
"""
import os
import sys

if len(sys.argv) > 1 and sys.argv[1] == "--mp-worker":
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
else:
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"

import hashlib  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
import tensorstore as ts  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

# Without x64, JAX silently turns the int64/float64 leaves into int32/float32.
jax.config.update("jax_enable_x64", True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    return path


# ---------------------------------------------------------------- trees


def full_tree():
    bf16 = ml_dtypes.bfloat16
    return {
        "params": {
            "dense": {
                "kernel": jnp.asarray(np.arange(12, dtype=np.float32).reshape(4, 3) * 0.5 - 1),
                "bias": jnp.asarray(np.array([0.1, 0.2, 0.3], np.float32)),
            },
            "embed": jnp.asarray((np.arange(40, dtype=np.float32).reshape(10, 4) / 8 - 2).astype(bf16)),
        },
        "layers": [
            {"w": jnp.asarray(np.array([[1, 2], [3, 4]], np.float32))},
            {"w": jnp.asarray(np.array([[5, 6], [7, 8]], np.float32))},
        ],
        "step": jnp.asarray(np.int32(7)),
        "dtypes": {
            "f16": jnp.asarray(np.array([0.5, -1.25, 65504, 1e-4, 0], np.float16)),
            "f64": jnp.asarray(np.array([np.pi, -1e300, 2.5e-310], np.float64)),
            "i8": jnp.asarray(np.array([-128, -1, 0, 1, 127, 5], np.int8)),
            "i16": jnp.asarray(np.array([-32768, -2, 300, 32767], np.int16)),
            "i64": jnp.asarray(np.array([-(2**62), -1, 2**40 + 3, 7], np.int64)),
            "u8": jnp.asarray(np.array([0, 1, 200, 255], np.uint8)),
            "u32": jnp.asarray(np.array([0, 2**31 + 5, 2**32 - 1], np.uint32)),
            "bool": jnp.asarray(np.array([True, False, False, True, True])),
        },
        "zeros": jnp.zeros((64,), jnp.float32),
        "big": jnp.asarray(np.arange(256 * 64, dtype=np.float32).reshape(256, 64) / 7),
        "py_int": 42,
        "py_float": 0.25,
    }


def full_save_args(tree):
    args = jax.tree.map(lambda _: ocp.SaveArgs(), tree)
    args["big"] = ocp.SaveArgs(chunk_byte_size=4096)
    return args


def small_tree():
    t = full_tree()
    return {
        "params": t["params"],
        "layers": t["layers"],
        "step": t["step"],
        "zeros": t["zeros"],
        "big": t["big"],
        "i64": t["dtypes"]["i64"],
        "py_int": 42,
    }


def mesh8():
    return Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))


def sharded_tree(mesh):
    g = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) - 40
    h = (np.arange(32, dtype=np.float32).reshape(8, 4) / 4).astype(ml_dtypes.bfloat16)

    def put(a, spec):
        return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec), lambda idx: a[idx])

    return {
        "xy": put(g, P("x", "y")),
        "x": put(g * 2, P("x", None)),
        "rep": put(g * 3, P()),
        "bf16_y": put(h, P(None, "y")),
    }


# ---------------------------------------------------------------- expected


def leaf_name(path):
    parts = []
    for k in path:
        if isinstance(k, jax.tree_util.DictKey):
            parts.append(str(k.key))
        elif isinstance(k, jax.tree_util.SequenceKey):
            parts.append(str(k.idx))
        elif isinstance(k, jax.tree_util.GetAttrKey):
            parts.append(k.name)
        else:
            parts.append(str(k))
    return parts


def dtype_name(dt):
    return "bfloat16" if dt == ml_dtypes.bfloat16 else np.dtype(dt).name


def le_bytes(a):
    a = np.ascontiguousarray(a)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return a.tobytes()


def first_values(a, n=6):
    flat = np.asarray(a).ravel()[:n]
    if flat.dtype == ml_dtypes.bfloat16 or flat.dtype == np.float16:
        flat = flat.astype(np.float32)
    out = []
    for v in flat.tolist():
        out.append(v if not isinstance(v, float) or np.isfinite(v) else repr(v))
    return out


def restore_numpy(path, handler=None):
    """Orbax's own restore of a checkpoint dir, every array as np.ndarray."""
    ckptr = ocp.Checkpointer(handler or ocp.PyTreeCheckpointHandler())
    meta = ckptr.metadata(path).item_metadata.tree

    def arg(m):
        if isinstance(m, ocp.metadata.ScalarMetadata) or not isinstance(m, ocp.metadata.ArrayMetadata):
            return ocp.RestoreArgs()
        return ocp.RestoreArgs(restore_type=np.ndarray)

    restore_args = jax.tree.map(arg, meta)
    restored = ckptr.restore(path, args=ocp.args.PyTreeRestore(restore_args=restore_args))
    ckptr.close()
    return meta, restored


def expected_of(path, handler=None):
    meta, restored = restore_numpy(path, handler)
    flat_meta = dict(jax.tree_util.tree_flatten_with_path(meta)[0])
    arrays, values = {}, {}
    for kp, leaf in jax.tree_util.tree_flatten_with_path(restored)[0]:
        parts = leaf_name(kp)
        name = "/".join(parts)
        m = flat_meta.get(kp)
        kind = type(m).__name__
        if isinstance(leaf, np.ndarray) and not isinstance(m, ocp.metadata.ScalarMetadata):
            arrays[name] = {
                "dtype": dtype_name(leaf.dtype),
                "shape": list(leaf.shape),
                "sha256": hashlib.sha256(le_bytes(leaf)).hexdigest(),
                "first": first_values(leaf),
                "param": ".".join(parts),
            }
        else:
            v = leaf.item() if isinstance(leaf, (np.ndarray, np.generic)) else leaf
            entry = {"value": v, "python_type": type(v).__name__, "metadata": kind,
                     "param": ".".join(parts)}
            if isinstance(leaf, (np.ndarray, np.generic)):
                entry["restored_dtype"] = dtype_name(leaf.dtype)
            values[name] = entry
    return {"arrays": arrays, "values": values}, restored


def write_expected(dirpath, exp, writer, extra=None):
    doc = {"writer": writer, "versions": versions()}
    doc.update(extra or {})
    doc.update(exp)
    with open(os.path.join(dirpath, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")


def write_npy(dirpath, restored, names):
    flat = {"/".join(leaf_name(kp)): v for kp, v in jax.tree_util.tree_flatten_with_path(restored)[0]}
    vdir = os.path.join(dirpath, "values")
    os.makedirs(vdir, exist_ok=True)
    for name in names:
        a = np.ascontiguousarray(flat[name])
        fname = name.replace("/", "__")
        if a.dtype == ml_dtypes.bfloat16:
            np.save(os.path.join(vdir, fname + ".bf16bits.npy"), a.view(np.uint16))
        else:
            np.save(os.path.join(vdir, fname + ".npy"), a)


def write_keys(ckpt_dir, out_dir=None):
    """Every key of the OCDBT kvstore, as tensorstore lists it, with the size of its value."""
    kv = ts.KvStore.open({"driver": "ocdbt", "base": "file://" + os.path.abspath(ckpt_dir) + "/"}).result()
    # ckpt_dir may be damaged on purpose (fixtures/real/orbax): errors propagate to the caller
    lines = []
    for key in sorted(kv.list().result()):
        r = kv.read(key).result()
        lines.append(f"{key.decode()}\t{len(r.value)}")
        if key.endswith(b".zarray") or key.endswith(b"zarr.json"):
            lines.append("    " + r.value.decode())
    with open(os.path.join(out_dir or ckpt_dir, "keys.txt"), "w") as f:
        f.write("# key<TAB>value size, listed by tensorstore's ocdbt driver; metadata values indented\n")
        f.write("\n".join(lines) + "\n")


_VERSIONS = None


def versions():
    global _VERSIONS
    if _VERSIONS is None:
        from importlib.metadata import version

        _VERSIONS = {p: version(p) for p in
                     ["jax", "jaxlib", "orbax-checkpoint", "tensorstore", "numpy", "ml_dtypes"]}
        _VERSIONS["python"] = sys.version.split()[0]
    return _VERSIONS


# ---------------------------------------------------------------- fixtures


def gen_ocdbt(out):
    p = fresh(os.path.join(out, "ocdbt"))
    tree = full_tree()
    with ocp.StandardCheckpointer() as c:
        c.save(p, tree, save_args=full_save_args(tree))
    exp, restored = expected_of(p)
    write_expected(p, exp, "ocp.StandardCheckpointer().save(path, tree, save_args=...)  # big: SaveArgs(chunk_byte_size=4096)")
    write_npy(p, restored, ["params/dense/kernel", "params/embed", "dtypes/i64"])
    write_keys(p)


def gen_ocdbt_zarr3(out):
    p = fresh(os.path.join(out, "ocdbt_zarr3"))
    tree = full_tree()
    h = ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True)
    with ocp.Checkpointer(h) as c:
        c.save(p, args=ocp.args.PyTreeSave(tree, save_args=full_save_args(tree),
                                           ocdbt_target_data_file_size=16384))
    exp, restored = expected_of(p)
    write_expected(p, exp, "ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True))"
                   ".save(path, args=ocp.args.PyTreeSave(tree, save_args=..., ocdbt_target_data_file_size=16384))")
    write_npy(p, restored, ["params/dense/kernel", "params/embed"])
    write_keys(p)


def gen_strings(out):
    p = fresh(os.path.join(out, "strings"))
    tree = {
        "name": "hello",
        "nested": {"unicode": "Grüße, 世界", "empty": "", "n": -3, "f": 1e-3, "flag": True},
        "np_leaf": np.arange(5, dtype=np.int32),
        "jax_leaf": jnp.arange(3, dtype=jnp.float32),
    }
    with ocp.PyTreeCheckpointer() as c:
        c.save(p, args=ocp.args.PyTreeSave(tree))
    exp, _ = expected_of(p)
    write_expected(p, exp, "ocp.PyTreeCheckpointer().save(path, args=ocp.args.PyTreeSave(tree))")
    write_keys(p)


def gen_sharded(out, zarr3):
    name = "sharded_zarr3" if zarr3 else "sharded"
    p = fresh(os.path.join(out, name))
    mesh = mesh8()
    tree = sharded_tree(mesh)
    if zarr3:
        g = np.arange(16 * 8, dtype=np.float32).reshape(16, 8) + 0.5
        tree["fine"] = jax.make_array_from_callback(g.shape, NamedSharding(mesh, P("x", "y")), lambda i: g[i])
        save_args = jax.tree.map(lambda _: ocp.SaveArgs(), tree)
        save_args["fine"] = ocp.SaveArgs(chunk_byte_size=16)
        h = ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True)
        with ocp.Checkpointer(h) as c:
            c.save(p, args=ocp.args.PyTreeSave(tree, save_args=save_args))
        writer = ("ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_zarr3=True)).save(path, "
                  "args=ocp.args.PyTreeSave(tree, save_args=...))  # fine: SaveArgs(chunk_byte_size=16)")
    else:
        with ocp.StandardCheckpointer() as c:
            c.save(p, tree)
        writer = "ocp.StandardCheckpointer().save(path, tree)"
    exp, restored = expected_of(p)
    shardings = {k: {"spec": str(v.sharding.spec), "mesh": "2x4 ('x','y') over cpu:0..7",
                     "device_indices": {str(d.id): str(idx) for d, idx in
                                        sorted(v.sharding.devices_indices_map(v.shape).items(),
                                               key=lambda t: t[0].id)}}
                 for k, v in tree.items()}
    with open(os.path.join(p, "_sharding")) as f:
        raw = json.load(f)
    import base64

    decoded = {base64.b64decode(k).decode(): json.loads(v) for k, v in raw.items()}
    write_expected(p, exp, writer, {"shardings": shardings, "_sharding_decoded": decoded})
    write_npy(p, restored, ["xy"])
    write_keys(p)


def gen_plain(out, zarr3):
    name = "zarr3_plain" if zarr3 else "zarr2_plain"
    p = fresh(os.path.join(out, name))
    tree = small_tree()
    h = ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3=zarr3)
    with ocp.Checkpointer(h) as c:
        c.save(p, args=ocp.args.PyTreeSave(tree, save_args=full_save_args(tree)))
    exp, restored = expected_of(p)
    write_expected(p, exp, f"ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=False, use_zarr3={zarr3}))"
                   ".save(path, args=ocp.args.PyTreeSave(tree, save_args=...))  # big: chunk_byte_size=4096")
    write_npy(p, restored, ["params/embed"])


def gen_ocdbt_zarr2(out):
    p = fresh(os.path.join(out, "ocdbt_zarr2"))
    tree = small_tree()
    h = ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=False)
    with ocp.Checkpointer(h) as c:
        c.save(p, args=ocp.args.PyTreeSave(tree, save_args=full_save_args(tree)))
    exp, _ = expected_of(p)
    write_expected(p, exp, "ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=False))"
                   ".save(path, args=ocp.args.PyTreeSave(tree, save_args=...))")
    write_keys(p)


def gen_omitted_fill(out):
    from orbax.checkpoint._src.serialization import tensorstore_utils as ts_utils

    p = fresh(os.path.join(out, "omitted_fill"))
    mesh = mesh8()
    g = np.zeros((8, 8), np.float32)
    g[6:, :] = np.arange(16, dtype=np.float32).reshape(2, 8) + 1
    h = np.zeros((8, 8), np.float32)
    h[0, 0] = 5
    tree = {
        "zeros": jnp.zeros((64,), jnp.float32),
        "bf16_zeros": jnp.zeros((4, 4), jnp.bfloat16),
        # shards of rows 0-3 and 4-7; inner chunks of 2 rows: the first shard is all zero (its
        # key is absent), the second has one zero inner chunk (absent from the shard index)
        "mostly_zero": jax.make_array_from_callback(g.shape, NamedSharding(mesh, P("x", None)), lambda i: g[i]),
        "single": jnp.asarray(h),
    }
    save_args = jax.tree.map(lambda _: ocp.SaveArgs(), tree)
    save_args["mostly_zero"] = ocp.SaveArgs(chunk_byte_size=64)
    save_args["single"] = ocp.SaveArgs(chunk_byte_size=64)
    old = ts_utils.STORE_ARRAY_DATA_EQUAL_TO_FILL_VALUE
    ts_utils.STORE_ARRAY_DATA_EQUAL_TO_FILL_VALUE = False
    try:
        h = ocp.PyTreeCheckpointHandler(use_ocdbt=True, use_zarr3=True)
        with ocp.Checkpointer(h) as c:
            c.save(p, args=ocp.args.PyTreeSave(tree, save_args=save_args))
    finally:
        ts_utils.STORE_ARRAY_DATA_EQUAL_TO_FILL_VALUE = old
    exp, _ = expected_of(p)
    write_expected(p, exp, "ocp.Checkpointer(ocp.PyTreeCheckpointHandler(use_zarr3=True)).save(path, "
                   "args=ocp.args.PyTreeSave(tree, save_args=...)) with orbax.checkpoint._src.serialization."
                   "tensorstore_utils.STORE_ARRAY_DATA_EQUAL_TO_FILL_VALUE = False")
    write_keys(p)


def manager_state(step):
    return {"w": jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3) + step),
            "opt": {"count": jnp.asarray(np.int32(step * 10))}}


def gen_manager(out, composite):
    name = "manager_composite" if composite else "manager"
    p = fresh(os.path.join(out, name))
    opts = ocp.CheckpointManagerOptions(max_to_keep=5, create=True)
    with ocp.CheckpointManager(p, options=opts) as mngr:
        for step in range(3):
            st = manager_state(step)
            if composite:
                args = ocp.args.Composite(state=ocp.args.StandardSave(st),
                                          meta=ocp.args.JsonSave({"step": step, "lr": 0.1 / (step + 1)}))
            else:
                args = ocp.args.StandardSave(st)
            mngr.save(step, args=args)
        mngr.wait_until_finished()
        steps = list(mngr.all_steps())
    item = "state" if composite else "default"
    per_step = {}
    for step in steps:
        exp, _ = expected_of(os.path.join(p, str(step), item))
        if composite:
            with open(os.path.join(p, str(step), "meta", "metadata")) as f:
                exp["meta_json"] = json.load(f)
        per_step[str(step)] = exp
    writer = ("ocp.CheckpointManager(path, options=ocp.CheckpointManagerOptions(max_to_keep=5, create=True))"
              + (".save(step, args=ocp.args.Composite(state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave({...})))"
                 if composite else ".save(step, args=ocp.args.StandardSave(state))"))
    write_expected(p, {"steps": per_step}, writer, {"item_dir": item, "all_steps": steps})


def gen_v1(out):
    import orbax.checkpoint.experimental.v1 as ocp1

    p = fresh(os.path.join(out, "v1"))
    tree = small_tree()
    del tree["big"]
    ocp1.save(p, tree)
    sub = [d for d in os.listdir(p) if os.path.isdir(os.path.join(p, d))]
    assert len(sub) == 1, sub
    exp, _ = expected_of(os.path.join(p, sub[0]))
    write_expected(p, exp, "ocp.experimental.v1.save(path, tree)", {"item_dir": sub[0]})
    write_keys(os.path.join(p, sub[0]))


def mp_worker(pid, port, path):
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid)
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    tree = sharded_tree(mesh)
    with ocp.StandardCheckpointer() as c:
        c.save(path, tree)
    jax.distributed.shutdown()


def gen_multiprocess(out):
    p = fresh(os.path.join(out, "multiprocess"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--mp-worker", str(i), str(port), p],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(2)]
    for pr in procs:
        _, err = pr.communicate(timeout=300)
        if pr.returncode:
            sys.stderr.write(err.decode()[-3000:])
            raise SystemExit(f"multiprocess worker failed: {pr.returncode}")
    exp, restored = expected_of(p)
    write_expected(p, exp, "2 processes x 4 CPU devices (jax.distributed.initialize on 127.0.0.1), "
                   "2x4 Mesh('x','y'), ocp.StandardCheckpointer().save(path, tree) in each")
    write_keys(p)


def main():
    if sys.argv[1:2] == ["--mp-worker"]:
        mp_worker(int(sys.argv[2]), sys.argv[3], sys.argv[4])
        return
    out = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "fixtures", "orbax"))
    assert jax.device_count() == 8, jax.devices()
    only = set(os.environ.get("ONLY", "").split(",")) - {""}
    gens = {
        "ocdbt": lambda: gen_ocdbt(out),
        "ocdbt_zarr3": lambda: gen_ocdbt_zarr3(out),
        "strings": lambda: gen_strings(out),
        "sharded": lambda: gen_sharded(out, False),
        "sharded_zarr3": lambda: gen_sharded(out, True),
        "multiprocess": lambda: gen_multiprocess(out),
        "zarr2_plain": lambda: gen_plain(out, False),
        "zarr3_plain": lambda: gen_plain(out, True),
        "ocdbt_zarr2": lambda: gen_ocdbt_zarr2(out),
        "omitted_fill": lambda: gen_omitted_fill(out),
        "manager": lambda: gen_manager(out, False),
        "manager_composite": lambda: gen_manager(out, True),
        "v1": lambda: gen_v1(out),
    }
    for name, gen in gens.items():
        if not only or name in only:
            print("writing", name, flush=True)
            gen()


if __name__ == "__main__":
    main()
