#!/usr/bin/env python3
"""Writes fixtures/torch/more/module_sd.pt: what `torch.save(model.state_dict())` writes for
the model pickled whole in module.pt, without torch (issue 69: a state dict and the same
net saved whole must give the same names, so `modelfs diff module_sd.pt module.pt` matches
every tensor).

The archive is module.pt's, member for member (the storages' bytes, byteorder, version,
serialization id), with its `data.pkl` replaced by the state dict's pickle. That pickle is
written by Python's own pickle module (protocol 2, as torch.save uses) from stand-ins whose
`__module__`/`__qualname__` are torch's (`collections.OrderedDict` of
`torch._utils._rebuild_tensor_v2(<storage>, offset, size, stride, False, OrderedDict())`,
storages as persistent ids `('storage', torch.<T>Storage, key, 'cpu', numel)`), so its
opcodes are those torch's pickler writes; only the state dict's `_metadata` attribute (layer
versions, which `load_state_dict` does not need) is left out. The tensors, their names and
their order are read from module.pt's own pickle: parameters, persistent buffers, then
submodules, recursively, as `nn.Module.state_dict()` walks them.

    python3 scripts/gen_torch_state_dict.py [DIR]    (default fixtures/torch/more)
"""
import collections
import io
import os
import pickle
import sys
import types
import zipfile


class Loaded:
    """Whatever module.pt's pickle calls or builds: its callee's names, args and state."""

    def __init__(self, *args):
        self.args = args
        self.state = {}

    def __setstate__(self, state):
        self.state = state


class Call:
    """A call to pickle: `callee(*args)`, where callee pickles as a global."""

    def __init__(self, callee, args):
        self.callee, self.args = callee, args

    def __reduce__(self):
        return (self.callee, self.args)


class Pid:
    def __init__(self, pid):
        self.pid = pid


def stand_in(module, name):
    """A class named `module.name` that pickle finds there (a global, by reference)."""
    m = sys.modules.get(module)
    if m is None:
        m = types.ModuleType(module)
        sys.modules[module] = m
    if not hasattr(m, name):
        cls = type(name, (Loaded,), {"__module__": module, "__qualname__": name})
        setattr(m, name, cls)
    return getattr(m, name)


class Reader(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if module in ("builtins", "__builtin__") and name in ("set", "frozenset"):
            return {"set": set, "frozenset": frozenset}[name]
        return stand_in(module, name)

    def persistent_load(self, pid):
        return Pid(pid)


class Writer(pickle.Pickler):
    def persistent_id(self, obj):
        return obj.pid if isinstance(obj, Pid) else None


def tensor_of(v):
    """The `_rebuild_tensor_v2` call of a tensor or parameter value."""
    while type(v).__name__ == "_rebuild_parameter":
        v = v.args[0]
    assert type(v).__name__ == "_rebuild_tensor_v2", type(v)
    return v


def state_dict(module, prefix, out):
    st = module.state
    skip = set(st.get("_non_persistent_buffers_set", ()) or ())
    for name, v in st["_parameters"].items():
        if v is not None:
            out[prefix + name] = tensor_of(v)
    for name, v in st["_buffers"].items():
        if v is not None and name not in skip:
            out[prefix + name] = tensor_of(v)
    for name, sub in st["_modules"].items():
        if sub is not None:
            state_dict(sub, prefix + name + ".", out)


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "fixtures", "torch", "more")
    src = zipfile.ZipFile(os.path.join(d, "module.pt"))
    pkl = next(n for n in src.namelist() if n.endswith("/data.pkl"))
    model = Reader(io.BytesIO(src.read(pkl))).load()
    tensors = collections.OrderedDict()
    state_dict(model, "", tensors)
    rebuild = stand_in("torch._utils", "_rebuild_tensor_v2")
    sd = collections.OrderedDict()
    for name, t in tensors.items():
        storage, offset, size, stride = t.args[:4]
        sd[name] = Call(rebuild, (storage, offset, size, stride, False,
                                  collections.OrderedDict()))
    buf = io.BytesIO()
    Writer(buf, protocol=2).dump(sd)
    out = os.path.join(d, "module_sd.pt")
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for info in src.infolist():
            data = buf.getvalue() if info.filename == pkl else src.read(info)
            z.writestr(info.filename, data)
    print(f"{out}: {len(sd)} tensors: {', '.join(sd)}")


if __name__ == "__main__":
    main()
