#!/usr/bin/env python3
"""Writes the PyTorch Distributed Checkpoint fixtures (issue 73) with the real
`torch.distributed.checkpoint` writer, and what torch's own reader returns from them
(fixtures/dcp/expected.json), so that tests need no torch.

  single/       `dcp.save(no_dist=True)` of a nested state dict (`model`, `optim`, `extra`):
                every common dtype, a 0-d and an empty tensor, a transposed view, plain values
                (BytesIO items), a list of tensors; FileSystemWriter(thread_count=2), so two
                `__0_N.distcp` files.
  multi/        a real 4-process save (gloo, CPU): DTensors sharded Shard(0) with an uneven
                first dim, on a 2x2 mesh (Shard(0), Shard(1)), Replicate() (deduplicated), a
                plain replicated tensor and per-rank plain values. `.metadata` + `__R_0.distcp`.
  rank_local/   the same 4 ranks saved with `use_collectives=False`: no global `.metadata`,
                one `__R.metadata` per rank, each describing only that rank's items.
  zstd/         `single`'s state dict with the `stream.zstd` transform (`_extensions=[ZStandard()]`).
  safetensors/  `HuggingFaceStorageWriter`: `model-00001-of-00001.safetensors` +
                `model.safetensors.index.json` (weight map), no `.metadata`, read back by `HuggingFaceStorageReader`.
  safetensors_fs/  FileSystemWriter(serialization_format=SAFETENSORS): a pickled `.metadata`
                and `__0_0.distcp` that is a safetensors file (torch's FileSystemReader cannot
                read it back; expected.json says what happened).
  hostile/      copies of `single/` damaged by hand, never loaded by torch or pickle:
                pickle_reduce (`.metadata` calls os.system), path_dotdot / path_absolute (one
                `_StorageInfo.relative_path` is `../../etc/passwd` / `/etc/passwd`),
                flipped_byte (one byte of a tensor's zip member flipped: its CRC-32 fails),
                truncated (a `.distcp` cut short inside its last item).

expected.json, per fixture: the `.metadata` as data (state_dict_metadata, storage_data,
planner_data, version, pickle protocol, the classes its pickle names), and what torch reads back
(`dcp_to_torch_save` + `torch.load(weights_only=False)`, or `dcp.load` for safetensors), keyed by
DCP's own flattened names ("." joins): per tensor dtype, shape and the sha256 of its row-major
little-endian element bytes (bf16 as its 2-byte words); per plain value its JSON (or repr).

  /tmp/torchv/bin/python scripts/gen_dcp.py [OUT]        (default fixtures/dcp)

(a venv with `pip install torch numpy zstandard safetensors`; CPU only, loopback only)
"""
import dataclasses
import hashlib
import io
import json
import os
import pickle
import pickletools
import shutil
import socket
import sys
import tempfile
import zipfile

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader, FileSystemWriter
from torch.distributed.checkpoint._nested_dict import flatten_state_dict
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
from torch.distributed.checkpoint.metadata import BytesStorageMetadata, TensorStorageMetadata

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "dcp")
MARKER = "/tmp/modelfs-hostile-pickle-ran"
WORLD = 4


def gen(seed):
    return torch.Generator().manual_seed(seed)


def rnd(shape, dtype, g):
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=torch.float32 if not dtype.is_complex
                           else dtype).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -2**62), min(info.max, 2**62), shape, generator=g,
                         dtype=torch.int64).to(dtype)


def single_state_dict():
    g = gen(73)
    base = rnd((6, 4), torch.float32, g)
    return {
        "model": {
            "embed.weight": rnd((16, 8), torch.float32, g),
            "layer1": {"weight": rnd((8, 8), torch.float16, g),
                       "bias": rnd((8,), torch.bfloat16, g)},
            "layer2.weight": rnd((3, 5), torch.float64, g),
            "q.int8": rnd((4, 4), torch.int8, g),
            "q.uint8": rnd((7,), torch.uint8, g),
            "i16": rnd((2, 3), torch.int16, g),
            "i32": rnd((5,), torch.int32, g),
            "i64": rnd((2, 2, 2), torch.int64, g),
            "mask": rnd((9,), torch.bool, g),
            "c64": rnd((3,), torch.complex64, g),
            "scalar": torch.tensor(3.5, dtype=torch.float32),
            "empty": torch.zeros((0, 4), dtype=torch.float32),
            # A non-contiguous view: DCP's chunk is torch.save of the view itself.
            "transposed": base.t(),
            "blocks": [rnd((2,), torch.float32, g), rnd((3,), torch.float32, g)],
        },
        "optim": {
            "state": {"0": {"step": torch.tensor(10.0), "exp_avg": rnd((16, 8), torch.float32, g)}},
            "param_groups": [{"lr": 0.001, "betas": [0.9, 0.999], "params": [0, 1],
                              "name": "default"}],
        },
        "extra": {
            "epoch": 7,
            "loss": 0.125,
            "name": "run-73",
            "tags": ["a", "b", 3],
            "nested": {"deep": {"flag": True, "none": None}},
            "config": {"sizes": [1, 2, 3]},
        },
    }


# ----------------------------------------------------------------------------- expectations

def sha_of(t):
    t = t.detach().contiguous().reshape(-1)
    raw = t.view(torch.uint8) if t.numel() else b""
    return hashlib.sha256(raw.numpy().tobytes() if t.numel() else raw).hexdigest()


def dtype_name(dt):
    return str(dt).removeprefix("torch.")


def plain(v):
    try:
        json.dumps(v)
        return {"value": v}
    except TypeError:
        return {"repr": repr(v)}


def region(t, offsets, sizes):
    for dim, (o, n) in enumerate(zip(offsets, sizes)):
        t = t.narrow(dim, o, n)
    return t


def read_back(sd, chunks_of=None, whole=True):
    """Flattened as DCP flattens (its own function), tensors as dtype/shape/sha256 (and, given
    the metadata's chunks, the sha256 of the region each chunk covers)."""
    flat, _ = flatten_state_dict(sd)
    out = {}
    for k, v in flat.items():
        if isinstance(v, torch.Tensor):
            out[k] = {"dtype": dtype_name(v.dtype), "shape": list(v.shape)}
            if whole:
                out[k]["sha256"] = sha_of(v)
            if chunks_of and k in chunks_of:
                out[k]["chunks"] = [dict(c, sha256=sha_of(region(v, c["offsets"], c["sizes"])))
                                    for c in chunks_of[k]]
        else:
            out[k] = plain(v)
    return out


def torch_reads(d, md=None, whole=True):
    """torch's own path: dcp_to_torch_save to a file, torch.load of it."""
    chunks = md and {k: v["chunks"] for k, v in md["state_dict_metadata"].items()
                     if "chunks" in v}
    with tempfile.TemporaryDirectory() as tmp:
        p = os.path.join(tmp, "c.pt")
        dcp_to_torch_save(d, p)
        return read_back(torch.load(p, weights_only=False), chunks, whole)


class Recorder(pickle.Unpickler):
    """Our own good files only: records the globals the pickle names."""

    def __init__(self, f):
        super().__init__(f)
        self.seen = set()

    def find_class(self, module, name):
        self.seen.add(f"{module}.{name}")
        return super().find_class(module, name)


def item_bytes(d, sinfo):
    with open(os.path.join(d, sinfo.relative_path), "rb") as f:
        f.seek(sinfo.offset)
        blob = f.read(sinfo.length)
    for desc in reversed(sinfo.transform_descriptors or ()):
        assert desc == "stream.zstd/1", desc
        import zstandard
        blob = zstandard.ZstdDecompressor().decompressobj().decompress(blob)
    return blob


def item_read(d, sinfo, is_bytes):
    """One storage item as torch's FileSystemReader reads it: its (decoded) bytes torch.load'ed
    (weights_only for tensors, as torch does; False for BytesIO items, as the planner does)."""
    blob = item_bytes(d, sinfo)
    out = {"kind": "zip" if blob[:4] == b"PK\x03\x04" else blob[:4].hex(),
           "decoded_length": len(blob)}
    if out["kind"] != "zip":
        return out
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        out["zip_members"] = [i.filename for i in z.infolist()]
    v = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=not is_bytes)
    if isinstance(v, torch.Tensor):
        out.update(dtype=dtype_name(v.dtype), shape=list(v.shape), stride=list(v.stride()),
                   storage_offset=v.storage_offset(), sha256=sha_of(v))
    else:
        out.update(plain(v))
    return out


def size(s):
    return None if s is None else list(s)


def describe_metadata(d, name=".metadata"):
    path = os.path.join(d, name)
    raw = open(path, "rb").read()
    proto = next(arg for op, arg, _ in pickletools.genops(raw) if op.name == "PROTO")
    r = Recorder(io.BytesIO(raw))
    md = r.load()
    sdm = {}
    for k, v in md.state_dict_metadata.items():
        if isinstance(v, TensorStorageMetadata):
            p = v.properties
            sdm[k] = {"type": "TensorStorageMetadata", "dtype": dtype_name(p.dtype),
                      "size": list(v.size), "strides": size(p.strides),
                      "requires_grad": p.requires_grad,
                      "chunks": [{"offsets": list(c.offsets), "sizes": list(c.sizes)}
                                 for c in v.chunks]}
        else:
            assert isinstance(v, BytesStorageMetadata), v
            sdm[k] = {"type": "BytesStorageMetadata"}
    storage = []
    for idx, s in md.storage_data.items():
        storage.append({"fqn": idx.fqn, "index_offset": size(idx.offset), "index": idx.index,
                        "relative_path": s.relative_path, "offset": s.offset,
                        "length": s.length,
                        "transform_descriptors": None if s.transform_descriptors is None
                        else list(s.transform_descriptors),
                        **item_read(d, s, isinstance(md.state_dict_metadata[idx.fqn],
                                                     BytesStorageMetadata))})
    storage.sort(key=lambda e: (e["relative_path"], e["offset"]))
    planner = md.planner_data
    if isinstance(planner, dict):
        planner = {k: list(v) for k, v in planner.items()}
    else:
        planner = plain(planner)
    sm = md.storage_meta
    return {"file": name, "pickle_protocol": proto, "classes": sorted(r.seen),
            "version": md.version, "state_dict_metadata": sdm, "storage_data": storage,
            "planner_data": planner,
            "storage_meta": None if sm is None else {
                "checkpoint_id": str(sm.checkpoint_id) if sm.checkpoint_id else None,
                "save_id": sm.save_id, "load_id": sm.load_id, "modules": sm.modules}}


def files_of(d):
    return {f: os.path.getsize(os.path.join(d, f)) for f in sorted(os.listdir(d))}


# ----------------------------------------------------------------------------- fixtures

def fresh(d):
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def save_single(d, **kw):
    dcp.save(single_state_dict(), storage_writer=FileSystemWriter(fresh(d), **kw), no_dist=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def multi_rank(rank, port, out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    mesh = init_device_mesh("cpu", (WORLD,))
    mesh2 = init_device_mesh("cpu", (2, 2))
    g = gen(7300)  # same on every rank: the full tensors agree
    rows = rnd((10, 6), torch.float32, g)
    grid = rnd((5, 7), torch.bfloat16, g)
    rep = rnd((3, 3), torch.float64, g)
    sd = {
        "model": {
            "rows": distribute_tensor(rows, mesh, [Shard(0)]),
            "grid": distribute_tensor(grid, mesh2, [Shard(0), Shard(1)]),
            "rep": distribute_tensor(rep, mesh, [Replicate()]),
            "plain": torch.arange(4, dtype=torch.int32),
        },
        "extra": {"step": 42, f"rank{rank}": {"seen": rank * 10, "who": f"rank {rank}"}},
    }
    dcp.save(sd, checkpoint_id=os.path.join(out, "multi"))
    dist.barrier()
    dcp.save(sd, checkpoint_id=os.path.join(out, "rank_local"), use_collectives=False)
    dist.barrier()
    from torch.distributed.checkpoint import HuggingFaceStorageWriter
    # Every rank writes its own shards' safetensors file; no index, no .metadata.
    dcp.save({"model": sd["model"]},
             storage_writer=HuggingFaceStorageWriter(os.path.join(out, "safetensors_multi"),
                                                     save_distributed=True))
    dist.barrier()
    dist.destroy_process_group()


def gen_multi():
    import torch.multiprocessing as mp
    for n in ("multi", "rank_local", "safetensors_multi"):
        fresh(os.path.join(OUT, n))
    mp.spawn(multi_rank, args=(free_port(), OUT), nprocs=WORLD, join=True)


def gen_safetensors():
    from torch.distributed.checkpoint import HuggingFaceStorageReader, HuggingFaceStorageWriter
    g = gen(7301)
    sd = {"model.embed.weight": rnd((16, 8), torch.float32, g),
          "model.norm.weight": rnd((8,), torch.bfloat16, g),
          "model.head.weight": rnd((4, 8), torch.float16, g),
          "model.steps": rnd((3,), torch.int64, g)}
    d = fresh(os.path.join(OUT, "safetensors"))
    dcp.save(sd, storage_writer=HuggingFaceStorageWriter(d), no_dist=True)
    reads = hf_reads(d)
    d2 = fresh(os.path.join(OUT, "safetensors_fs"))
    dcp.save(sd, storage_writer=FileSystemWriter(
        d2, serialization_format=dcp.filesystem.SerializationFormat.SAFETENSORS), no_dist=True)
    try:
        fs_reads = torch_reads(d2)
    except BaseException as e:  # CheckpointException is a BaseException; recorded as is
        if isinstance(e, KeyboardInterrupt):
            raise
        fs_reads = {"error": f"{type(e).__name__}: " + " | ".join(
            l for l in str(e).splitlines() if "Error" in l or "error" in l)[:400]}
    return reads, fs_reads


def hf_reads(d):
    """torch's HuggingFaceStorageReader: its metadata (from the safetensors headers) gives the
    full sizes; dcp.load fills empty tensors of them."""
    from torch.distributed.checkpoint import HuggingFaceStorageReader
    md = HuggingFaceStorageReader(d).read_metadata()
    back = {k: torch.empty(v.size, dtype=v.properties.dtype)
            for k, v in md.state_dict_metadata.items()}
    dcp.load(back, storage_reader=HuggingFaceStorageReader(d), no_dist=True)
    chunks = {k: [{"offsets": list(c.offsets), "sizes": list(c.sizes)} for c in v.chunks]
              for k, v in md.state_dict_metadata.items()}
    return read_back(back, chunks)


def safetensors_files(d):
    """Each file's safetensors header (its __metadata__ holds DCP's saved_offsets) and what the
    safetensors package reads from it."""
    from safetensors import safe_open
    out = {}
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        with open(p, "rb") as fh:
            if f.startswith(".") or f.endswith(".json"):
                continue
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
        with safe_open(p, framework="pt") as st:
            tensors = {k: {"dtype": dtype_name(st.get_tensor(k).dtype),
                           "shape": list(st.get_tensor(k).shape),
                           "sha256": sha_of(st.get_tensor(k))} for k in st.keys()}
        out[f] = {"header": header, "tensors": tensors}
    return out


def zip_member_data(d, sinfo, member_suffix):
    """Absolute file offset of `member_suffix`'s stored bytes inside the item's torch.save zip."""
    with open(os.path.join(d, sinfo.relative_path), "rb") as f:
        f.seek(sinfo.offset)
        blob = f.read(sinfo.length)
    with zipfile.ZipFile(io.BytesIO(blob)) as z:
        info = next(i for i in z.infolist() if i.filename.endswith(member_suffix))
    h = info.header_offset
    assert blob[h:h + 4] == b"PK\x03\x04"
    start = h + 30 + int.from_bytes(blob[h + 26:h + 28], "little") + \
        int.from_bytes(blob[h + 28:h + 30], "little")
    return sinfo.offset + start, info.file_size


def gen_hostile():
    src = os.path.join(OUT, "single")
    good = open(os.path.join(src, ".metadata"), "rb").read()
    proto = next(arg for op, arg, _ in pickletools.genops(good) if op.name == "PROTO")
    md = pickle.loads(good)  # our own file, just written by torch
    notes = {}

    def copy(name):
        d = os.path.join(OUT, "hostile", name)
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(src, d)
        return d

    # (a) GLOBAL posix.system + REDUCE: unpickling it would run the command.
    cmd = f"touch {MARKER}".encode()
    evil = (b"\x80" + bytes([proto]) + b"cposix\nsystem\n(X" + len(cmd).to_bytes(4, "little")
            + cmd + b"tR.")
    open(os.path.join(copy("pickle_reduce"), ".metadata"), "wb").write(evil)
    notes["pickle_reduce"] = {"metadata_calls": "posix.system", "argument": cmd.decode(),
                              "marker": MARKER}

    target = "model.embed.weight"
    for name, rel in (("path_dotdot", "../../etc/passwd"), ("path_absolute", "/etc/passwd")):
        m = pickle.loads(good)
        (idx,) = [i for i in m.storage_data if i.fqn == target]
        m.storage_data[idx] = dataclasses.replace(m.storage_data[idx], relative_path=rel)
        open(os.path.join(copy(name), ".metadata"), "wb").write(pickle.dumps(m, protocol=proto))
        notes[name] = {"fqn": target, "relative_path": rel}

    (idx,) = [i for i in md.storage_data if i.fqn == target]
    s = md.storage_data[idx]
    at, n = zip_member_data(src, s, "/data/0")
    d = copy("flipped_byte")
    p = os.path.join(d, s.relative_path)
    b = bytearray(open(p, "rb").read())
    at += n // 2
    b[at] ^= 0x01
    open(p, "wb").write(bytes(b))
    notes["flipped_byte"] = {"fqn": target, "file": s.relative_path, "file_offset": at,
                             "xor": 1, "member": "data/0"}

    # Cut the file holding the last item in the middle of that item.
    last = max(md.storage_data.items(), key=lambda kv: kv[1].offset)
    s = last[1]
    d = copy("truncated")
    p = os.path.join(d, s.relative_path)
    cut = s.offset + s.length // 2
    os.truncate(p, cut)
    notes["truncated"] = {"fqn": last[0].fqn, "file": s.relative_path, "truncated_to": cut,
                          "item_offset": s.offset, "item_length": s.length}
    for k in notes:
        notes[k]["files"] = files_of(os.path.join(OUT, "hostile", k))
    # What torch itself does with the damaged data files (their .metadata is torch's own).
    for k in ("flipped_byte", "truncated"):
        try:
            notes[k]["torch_reads"] = torch_reads(os.path.join(OUT, "hostile", k))
        except BaseException as e:  # CheckpointException is a BaseException
            if isinstance(e, KeyboardInterrupt):
                raise
            notes[k]["torch_error"] = type(e).__name__ + ": " + " | ".join(
                ln.strip() for ln in str(e).splitlines() if "Error" in ln)[:400]
    return notes


def main():
    global OUT
    os.makedirs(OUT, exist_ok=True)
    # Relative paths: `storage_meta.checkpoint_id` (a PosixPath in .metadata) names no host dir.
    os.chdir(OUT)
    OUT = "."
    expected = {"torch": torch.__version__, "fixtures": {}}
    fx = expected["fixtures"]

    save_single(os.path.join(OUT, "single"), thread_count=2)
    from torch.distributed.checkpoint._extension import ZStandard
    save_single(os.path.join(OUT, "zstd"), _extensions=[ZStandard()])
    gen_multi()
    for name in ("single", "zstd", "multi"):
        d = os.path.join(OUT, name)
        md = describe_metadata(d)
        fx[name] = {"files": files_of(d), "metadata": [md], "reads": torch_reads(d, md)}
        assert set(fx[name]["reads"]) == set(fx[name]["metadata"][0]["state_dict_metadata"]), name

    d = os.path.join(OUT, "rank_local")
    mds = sorted(f for f in os.listdir(d) if f.endswith(".metadata"))
    fx["rank_local"] = {
        "files": files_of(d), "metadata": [describe_metadata(d, f) for f in mds],
        # no_dist reads as rank 0: with no global .metadata torch falls back to __0.metadata,
        # so this is rank 0's part only, the rest of each tensor torch.empty's memory.
        "reads": torch_reads(d, describe_metadata(d, "__0.metadata"), whole=False),
        "reads_note": "dcp_to_torch_save (no_dist, rank 0) falls back to __0.metadata: only the "
        "items rank 0 saved; a tensor's elements outside rank 0's chunks are uninitialized "
        "(torch.empty), so only the chunks' regions are recorded. Every rank's items as torch "
        "loads them: metadata[i].storage_data"}

    hf, hf_fs = gen_safetensors()
    d = os.path.join(OUT, "safetensors")
    fx["safetensors"] = {"files": files_of(d), "index_json": {
        f: json.load(open(os.path.join(d, f))) for f in os.listdir(d) if f.endswith(".json")},
        "reads": hf,
        "reads_note": "dcp.load(storage_reader=HuggingFaceStorageReader) into empty_like "
                      "tensors (it reads the .safetensors headers, not the index)"}
    fx["safetensors"]["safetensors"] = safetensors_files(d)
    d = os.path.join(OUT, "safetensors_fs")
    fx["safetensors_fs"] = {"files": files_of(d), "metadata": [describe_metadata(d)],
                            "reads": hf_fs, "safetensors": safetensors_files(d),
                            "reads_note": "torch's FileSystemReader cannot read this back (it "
                            "torch.loads each item's slice); storage_data offsets are not where "
                            "the data is: the .distcp is one safetensors file"}
    d = os.path.join(OUT, "safetensors_multi")
    fx["safetensors_multi"] = {"files": files_of(d), "reads": hf_reads(d),
                               "safetensors": safetensors_files(d),
                               "reads_note": "4 ranks, HuggingFaceStorageWriter(save_distributed="
                               "True); read by dcp.load(HuggingFaceStorageReader), no_dist"}

    expected["hostile"] = gen_hostile()
    assert not os.path.exists(MARKER)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
    for k, v in fx.items():
        print(k, v["files"], len(v["reads"]))


if __name__ == "__main__":
    main()
