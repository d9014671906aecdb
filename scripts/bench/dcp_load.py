"""Issue 73: PyTorch Distributed Checkpoint. A DCP checkpoint whose one 1 GiB float32 tensor
"W" (16384 x 16384) is saved by `torch.distributed.checkpoint` beside a small one; its first
read by modelfs (a fresh mount, `cat` of `W.npy`) vs torch's own path to one weight of a DCP
checkpoint, `dcp_to_torch_save` (the whole checkpoint to a temporary torch.save file) +
`torch.load` + `sd["W"].numpy()` (a fresh process), the page cache warm for both. >= 2x.
DIR/many is a checkpoint in 100 `.distcp` files (one rank, FileSystemWriter(thread_count=100):
one file per writer thread, 200 small tensors) for "mount of a 100-shard DCP checkpoint < 1 s".

`python dcp_load.py gen DIR` writes both; `python dcp_load.py load DIR` prints the seconds
torch takes (run by bench.py with ENGINES_PYTHON, which has torch).
"""
import os
import sys
import tempfile
import time

import numpy as np


def gen(d):
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint import FileSystemWriter
    os.makedirs(d, exist_ok=True)
    w = np.random.default_rng(20).standard_normal((16384, 16384), dtype=np.float32)
    sd = {"W": torch.from_numpy(w), "b": torch.arange(16384, dtype=torch.float32)}
    dcp.save(sd, storage_writer=FileSystemWriter(d), no_dist=True)
    g = torch.Generator().manual_seed(73)
    many = {f"layers.{i}.weight": torch.randn((64, 64), generator=g) for i in range(200)}
    dcp.save(many, storage_writer=FileSystemWriter(os.path.join(d, "many"), thread_count=100),
             no_dist=True)
    n = sum(f.endswith(".distcp") for f in os.listdir(os.path.join(d, "many")))
    assert n == 100, n


def load(d):
    import torch
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        p = os.path.join(tmp, "c.pt")
        dcp_to_torch_save(d, p)
        a = torch.load(p, weights_only=True)["W"].numpy()
        dt = time.perf_counter() - t
    assert a.shape == (16384, 16384)
    print(dt)


if __name__ == "__main__":
    {"gen": gen, "load": load}[sys.argv[1]](sys.argv[2])
