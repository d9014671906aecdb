"""Bench target 14: sources of the newer readers at production size (issue 41) — a 1 GiB
safetensors model in four shards with its index (written by the `safetensors` package), a
1 GiB `.npz` written by `np.savez` and a 1 GiB `torch.save` checkpoint (written by torch,
TORCH_PYTHON): how long a mount takes and what it reads (it must read no tensor data), and
`cat` of a tensor's `.bin` on a fresh mount against reading the same bytes of the file (page
cache warm for both); and TensorFlow (TF_PYTHON) reading the `.tf/` view of the PyTorch
checkpoint, compared with `torch.load`'s values by SHA-256 per tensor.
"""
import json
import os
import subprocess
import time

MiB = 1 << 20


def generate(work):
    import numpy as np
    from safetensors.numpy import save_file
    rng = np.random.default_rng(14)
    st = os.path.join(work, "st")
    os.makedirs(st, exist_ok=True)
    weight_map, total = {}, 0
    for s in range(4):
        name = f"model-{s + 1:05d}-of-00004.safetensors"
        tensors = {f"layers.{s * 8 + i}.weight": rng.standard_normal((2048, 4096), dtype=np.float32)
                   for i in range(8)}  # 8 x 32 MiB a shard
        save_file(tensors, os.path.join(st, name), metadata={"format": "pt"})
        for k, v in tensors.items():
            weight_map[k] = name
            total += v.nbytes
    with open(os.path.join(st, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
    arrays = {f"a{i}": rng.standard_normal((2048, 4096), dtype=np.float32) for i in range(32)}
    np.savez(os.path.join(work, "arrays.npz"), **arrays)


TORCH_GEN = r"""
import hashlib, json, sys, torch
out = sys.argv[1]
g = torch.Generator().manual_seed(14)
sd = {f"layers.{i}.weight": torch.randn(2048, 4096, generator=g) for i in range(32)}
sd["head.weight"] = torch.randn(4096, 512, generator=g).t()  # a transposed view, [512, 4096]
torch.save(sd, out + "/model.pt")
# The same state dict in the legacy format (torch < 1.6, `_use_new_zipfile_serialization=False`).
torch.save(sd, out + "/model_legacy.pt", _use_new_zipfile_serialization=False)
back = torch.load(out + "/model.pt", weights_only=True)
json.dump({k: hashlib.sha256(v.contiguous().numpy().tobytes()).hexdigest() for k, v in back.items()},
          open(out + "/torch_sha256.json", "w"))
"""

TF_READ = r"""
import hashlib, json, sys
import tensorflow as tf
r = tf.train.load_checkpoint(sys.argv[1])
want = json.load(open(sys.argv[2]))
got = {k: hashlib.sha256(r.get_tensor(k).tobytes()).hexdigest() for k in want}
bad = [k for k in want if got[k] != want[k]]
print(json.dumps({"tensors": len(want), "differ": bad}))
"""


def read_range(path, off, n):
    fd = os.open(path, os.O_RDONLY)
    try:
        t = time.perf_counter()
        while n > 0:
            b = os.pread(fd, min(n, 1 * MiB), off)
            if not b:
                raise SystemExit(f"{path}: short read")
            off += len(b)
            n -= len(b)
        return time.perf_counter() - t
    finally:
        os.close(fd)


def st_range(path, key):
    """Where `key`'s bytes are in the safetensors file `path`."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        h = json.loads(f.read(n))
    b, e = h[key]["data_offsets"]
    return 8 + n + b, e - b


def torch_range(path, storage):
    """Where storage `storage`'s bytes are in the torch.save zip `path`."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        i = next(x for x in z.infolist() if x.filename.endswith(f"/data/{storage}"))
    with open(path, "rb") as f:
        f.seek(i.header_offset + 26)
        nlen, xlen = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
    return i.header_offset + 30 + nlen + xlen, i.file_size


def npz_range(path, key):
    import zipfile
    with zipfile.ZipFile(path) as z:
        i = z.getinfo(key + ".npy")
    with open(path, "rb") as f:
        f.seek(i.header_offset + 26)
        nlen, xlen = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
        start = i.header_offset + 30 + nlen + xlen
        f.seek(start)
        head = f.read(10)
        hlen = 10 + int.from_bytes(head[8:10], "little")
    return start + hlen, i.file_size - hlen


def source_files(src):
    return [os.path.join(src, f) for f in sorted(os.listdir(src))] if os.path.isdir(src) else [src]


def evict(src):
    """Drops the source's pages from the page cache."""
    for p in source_files(src):
        fd = os.open(p, os.O_RDONLY)
        try:
            # Dirty pages (a fixture just generated) are not dropped: write them first.
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def resident(src):
    """Bytes of the source in the page cache (fincore): after `evict`, what a mount read, in
    pages, with the kernel's read-ahead around each read. (The daemon's own counters miss the
    reads of the open, which happens before it forks.)"""
    total = 0
    for p in source_files(src):
        out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", p],
                             check=True, capture_output=True, text=True).stdout
        total += int(out.split()[0])
    return total


def bench_sources(ctx):
    work = os.path.join(ctx.WORK, "sources")
    if not os.path.exists(os.path.join(work, "arrays.npz")):
        ctx.log("generating a 1 GiB sharded safetensors model and a 1 GiB .npz (once)")
        os.makedirs(work, exist_ok=True)
        generate(work)
    st = os.path.join(work, "st")
    npz = os.path.join(work, "arrays.npz")
    subprocess.run(["sh", "-c", f"cat {st}/* {npz} > /dev/null"], check=True)
    shard = os.path.join(st, "model-00002-of-00004.safetensors")
    cases = [("sharded safetensors (1 GiB, 4 shards)", st, "layers.12.weight", shard,
              st_range(shard, "layers.12.weight")),
             ("np.savez .npz (1 GiB)", npz, "a12", npz, npz_range(npz, "a12"))]
    torch_py = os.environ.get("TORCH_PYTHON", "python3")
    pt = os.path.join(work, "torch", "model.pt")
    legacy = os.path.join(work, "torch", "model_legacy.pt")
    if not os.path.exists(legacy):
        if subprocess.run([torch_py, "-c", "import torch"], capture_output=True).returncode == 0:
            ctx.log("generating a 1 GiB torch.save checkpoint (once)")
            os.makedirs(os.path.dirname(pt), exist_ok=True)
            subprocess.run([torch_py, "-c", TORCH_GEN, os.path.dirname(pt)], check=True)
        else:
            ctx.add(14, "torch.save checkpoint", "skipped: TORCH_PYTHON lacks torch", "", None)
    if os.path.exists(pt):
        subprocess.run(["cat", pt], check=True, stdout=subprocess.DEVNULL)
        # layers.12.weight is the 13th tensor pickled: storage 12.
        cases.append(("torch.save checkpoint (1 GiB)", pt, "layers.12.weight", pt,
                      torch_range(pt, 12)))
    if os.path.exists(legacy):
        subprocess.run(["cat", legacy], check=True, stdout=subprocess.DEVNULL)
    cat_medians = {}
    for name, src, key, file, (off, n) in cases:
        mounts, reads, cats, files = [], [], [], []
        for _ in range(ctx.RUNS):
            mnt = ctx.mountpoint()
            evict(src)
            mounts.append(ctx.mount(src, mnt, ctx.env, "cache_dir=none,layouts=json,bin"))
            reads.append(resident(src))
            subprocess.run(["sh", "-c", f"cat {' '.join(source_files(src))} > /dev/null"], check=True)
            t = time.perf_counter()
            subprocess.run(["cat", os.path.join(mnt, key + ".bin")], check=True,
                           stdout=subprocess.DEVNULL)
            cats.append(time.perf_counter() - t)
            ctx.umount(mnt)
            os.rmdir(mnt)
            files.append(read_range(file, off, n))
        m, c, f = ctx.median(mounts), ctx.median(cats), ctx.median(files)
        cat_medians[src] = c
        ctx.add(14, f"{name}: mount", f"{m * 1000:.0f} ms cold, {max(reads) // 1024} KiB of the source read (page cache after)",
                "< 100 ms, no tensor data (< 1 MiB)", m < 0.1 and max(reads) < MiB)
        ctx.add(14, f"{name}: cat of a {n // MiB} MiB .bin, fresh mount vs the file's bytes",
                f"{c * 1000:.0f} ms vs {f * 1000:.0f} ms = {f / c:.2f}x", ">= 0.9x", f / c >= 0.9)
    if os.path.exists(legacy) and pt in cat_medians:
        bench_legacy(ctx, legacy, cat_medians[pt])
    if os.path.exists(pt):
        tf_tensors_equal_torch(ctx, pt)


def bench_legacy(ctx, legacy, zip_cat):
    """The legacy format: mount from the pickles alone, and a cat against the zip format's."""
    mounts, reads, cats = [], [], []
    for _ in range(ctx.RUNS):
        mnt = ctx.mountpoint()
        evict(legacy)
        mounts.append(ctx.mount(legacy, mnt, ctx.env, "cache_dir=none,layouts=json,bin"))
        reads.append(resident(legacy))
        subprocess.run(["cat", legacy], check=True, stdout=subprocess.DEVNULL)
        t = time.perf_counter()
        subprocess.run(["cat", os.path.join(mnt, "layers.12.weight.bin")], check=True,
                       stdout=subprocess.DEVNULL)
        cats.append(time.perf_counter() - t)
        ctx.umount(mnt)
        os.rmdir(mnt)
    m, c = ctx.median(mounts), ctx.median(cats)
    ctx.add(14, "legacy torch.save checkpoint (1 GiB): mount",
            f"{m * 1000:.0f} ms cold, {max(reads) // 1024} KiB of the source read (page cache after)",
            "< 100 ms, no tensor data (< 1 MiB)", m < 0.1 and max(reads) < MiB)
    ctx.add(14, "legacy torch.save checkpoint (1 GiB): cat of a 32 MiB .bin vs the zip format's",
            f"{c * 1000:.0f} ms vs {zip_cat * 1000:.0f} ms = {c / zip_cat:.2f}x", "<= 1.5x",
            c / zip_cat <= 1.5)


def tf_tensors_equal_torch(ctx, pt):
    py = os.environ.get("TF_PYTHON", "python3")
    if subprocess.run([py, "-c", "import tensorflow"], capture_output=True).returncode != 0:
        ctx.add(14, ".tf/ of the torch checkpoint read by TensorFlow", "skipped: TF_PYTHON lacks tensorflow", "", None)
        return
    mnt = ctx.mountpoint()
    ctx.mount(pt, mnt, ctx.env, "cache_dir=none")
    try:
        t = time.perf_counter()
        out = subprocess.run([py, "-c", TF_READ, os.path.join(mnt, ".tf", "model"),
                              os.path.join(os.path.dirname(pt), "torch_sha256.json")],
                             check=True, capture_output=True, text=True).stdout
        took = time.perf_counter() - t
    finally:
        ctx.umount(mnt)
        os.rmdir(mnt)
    got = json.loads(out.strip().splitlines()[-1])
    ctx.add(14, ".tf/ of the 1 GiB torch checkpoint read by TensorFlow vs torch.load",
            f"{got['tensors']} tensors, {len(got['differ'])} differ ({took:.1f} s)",
            "all equal", not got["differ"])
