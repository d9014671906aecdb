#!/usr/bin/env python3
"""Writes the PyTorch fixtures (issue 41) with real `torch.save`, and what
`torch.load(weights_only=True)` reads back from them (fixtures/torch/expected.json), so that
tests need no torch: every dtype torch saves, views (a transpose, a slice with an offset, a
step, a broadcast), tensors sharing a storage, a checkpoint nesting a model's and an
optimizer's state dicts with plain values, a bare tensor, a model sharded as `transformers`
shards one (`pytorch_model-0000i-of-0000n.bin` + `pytorch_model.bin.index.json`), and two
pickles that would run code if unpickled (`os.system`, `builtins.eval`): they are written by
hand, never loaded here.

    /work/torchenv/bin/python scripts/gen_torch.py [OUT]     (default fixtures/torch)
"""
import collections
import io
import json
import os
import pickle
import sys
import zipfile

import numpy as np
import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "torch")
MARKER = "/tmp/modelfs-hostile-pickle-ran"
torch.manual_seed(41)
g = torch.Generator().manual_seed(41)


def rand_bytes(n):
    return torch.randint(0, 256, (n,), dtype=torch.uint8, generator=g)


def of_dtype(dtype, shape):
    """A tensor of `dtype` with random bits (floats from random normals where torch can)."""
    n = 1
    for d in shape:
        n *= d
    if dtype.is_floating_point and dtype.itemsize >= 2:
        return torch.randn(shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, generator=g)
    return rand_bytes(n * dtype.itemsize).view(dtype).reshape(shape)


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.complex64,
          torch.complex128, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8,
          torch.uint16, torch.uint32, torch.uint64, torch.bool, torch.float8_e4m3fn,
          torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
          torch.float8_e8m0fnu, torch.complex32]


def expected_of(obj, prefix, out, values):
    """Every tensor of `obj` by its path (dict keys and list indexes joined by '/'): dtype,
    shape and its elements' bytes, row-major little-endian; plain values by their dict."""
    if isinstance(obj, torch.Tensor) and obj.is_quantized:
        # modelfs lists a quantized tensor with a problem: its integers need its scales.
        out[prefix] = {"dtype": str(obj.dtype).removeprefix("torch."), "shape": list(obj.shape),
                       "problem": True}
        return True
    if isinstance(obj, torch.Tensor):
        t = obj.detach().contiguous()
        raw = t.view(torch.uint8) if t.dim() > 0 and t.numel() > 0 else t.reshape(-1).view(torch.uint8)
        out[prefix] = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
                       "hex": bytes(raw.reshape(-1).numpy().tobytes()).hex()}
        return True
    if isinstance(obj, (dict, list, tuple)):
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        if not any(has_tensor(v) for _, v in items):
            return False
        items = obj.items() if isinstance(obj, dict) else enumerate(obj)
        plain = {}
        for k, v in items:
            path = f"{prefix}/{k}" if prefix else str(k)
            if not expected_of(v, path, out, values):
                plain[str(k)] = v
        if plain:
            values[prefix] = plain
        return True
    return False


def has_tensor(v):
    if isinstance(v, torch.Tensor):
        return True
    if isinstance(v, dict):
        return any(has_tensor(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(has_tensor(x) for x in v)
    return False


def expected(path):
    # Our own files: weights_only=False lets torch read the numpy scalars too (never used
    # for the hostile fixtures, whose expectations are written by hand).
    obj = torch.load(path, weights_only=False)
    out, values = {}, {}
    if isinstance(obj, torch.Tensor):
        expected_of(obj, os.path.basename(path).rsplit(".", 1)[0], out, values)
    else:
        expected_of(obj, "", out, values)
    def plain(v):
        return v.item() if isinstance(v, np.generic) else str(v)
    return {"tensors": out, "values": json.loads(json.dumps(values, default=plain))}


class Hostile:
    def __init__(self, fn, arg):
        self.fn, self.arg = fn, arg

    def __reduce__(self):
        return (self.fn, (self.arg,))


def hostile(path, payload):
    """A torch.save zip whose data.pkl calls something: a real tensor beside it, so that the
    file mounts and the call is one entry's problem."""
    torch.save({"w": torch.arange(4, dtype=torch.float32), "x": 1}, path)
    with zipfile.ZipFile(path) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    prefix = next(n for n in members if n.endswith("/data.pkl"))[:-len("data.pkl")]
    pkl = members[prefix + "data.pkl"]
    # Replace the plain value 1 of "x" by the call: unpickle the tensor entries' opcodes as
    # they are and splice in the hostile value's pickle, written by pickle itself.
    evil = pickle.dumps(payload, protocol=2)[2:-1]
    assert pkl.endswith(b"K\x01u."), pkl
    pkl = pkl[:-len(b"K\x01u.")] + evil + b"u."
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for n, b in members.items():
            z.writestr(n, pkl if n == prefix + "data.pkl" else b)


def main():
    os.makedirs(os.path.join(OUT, "sharded"), exist_ok=True)
    files = {}

    # Every dtype, ranks 0..3 and an empty tensor.
    shapes = [(3, 4), (5,), (), (2, 3, 2), (0, 3)]
    sd = collections.OrderedDict()
    for i, dt in enumerate(DTYPES):
        sd[str(dt).removeprefix("torch.")] = of_dtype(dt, shapes[i % len(shapes)])
    sd["qint8"] = torch.quantize_per_tensor(torch.randn(4, generator=g), 0.1, 0, torch.qint8)
    torch.save(sd, os.path.join(OUT, "dtypes.pt"))
    files["dtypes.pt"] = None

    # Views: what torch.save keeps is the storage plus size, stride and offset.
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = collections.OrderedDict(
        base=base,
        transposed=base.t(),
        sliced=base[1:3, 2:5],
        stepped=base[::2, ::3],
        row=base[2],
        broadcast=torch.arange(3, dtype=torch.int64).expand(4, 3),
        permuted=torch.arange(24, dtype=torch.int16).reshape(2, 3, 4).permute(2, 0, 1),
        scalar_of_view=base[3, 5],
    )
    views["shares_base"] = views["base"].view(6, 4)
    torch.save(views, os.path.join(OUT, "views.pt"))
    files["views.pt"] = None

    # A training checkpoint: model and optimizer state dicts, plain values beside them.
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model(torch.randn(5, 4, generator=g)).sum().backward()
    opt.step()
    ckpt = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7,
            "best_loss": 0.25, "config": {"name": "tiny", "layers": [4, 3, 2], "tag": None},
            # numpy scalars, as metrics often are (pickled as numpy.dtype + bytes).
            "best_acc": np.float64(0.875), "seen": np.int64(-12), "flag": np.bool_(True),
            "params": [torch.nn.Parameter(torch.ones(2)), torch.zeros(1)]}
    torch.save(ckpt, os.path.join(OUT, "checkpoint.pt"))
    files["checkpoint.pt"] = None

    torch.save(torch.randn(3, 2, generator=g), os.path.join(OUT, "tensor.pt"))
    files["tensor.pt"] = None

    # Sharded as transformers' save_pretrained(safe_serialization=False) shards a model.
    weights = collections.OrderedDict(
        (f"model.layers.{i}.weight", torch.randn(4, 4, generator=g)) for i in range(3))
    weights["lm_head.weight"] = torch.randn(2, 4, generator=g)
    keys = list(weights)
    shards = {"pytorch_model-00001-of-00002.bin": keys[:2],
              "pytorch_model-00002-of-00002.bin": keys[2:]}
    weight_map = {}
    for name, ks in shards.items():
        torch.save(collections.OrderedDict((k, weights[k]) for k in ks),
                   os.path.join(OUT, "sharded", name))
        weight_map.update({k: name for k in ks})
        files[f"sharded/{name}"] = None
    with open(os.path.join(OUT, "sharded", "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 4 * sum(t.numel() for t in weights.values())},
                   "weight_map": weight_map}, f, indent=2)

    hostile(os.path.join(OUT, "hostile_system.pt"), Hostile(os.system, f"touch {MARKER}"))
    hostile(os.path.join(OUT, "hostile_eval.pt"),
            Hostile(eval, f"open('{MARKER}', 'w').write('ran')"))

    exp = {name: expected(os.path.join(OUT, name)) for name in files}
    for name in ["hostile_system.pt", "hostile_eval.pt"]:
        try:
            torch.load(os.path.join(OUT, name), weights_only=True)
            raise SystemExit(f"{name}: weights_only loaded it")
        except pickle.UnpicklingError:
            pass
        exp[name] = {"tensors": {"w": {"dtype": "float32", "shape": [4],
                                       "hex": torch.arange(4, dtype=torch.float32).numpy().tobytes().hex()}},
                     "values": {}, "refused": "x"}
    exp["_marker"] = MARKER
    exp["_torch"] = torch.__version__
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
