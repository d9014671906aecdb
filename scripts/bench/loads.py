"""Bench target 13: libraries loading the views through a fresh mount, side by side with the
same library loading a local file it wrote itself (issue 40). The model is written by real
TensorFlow (gen_loads.py: 40 x [2048, 4096] float32 + a [65536, 1024] embedding, 1.5 GiB);
the mount uses cache_dir=none; every source and local file is in the page cache first.

Each figure is the median of RUNS rounds; a round times the local load, then the load through
a fresh mount (first), then again through that mount (second), so that the machine's drift
falls on both sides alike.

Needs a python with numpy, safetensors and tensorflow-cpu (TF_PYTHON, default python3): it
generates the model once and runs every load (load_one.py) in a process of its own.
"""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load(py, kind, path, *args):
    out = subprocess.run([py, os.path.join(HERE, "load_one.py"), kind, path, *map(str, args)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.split()[0])


def can_load(py):
    probe = "import numpy, safetensors, tensorflow"
    return subprocess.run([py, "-c", probe], capture_output=True).returncode == 0


def bench_loads(ctx):
    py = os.environ.get("TF_PYTHON", "python3")
    if not can_load(py):
        ctx.add(13, "loads through the mount", "skipped: TF_PYTHON lacks numpy/safetensors/tensorflow",
                "", None)
        return
    work = os.path.join(ctx.WORK, "loads")
    if not os.path.exists(os.path.join(work, "keys.txt")):
        ctx.log("generating the loads model with TensorFlow (1.5 GiB, once)")
        shutil.rmtree(work, ignore_errors=True)
        subprocess.run([py, os.path.join(HERE, "gen_loads.py"), work], check=True,
                       stderr=subprocess.DEVNULL)
    src = os.path.join(work, "ckpt")
    ctx.run(["sh", "-c", f"cat {work}/ckpt/* {work}/local.* {work}/embedding.npy > /dev/null"])
    opts = "cache_dir=none"

    def through_mount(kind, view, *args, again_args=None):
        mnt = ctx.mountpoint()
        ctx.mount(src, mnt, ctx.env, opts)
        try:
            first = load(py, kind, os.path.join(mnt, view), *args)
            second = load(py, kind, os.path.join(mnt, view), *(again_args or args))
        finally:
            ctx.umount(mnt)
            os.rmdir(mnt)
        return first, second

    def rounds(kind, local_path, view, *args):
        local, first, second = [], [], []
        for _ in range(ctx.RUNS):
            local.append(load(py, kind, local_path, *args))
            f, s = through_mount(kind, view, *args)
            first.append(f)
            second.append(s)
        return ctx.median(local), ctx.median(first), ctx.median(second)

    for kind, name in (("safetensors", "safetensors"), ("npz", "np.load('.npz')")):
        local, first, second = rounds(kind, os.path.join(work, "local." + kind), "." + kind)
        ctx.add(13, f"{name}, every key: first load vs local",
                f"{first:.2f} s vs {local:.2f} s = {local / first:.2f}x", ">= 0.8x",
                local / first >= 0.8)
        ctx.add(13, f"{name}, every key: second load vs local",
                f"{second:.2f} s vs {local:.2f} s = {local / second:.2f}x", ">= 0.95x",
                local / second >= 0.95)

    # Rows: 4,000 random rows of the 256 MiB embedding through np.load(mmap_mode='r').
    local, first, second = rounds("rows", os.path.join(work, "embedding.npy"), "embedding.npy",
                                  4000, 1)
    bind = []
    for _ in range(ctx.RUNS):
        mnt = ctx.mountpoint()
        proc = ctx.bindfs_mount(work, mnt)
        try:
            bind.append(load(py, "rows", os.path.join(mnt, "embedding.npy"), 4000, 1))
        finally:
            ctx.bindfs_umount(proc, mnt)
            os.rmdir(mnt)
    b = ctx.median(bind)
    ctx.add(13, "4,000 random rows, np.load(mmap_mode='r'), fresh mount vs bindfs",
            f"{first:.3f} s vs {b:.3f} s = {b / first:.2f}x", ">= 1.0x", b / first >= 1.0)
    ctx.add(13, "the same rows: first pass vs second pass",
            f"{first:.3f} s vs {second:.3f} s = {first / second:.2f}x (local {local:.3f} s)",
            "<= 2x", first / second <= 2.0)

    local, first, second = rounds("tf", os.path.join(src, "ckpt-1"), ".tf/model")
    ctx.add(13, "tf.train.load_checkpoint + get_tensor of every variable: .tf/ vs source",
            f"{first:.2f} s vs {local:.2f} s = {local / first:.2f}x (second {second:.2f} s)",
            ">= 0.8x", local / first >= 0.8)
