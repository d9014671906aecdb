#!/usr/bin/env python3
"""Writes fixtures/real/torch/expected.json: what PyTorch's own readers read from the real
PyTorch files of fixtures/real/torch/ (written by other projects' tools; see ORIGIN.md there),
so that modelfs's tests need no torch.

    /work/torchenv/bin/pip install torch numpy mace-torch omegaconf
    /work/torchenv/bin/python scripts/real_torch_expected.py [DIR]    (default fixtures/real/torch)

mace-torch (which brings e3nn) is needed to unpickle the whole MACE models, omegaconf for the
OmegaConf objects of pesto's mir-1k_g7.ckpt.

Per file: {"format": "legacy"|"zip"|"torchscript", "root": the loaded object's type,
"weights_only": whether torch.load(weights_only=True) reads it, "globals": the classes and
functions its pickles name (data.pkl, and constants.pkl for TorchScript; the main pickle of a
legacy file), "storages": how many storages the file holds, "tensors": {NAME: {"dtype",
"shape", "sha256", ["hex"], ["values"], ["view"], ["embedded"]}}, ["unnamed"]}.

NAME follows fixtures/torch/more (scripts/gen_torch_more.py): dict keys verbatim joined by
"/", list items by index, a module's tensors as its state_dict() names them (dots kept),
a bare root tensor by the file's stem; a TorchScript archive by torch.jit.load(...).state_dict().
"sha256" is of the tensor's elements contiguous, row-major, little-endian; "hex" the same
bytes, given when they are at most 64; "values" (t.float().flatten().tolist()) beside "hex"
for float16/bfloat16/float8. "view": {"offset", "stride", "storage_bytes"} when the tensor is
not its storage's whole contiguous content as read back. "embedded": "torchscript-bytes" for a
module tensor that lives in a TorchScript archive pickled as bytes inside the file's pickle
(e3nn's CodeGenMixin does that), not in the file's own storages. "unnamed": tensors that the
naming above does not reach: for a pickle, the paths of tensors held in plain attributes of
objects; for a TorchScript archive, {path: record} of the tensor attributes of its data.pkl
that are not in state_dict() (module attributes joined by "/" with the dict keys and list
indexes under them: silero's "_model/_state", MACE's "inp_dict/1/0/batch").
"""
import hashlib
import io
import json
import math
import os
import pickle
import pickletools
import sys
import warnings
import zipfile

import torch
from torch import nn

FLOAT_VALUES = {torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2,
                torch.float8_e4m3fnuz, torch.float8_e5m2fnuz}
SKIP = {"ORIGIN.md", "expected.json"}


def raw_bytes(t):
    t = t.detach().contiguous()
    if t.numel() == 0:
        return b""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()


def record(t, embedded=False):
    t = t.detach()
    b = raw_bytes(t)
    rec = {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape),
           "sha256": hashlib.sha256(b).hexdigest()}
    if len(b) <= 64:
        rec["hex"] = b.hex()
        if t.dtype in FLOAT_VALUES:
            vals = t.float().flatten().tolist()
            assert all(math.isfinite(v) for v in vals)
            rec["values"] = vals
    storage_bytes = t.untyped_storage().nbytes()
    if t.numel() and (t.storage_offset() != 0 or not t.is_contiguous()
                      or storage_bytes != t.numel() * t.element_size()):
        rec["view"] = {"offset": t.storage_offset(), "stride": list(t.stride()),
                       "storage_bytes": storage_bytes}
    if embedded:
        rec["embedded"] = "torchscript-bytes"
    return rec


def join(prefix, k):
    return f"{prefix}/{k}" if prefix else str(k)


def has_tensor(v, seen=None):
    if isinstance(v, (torch.Tensor, nn.Module, torch.jit.ScriptModule)):
        return True
    if isinstance(v, dict):
        return any(has_tensor(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return any(has_tensor(x) for x in v)
    return False


def module_tensors(mod, prefix, tensors, named):
    """A module's state_dict, names as it gives them, marking tensors of embedded TorchScript."""
    script_prefixes = []
    if not isinstance(mod, torch.jit.ScriptModule):
        for name, sub in mod.named_modules(remove_duplicate=False):
            if isinstance(sub, torch.jit.ScriptModule):
                script_prefixes.append(name + ".")
    for k, v in mod.state_dict(keep_vars=True).items():
        emb = any(k.startswith(p) for p in script_prefixes)
        name = join(prefix, k)
        assert name not in tensors, name
        tensors[name] = record(v, emb)
        named.add(id(v))


def walk(obj, prefix, tensors, named):
    if isinstance(obj, torch.Tensor):
        assert prefix not in tensors, prefix
        tensors[prefix] = record(obj)
        named.add(id(obj))
    elif isinstance(obj, (nn.Module, torch.jit.ScriptModule)):
        module_tensors(obj, prefix, tensors, named)
    elif isinstance(obj, (dict, list, tuple)):
        for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
            if has_tensor(v):
                walk(v, join(prefix, k), tensors, named)


def all_tensors(obj, path, out, seen):
    """Every tensor reachable from obj through containers and objects' __dict__."""
    if isinstance(obj, torch.Tensor):
        out.append((path, obj))
        return
    if isinstance(obj, (str, bytes, int, float, bool, type(None))) or id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, torch.jit.ScriptModule):
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            all_tensors(v, f"{path}/{k}", out, seen)
    elif isinstance(obj, (list, tuple, set)):
        for i, v in enumerate(obj):
            all_tensors(v, f"{path}/{i}", out, seen)
    elif hasattr(obj, "__dict__"):
        for k, v in vars(obj).items():
            all_tensors(v, f"{path}.{k}", out, seen)


def pickle_globals(data):
    """module.name of every GLOBAL / STACK_GLOBAL in one pickle."""
    found, pushed, memo = set(), [], {}
    for op, arg, _ in pickletools.genops(io.BytesIO(data)):
        name = op.name
        if name == "GLOBAL":
            found.add(arg.replace(" ", "."))
        elif name == "STACK_GLOBAL":
            if len(pushed) >= 2 and all(isinstance(x, str) for x in pushed[-2:]):
                found.add(f"{pushed[-2]}.{pushed[-1]}")
        elif name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                      "SHORT_BINSTRING", "BINSTRING", "STRING"):
            pushed.append(arg)
        elif name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = pushed[-1] if pushed else None
        elif name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            pushed.append(memo.get(arg))
        else:
            pushed.append(None)
    return found


STORAGE_DTYPES = {"FloatStorage": torch.float32, "DoubleStorage": torch.float64,
                  "HalfStorage": torch.float16, "BFloat16Storage": torch.bfloat16,
                  "LongStorage": torch.int64, "IntStorage": torch.int32,
                  "ShortStorage": torch.int16, "CharStorage": torch.int8,
                  "ByteStorage": torch.uint8, "BoolStorage": torch.bool,
                  "ComplexFloatStorage": torch.complex64,
                  "ComplexDoubleStorage": torch.complex128}


def torchscript_attribute_tensors(path, names):
    """Tensors that a TorchScript archive's data.pkl holds outside its state_dict (tensor
    attributes that are not parameters or buffers, containers of tensors), by attribute path
    joined with "/" like every other name, read from the archive's own storages."""
    class Obj:
        def __init__(self, *a):
            self.state = None

        def __setstate__(self, s):
            self.state = s

    class Storage:
        def __init__(self, name):
            self.dtype = STORAGE_DTYPES[name]

    class Stub(pickle.Unpickler):
        def find_class(self, mod, name):
            if mod == "torch._utils" and name == "_rebuild_tensor_v2":
                return lambda st, off, size, stride, *a: ("T", st, off, size, stride)
            if mod == "torch" and name in STORAGE_DTYPES:
                return Storage(name)
            if mod == "collections" and name == "OrderedDict":
                return dict
            if mod.startswith("__torch__"):
                return type(name, (Obj,), {})
            if mod == "torch.jit._pickle":   # restore_type_tag(value, type), build_*list(list)
                return lambda v, *a: v
            return lambda *a: None

        def persistent_load(self, pid):
            return pid

    with zipfile.ZipFile(path) as z:
        names_in = z.namelist()
        pkl = next(n for n in names_in if n.endswith("/data.pkl"))
        root = Stub(io.BytesIO(z.read(pkl))).load()
        prefix = pkl[:-len("data.pkl")]
        found = {}

        def walk(o, p):
            if isinstance(o, tuple) and len(o) == 5 and o[0] == "T":
                found[p] = o
            elif isinstance(o, Obj):
                walk(o.state, p)
            elif isinstance(o, dict):
                for k, v in o.items():
                    walk(v, join(p, k))
            elif isinstance(o, (list, tuple)):
                for i, v in enumerate(o):
                    walk(v, join(p, i))
        walk(root, "")
        out = {}
        for p, (_, st, off, size, stride) in sorted(found.items()):
            if p in names:
                continue
            _kind, storage, key, _loc, _numel = st
            raw = z.read(f"{prefix}data/{key}")
            flat = (torch.frombuffer(bytearray(raw), dtype=storage.dtype) if raw
                    else torch.empty(0, dtype=storage.dtype))
            out[p] = record(flat.as_strided(size, stride, off))
    return out


def file_info(path):
    with open(path, "rb") as f:
        head = f.read(4)
    if not head.startswith(b"PK"):
        with open(path, "rb") as f:
            pickles = []
            for _ in range(5):   # magic, protocol, sys_info, the object, the storage keys
                start = f.tell()
                for _op in pickletools.genops(f):
                    pass
                end = f.tell()
                f.seek(start)
                pickles.append(f.read(end - start))
        keys = pickle.loads(pickles[4])
        return "legacy", pickle_globals(pickles[3]), len(keys)
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        ts = any(n.endswith("/constants.pkl") for n in names) or any("/code/" in n for n in names)
        glob = set()
        for n in names:
            if n.endswith("/data.pkl") or (ts and n.endswith("/constants.pkl")):
                glob |= pickle_globals(z.read(n))
        storages = len([n for n in names if "/data/" in n and not n.endswith("/")])
        if ts:
            storages = len([n for n in names if "/data/" in n or "/constants/" in n])
    return ("torchscript" if ts else "zip"), glob, storages


def expected(path):
    fmt, glob, storages = file_info(path)
    out = {"format": fmt, "globals": sorted(glob), "storages": storages}
    tensors, named = {}, set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if fmt == "torchscript":
            obj = torch.jit.load(path, map_location="cpu")
            out["root"] = "torch.jit.RecursiveScriptModule"
            out["weights_only"] = False
        else:
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True)
                out["weights_only"] = True
            except Exception:
                obj = torch.load(path, map_location="cpu", weights_only=False)
                out["weights_only"] = False
            out["root"] = f"{type(obj).__module__}.{type(obj).__qualname__}"
    if isinstance(obj, torch.Tensor):
        walk(obj, os.path.splitext(os.path.basename(path))[0], tensors, named)
    else:
        walk(obj, "", tensors, named)
    out["tensors"] = tensors
    if fmt == "torchscript":
        extra = torchscript_attribute_tensors(path, set(tensors))
        if extra:
            out["unnamed"] = extra
    else:
        reach = []
        all_tensors(obj, "", reach, set())
        unnamed = sorted({p for p, t in reach if id(t) not in named})
        if unnamed:
            out["unnamed"] = unnamed
    return out


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "fixtures", "real", "torch")
    exp = {}
    for name in sorted(os.listdir(d)):
        if name in SKIP or name.startswith("."):
            continue
        exp[name] = expected(os.path.join(d, name))
        print(f"{name}: {exp[name]['format']}, {exp[name]['root']}, "
              f"{len(exp[name]['tensors'])} tensors", file=sys.stderr)
    exp["_torch"] = torch.__version__
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
