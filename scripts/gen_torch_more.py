#!/usr/bin/env python3
"""Writes more PyTorch fixtures with real torch (issue 54): the files people actually have,
beyond a zip-format state dict, and what torch's own readers read back from them
(OUT/expected.json), so that tests need no torch.

Into OUT (default fixtures/torch/more), every file well under 100 KB:
  legacy.pt         torch.save(..., _use_new_zipfile_serialization=False), the pre-1.6 non-zip
                    format, of a dict of every dtype the legacy format has (float32/64/16,
                    bfloat16, int64/32/16/8, uint8, bool, complex64), a transpose stored beside
                    its base (one storage), a slice with a storage offset stored beside its
                    base, a slice whose base is not saved (storage larger than the tensor), a
                    0-d tensor and an nn.Parameter.
  legacy_ckpt.pt    legacy format of {"model": state_dict, "optimizer": Adam state after one
                    step, "epoch": 3, "best": 0.25}.
  module.pt         torch.save(model) (zip) of a whole nn.Module: Net, whose backbone is an
                    nn.Sequential of a custom ConvBlock (Conv2d + BatchNorm2d: buffers
                    running_mean, running_var, num_batches_tracked) and a ReLU, a head
                    nn.Linear, and a plain attribute num_classes = 7.
  module_legacy.pt  the same model in the legacy format.
  module_ckpt.pt    YOLO-style {"model": a float16 copy of the model (as YOLOv5/v8 save it),
                    "optimizer": SGD-with-momentum state, "epoch": 5, "date": "2026-11-28"}.
  scripted.pt       torch.jit.save(torch.jit.script(model)): a TorchScript archive.
  float8.pt         float8_e4m3fn, float8_e5m2, float8_e4m3fnuz, float8_e5m2fnuz tensors (random
                    normals of varied scale, .to(dtype)) and one float32 tensor.
  float8.safetensors  safetensors.torch.save_file of the e4m3fn and e5m2 tensors.
  expected.json     {"<file>": {"format": "legacy"|"zip"|"torchscript"|"safetensors",
                    "tensors": {NAME: {"dtype", "shape", "hex", ["values"]}}, "plain": {...}},
                    "_torch": torch.__version__}

NAME is the path modelfs shows: a root dict's keys are top-level names, each nested
dict/list/tuple level adds one component (list items by index), joined by "/", dict keys kept
verbatim; an nn.Module (pickled whole, or TorchScript) names its tensors as its state_dict()
does, dots kept ("model/backbone.0.conv.weight", as a state dict's file names them); a bare tensor at the root is
named by the file's stem. "hex" is the tensor's elements contiguous, row-major, little-endian
(float8 as raw bits, bfloat16 as its 2 raw bytes, bool as 0/1 bytes); float8, float16 and
bfloat16 tensors also have "values" = t.float().flatten().tolist(). "plain" holds, like
fixtures/torch/expected.json's "values", the non-tensor values of every dict/list that holds a
tensor (by the container's path: {key: value}); modules' plain attributes are not listed.
The truth is read back with the writers' readers: torch.load(weights_only=False),
torch.jit.load(...).state_dict(), safetensors' safe_open.

The files are byte-identical between runs on one machine: the script runs itself again with
PYTHONHASHSEED=0 and under `setarch -R` (see reexec_deterministic). The legacy files name
their storages by C pointers, as every legacy file does, and module_legacy.pt holds the source
of Net and ConvBlock (with this script's absolute path), as torch's legacy save of a module does.

With --big DIR it writes only DIR/big_legacy.pt and DIR/big_zip.pt, one state dict of about
--big-mb MB (default 1024: 8 float32 tensors of 32 M elements + a few small ones) in the legacy
and in the zip format, and DIR/expected.json with a sha256 of each tensor's bytes instead of
"hex"; for a benchmark, not committed.

    /work/torchenv/bin/python scripts/gen_torch_more.py [OUT]
    /work/torchenv/bin/python scripts/gen_torch_more.py --big DIR [--big-mb N]
"""
import argparse
import collections
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import warnings
import zipfile

import torch
from torch import nn

SEED = 54
FLOAT_VALUES = {torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2,
                torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}


class ConvBlock(nn.Module):
    def __init__(self, cin: int, cout: int):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return self.bn(self.conv(x))


class Net(nn.Module):
    def __init__(self, num_classes: int = 7):
        super().__init__()
        self.num_classes = num_classes
        self.backbone = nn.Sequential(ConvBlock(3, 4), nn.ReLU())
        self.head = nn.Linear(4, num_classes)

    def forward(self, x):
        x = self.backbone(x)
        x = x.mean([2, 3])
        return self.head(x)


def make_net(g):
    """A Net with random parameters, its BatchNorm statistics moved by two training passes."""
    model = Net()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    model.train()
    for _ in range(2):
        model(torch.randn(2, 3, 5, 5, generator=g))
    model.eval()
    return model


def raw_bytes(t):
    """The tensor's elements, contiguous, row-major, little-endian (this machine is)."""
    t = t.detach().contiguous()
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def dtype_name(dt):
    return str(dt).removeprefix("torch.")


def record(t, digest):
    b = raw_bytes(t)
    rec = {"dtype": dtype_name(t.dtype), "shape": list(t.shape)}
    if digest:
        rec["sha256"] = hashlib.sha256(b).hexdigest()
        if len(b) <= 64:
            rec["hex"] = b.hex()
    else:
        rec["hex"] = b.hex()
    if t.dtype in FLOAT_VALUES:
        vals = t.detach().float().flatten().tolist()
        assert all(math.isfinite(v) for v in vals), (t.dtype, vals)
        rec["values"] = vals
    return rec


def join(prefix, k):
    return f"{prefix}/{k}" if prefix else str(k)


def plain_value(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [plain_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): plain_value(x) for k, x in v.items()}
    return repr(v)


def has_tensor(v):
    if isinstance(v, (torch.Tensor, nn.Module, torch.jit.ScriptModule)):
        return True
    if isinstance(v, dict):
        return any(has_tensor(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(has_tensor(x) for x in v)
    return False


def walk(obj, prefix, tensors, plain, digest=False):
    """Every tensor under `obj` by the name modelfs shows for it (see the docstring)."""
    if isinstance(obj, torch.Tensor):
        assert prefix not in tensors, prefix
        tensors[prefix] = record(obj, digest)
    elif isinstance(obj, (nn.Module, torch.jit.ScriptModule)):
        for k, v in obj.state_dict(keep_vars=True).items():
            walk(v, join(prefix, k), tensors, plain, digest)
    elif isinstance(obj, (dict, list, tuple)):
        items = list(obj.items() if isinstance(obj, dict) else enumerate(obj))
        rest = {}
        for k, v in items:
            if has_tensor(v):
                walk(v, join(prefix, k), tensors, plain, digest)
            else:
                rest[str(k)] = plain_value(v)
        if rest:
            plain[prefix] = rest
    else:
        raise TypeError(f"{prefix}: {type(obj)}")


def file_format(path):
    with open(path, "rb") as f:
        head = f.read(8)
    if path.endswith(".safetensors"):
        return "safetensors"
    if not head.startswith(b"PK"):
        return "legacy"
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    if any(n.endswith("/constants.pkl") or "/code/" in n for n in names):
        return "torchscript"
    return "zip"


def expected(path, digest=False):
    fmt = file_format(path)
    tensors, plain = {}, {}
    if fmt == "safetensors":
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            for k in f.keys():
                tensors[k] = record(f.get_tensor(k), digest)
    elif fmt == "torchscript":
        walk(torch.jit.load(path), "", tensors, plain, digest)
    else:
        obj = torch.load(path, weights_only=False)
        if isinstance(obj, torch.Tensor):
            walk(obj, os.path.basename(path).rsplit(".", 1)[0], tensors, plain, digest)
        else:
            walk(obj, "", tensors, plain, digest)
    out = {"format": fmt, "tensors": tensors}
    if plain:
        out["plain"] = plain
    return out


def small(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    g = torch.Generator().manual_seed(SEED)
    files = {}

    def save(name, obj, legacy=False):
        path = os.path.join(out, name)
        torch.save(obj, path, _use_new_zipfile_serialization=not legacy)
        files[name] = "legacy" if legacy else "zip"

    # 1. Every dtype of the legacy format, views, a 0-d tensor and a Parameter.
    sd = collections.OrderedDict()
    sd["f32"] = torch.randn(3, 4, generator=g)
    sd["f64"] = torch.randn(2, 3, generator=g, dtype=torch.float64)
    sd["f16"] = torch.randn(5, generator=g).half()
    sd["bf16"] = torch.randn(2, 2, 2, generator=g).bfloat16()
    sd["i64"] = torch.randint(-2**62, 2**62, (4,), generator=g, dtype=torch.int64)
    sd["i32"] = torch.randint(-2**31, 2**31 - 1, (2, 3), generator=g, dtype=torch.int32)
    sd["i16"] = torch.randint(-2**15, 2**15 - 1, (3,), generator=g, dtype=torch.int16)
    sd["i8"] = torch.randint(-128, 127, (6,), generator=g, dtype=torch.int8)
    sd["u8"] = torch.randint(0, 255, (2, 4), generator=g, dtype=torch.uint8)
    sd["b"] = torch.randint(0, 2, (7,), generator=g).bool()
    sd["c64"] = torch.randn(3, generator=g, dtype=torch.complex64)
    w = torch.randn(4, 3, generator=g)
    sd["w"] = w
    sd["w_t"] = w.t()                      # shares w's storage, strides (1, 3)
    big = torch.arange(10, dtype=torch.float32) * 1.5
    sd["big"] = big
    sd["big_slice"] = big[3:7]             # shares big's storage, offset 3
    sd["lone_slice"] = (torch.arange(12, dtype=torch.int32) * 3)[2:5]  # base not saved
    sd["scalar"] = torch.tensor(2.5)
    sd["int_scalar"] = torch.tensor(-9, dtype=torch.int64)
    sd["param"] = nn.Parameter(torch.randn(2, 2, generator=g))
    save("legacy.pt", sd, legacy=True)

    # 2. A legacy training checkpoint.
    mlp = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    with torch.no_grad():
        for p in mlp.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    adam = torch.optim.Adam(mlp.parameters(), lr=1e-3)
    mlp(torch.randn(5, 4, generator=g)).sum().backward()
    adam.step()
    save("legacy_ckpt.pt", {"model": mlp.state_dict(), "optimizer": adam.state_dict(),
                            "epoch": 3, "best": 0.25}, legacy=True)

    # 3, 4. A whole module, zip and legacy.
    model = make_net(g)
    save("module.pt", model)
    save("module_legacy.pt", model, legacy=True)

    # 5. YOLO-style: the whole model (a float16 copy, as YOLOv5/v8 keep it) and an optimizer.
    sgd = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.train()
    model(torch.randn(2, 3, 5, 5, generator=g)).sum().backward()
    sgd.step()
    sgd.zero_grad(set_to_none=True)
    model.eval()
    import copy
    half = copy.deepcopy(model).half()
    save("module_ckpt.pt", {"model": half, "optimizer": sgd.state_dict(), "epoch": 5,
                            "date": "2026-11-28"})

    # 6. TorchScript.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.script(model), os.path.join(out, "scripted.pt"))
    files["scripted.pt"] = "torchscript"

    # 7. float8, in torch.save and in safetensors.
    def f8(shape, dt):
        n = torch.randn(shape, generator=g)
        scale = torch.pow(10.0, torch.empty(shape).uniform_(-4, 1.5, generator=g))
        return (n * scale).to(dt)
    f8d = collections.OrderedDict()
    f8d["e4m3fn"] = f8((4, 4), torch.float8_e4m3fn)
    f8d["e5m2"] = f8((3, 5), torch.float8_e5m2)
    f8d["e4m3fnuz"] = f8((2, 6), torch.float8_e4m3fnuz)
    f8d["e5m2fnuz"] = f8((7,), torch.float8_e5m2fnuz)
    f8d["scale"] = torch.tensor([0.5, 2.0, 0.125])
    save("float8.pt", f8d)
    from safetensors.torch import save_file
    save_file({"e4m3fn": f8d["e4m3fn"], "e5m2": f8d["e5m2"]},
              os.path.join(out, "float8.safetensors"))
    os.chmod(os.path.join(out, "float8.safetensors"), 0o644)   # save_file makes it 0600
    files["float8.safetensors"] = "safetensors"

    exp = {}
    for name, fmt in files.items():
        path = os.path.join(out, name)
        size = os.path.getsize(path)
        assert size < 100_000, (name, size)
        exp[name] = expected(path)
        assert exp[name]["format"] == fmt, (name, exp[name]["format"], fmt)
    exp["_torch"] = torch.__version__
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")


def big(out, mb):
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(SEED)
    n = max(1, mb * 1024 * 1024 // 4 // 8)       # elements of each of the 8 big tensors
    sd = collections.OrderedDict()
    for i in range(8):
        sd[f"layers.{i}.weight"] = torch.randn(n, generator=g).reshape(-1, 1024) \
            if n % 1024 == 0 else torch.randn(n, generator=g)
    sd["norm.weight"] = torch.randn(1024, generator=g)
    sd["norm.bias"] = torch.randn(1024, generator=g)
    sd["step"] = torch.tensor(1000, dtype=torch.int64)
    exp = {}
    for name, legacy in [("big_legacy.pt", True), ("big_zip.pt", False)]:
        path = os.path.join(out, name)
        torch.save(sd, path, _use_new_zipfile_serialization=not legacy)
        exp[name] = expected(path, digest=True)
    exp["_torch"] = torch.__version__
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")


def reexec_deterministic(a):
    """Runs the script again with PYTHONHASHSEED=0 (TorchScript's code/ lists a module's
    constants in set order) and, where `setarch -R` works, without address randomization, in
    the output directory with a fixed argv and environment: the legacy format names each
    storage by its C pointer (str(storage._cdata)), so the legacy files are byte-identical
    between runs only when every allocation before them is."""
    if os.environ.get("GEN_TORCH_MORE_REEXEC") == "1":
        return
    out = os.path.abspath(a.big or a.out)
    os.makedirs(out, exist_ok=True)
    env = {"GEN_TORCH_MORE_REEXEC": "1", "PYTHONHASHSEED": "0", "LC_ALL": "C.UTF-8",
           "PATH": "/usr/bin:/bin"}
    argv = [sys.executable, os.path.abspath(__file__), "."]
    if a.big:
        argv += ["--big", ".", "--big-mb", str(a.big_mb)]
    setarch = shutil.which("setarch")
    if setarch and subprocess.run([setarch, "-R", "true"], capture_output=True).returncode == 0:
        argv = [setarch, "-R"] + argv
    sys.stdout.flush()
    os.chdir(out)
    os.execve(argv[0], argv, env)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", default=os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "torch", "more"))
    ap.add_argument("--big", metavar="DIR", help="write only the ~1 GB benchmark files into DIR")
    ap.add_argument("--big-mb", type=int, default=1024, metavar="N")
    a = ap.parse_args()
    reexec_deterministic(a)
    if a.big:
        big(a.big, a.big_mb)
    else:
        small(a.out)


if __name__ == "__main__":
    main()
