#!/bin/sh
# Seeds fuzz/corpus/<target>/ from the committed fixtures (fixtures/, including fixtures/real) and
# the real-world models (../shared/realworld, or $MODELFS_SHARED/realworld). Idempotent: seed
# files are named by content hash. Usage: fuzz/seed.sh
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
shared=${MODELFS_SHARED:-}
for c in "$shared" "$root/../shared" /work/shared; do
    if [ -n "$c" ] && [ -d "$c/realworld" ]; then shared=$c; break; fi
done
exec python3 - "$root" "$here/corpus" "$shared" <<'PY'
import hashlib, json, os, re, struct, sys

root, corpus, shared = sys.argv[1], sys.argv[2], sys.argv[3]
trees = [os.path.join(root, "fixtures")]
if shared and os.path.isdir(os.path.join(shared, "realworld")):
    trees.append(os.path.join(shared, "realworld"))
MAX = 64 << 10  # libFuzzer -max_len used in README

def put(target, data):
    if len(data) > MAX:
        return
    d = os.path.join(corpus, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)

def files():
    for t in trees:
        for dp, _, fs in os.walk(t):
            for f in fs:
                yield os.path.join(dp, f)

def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1
        v |= (c & 0x7f) << s; s += 7
        if c < 0x80:
            return v, i

def block_entries(b):
    """Entries of an uncompressed LevelDB block (the fixtures are written without Snappy)."""
    n = struct.unpack_from("<I", b, len(b) - 4)[0]
    end = len(b) - 4 - 4 * n
    i, key, out = 0, b"", []
    while i < end:
        shared_, i = varint(b, i); nonshared, i = varint(b, i); vlen, i = varint(b, i)
        key = key[:shared_] + b[i:i + nonshared]; i += nonshared
        out.append((key, b[i:i + vlen])); i += vlen
    return out

def table_entries(t):
    try:
        f = t[-48:]
        _, i = varint(f, 0); _, i = varint(f, i)
        off, i = varint(f, i); size, i = varint(f, i)
        if t[off + size] != 0:
            return []
        out = []
        for _, h in block_entries(t[off:off + size]):
            o, j = varint(h, 0); s, j = varint(h, j)
            if t[o + s] != 0:
                continue
            out += block_entries(t[o:o + s])
        return out
    except Exception:
        return []

def envelope(b):
    if len(b) >= 5 and struct.unpack(">I", b[:4])[0] == len(b) - 4:
        return b[4:]
    if len(b) >= 3 and struct.unpack(">H", b[:2])[0] == len(b) - 2:
        return b[2:]
    return b

def pickle_ends(data, n):
    """End offsets of the first n pickles of data (pickletools stops at each STOP)."""
    import io, pickletools
    f, ends = io.BytesIO(data), []
    for _ in range(n):
        for _ in pickletools.genops(f):
            pass
        ends.append(f.tell())
    return ends

def torch_seeds(p, data):
    """torch: the file (<= 64 KiB) and its object pickle; torch_walk: the object pickle;
    torch_legacy: a legacy file past its third pickle (the target prepends those three)."""
    put("torch", data)
    try:
        if data[:4] == b"PK\x03\x04":
            import zipfile
            with zipfile.ZipFile(p) as z:
                for n in z.namelist():
                    if n == "data.pkl" or n.endswith("/data.pkl"):
                        pkl = z.read(n)
                        put("torch", pkl)  # the pickle alone
                        put("torch_walk", pkl)
        else:
            e = pickle_ends(data, 4)  # magic number, protocol version, sys info, objects
            put("torch_legacy", data[e[2]:][:MAX])
            put("torch_walk", data[e[2]:e[3]])
    except Exception as ex:
        print("torch seeds: skipped", p, ex, file=sys.stderr)

def gguf_blocks(data):
    """gguf_blocks: each tensor's bytes of a GGUF file, in 4 KiB chunks."""
    def take(fmt):
        v = struct.unpack_from(fmt, data, pos[0]); pos[0] += struct.calcsize(fmt); return v[0]
    def string():
        n = take("<Q"); s_ = data[pos[0]:pos[0] + n]; pos[0] += n; return s_
    sizes = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
             10: "<Q", 11: "<q", 12: "<d"}
    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et = take("<I"); n = take("<Q")
            return [value(et) for _ in range(n)]
        return take(sizes[t])
    try:
        pos = [8]
        nt = take("<Q"); nkv = take("<Q")
        align = 32
        for _ in range(nkv):
            k = string(); v = value(take("<I"))
            if k == b"general.alignment":
                align = v
        offs = []
        for _ in range(nt):
            string(); nd = take("<I")
            for _ in range(nd):
                take("<Q")
            take("<I"); offs.append(take("<Q"))
        start = (pos[0] + align - 1) // align * align
        offs = sorted(set(offs)) + [len(data) - start]
        for a, b in zip(offs, offs[1:]):
            t = data[start + a:start + b]
            for i in range(0, len(t), 4096):
                put("gguf_blocks", t[i:i + 4096])
    except Exception as ex:
        print("gguf_blocks seeds: skipped", ex, file=sys.stderr)

# The torch fixtures, zip or legacy, whatever their names.
for d in ("torch", "torch/more", "real/torch"):
    d = os.path.join(root, "fixtures", d)
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        fp = os.path.join(d, f)
        if not os.path.isfile(fp):
            continue
        with open(fp, "rb") as fh:
            data = fh.read()
        if data[:4] == b"PK\x03\x04" or data[:2] == b"\x80\x02":
            torch_seeds(fp, data)

for p in files():
    name = os.path.basename(p)
    data = open(p, "rb").read()
    if name.endswith(".index"):
        put("table", data)
        prefix = p[:-len(".index")]
        d = os.path.dirname(p)
        shards = sorted(f for f in os.listdir(d)
                        if f.startswith(os.path.basename(prefix) + ".data-"))
        shard0 = open(os.path.join(d, shards[0]), "rb").read() if shards else b""
        put("bundle", struct.pack("<I", len(data)) + data + shard0[:16 << 10])
        for k, v in table_entries(data)[:300]:
            put("bundle_entry", b"\x01" + v)
            put("bundle_entry", b"\x03" + v)
    elif name.endswith((".pb", ".meta")):
        put("graph", data)
    elif name.endswith(".pbtxt"):
        put("graph_text", data[:64 << 10])
    elif data[-8:] == bytes.fromhex("57fb808b247547db"):
        put("v1", data)  # an SSTable that is not a bundle index: a V1 checkpoint
    elif ".data-" in name:
        put("object_graph", data[-2048:])
    elif re.search(r"-\d{5}-of-\d{5}$", name):
        put("monolith", data[:MAX])  # a Monolith hash-table shard
    elif name.endswith(".onnx"):
        put("onnx", data[:MAX])
    elif name.endswith((".keras", ".h5", ".hdf5")):
        put("keras", data[:MAX])  # a Keras zip or an HDF5 file
    elif name == ".metadata" or re.fullmatch(r"__\d+\.metadata", name):
        put("dcp", data[:MAX])  # a PyTorch DCP checkpoint's metadata pickle
    elif name.endswith(".safetensors"):
        put("safetensors", data[:MAX])  # whole, or its first 64 KiB (header and first tensors)
    elif name.endswith((".npy", ".npz")):
        put("numpy", data[:MAX])
    elif data[:4] == b"GGUF":
        put("gguf", data[:MAX])
        if name in ("kquants.gguf", "ggml_c.gguf"):
            gguf_blocks(data)
    elif name.endswith((".pt", ".bin")) and data[:4] == b"PK\x03\x04":
        torch_seeds(p, data)
    elif name == "checkpoint":
        put("checkpoint_state", data)
    elif name in ("_meta", "meta"):
        put("angel_meta", data)
        js = envelope(data)
        put("angel_meta", js)
        try:
            meta = json.loads(js)
            files_ = sorted({pm.get("fileName", "0")
                             for pm in meta.get("partMetas", {}).values()})
        except Exception:
            files_ = ["0"]
        for fname in files_[:1]:
            fp = os.path.join(os.path.dirname(p), fname)
            body = open(fp, "rb").read() if os.path.isfile(fp) else b""
            for sel in (0x08, 0x18):
                put("angel_decode", bytes([sel]) + struct.pack("<I", len(js)) + js + body)
# tensor_proto: dtype float, shape [3], float_val 1.5; dtype string, shape [2], string_val "a".
put("tensor_proto", bytes([0x08, 1, 0x12, 4, 0x12, 2, 0x08, 3, 0x2a, 4]) + struct.pack("<f", 1.5))
put("tensor_proto", bytes([0x08, 7, 0x12, 4, 0x12, 2, 0x08, 2, 0x42, 1]) + b"a")
# text_render: kind/dtype ‖ rank ‖ dims ‖ separator ‖ flags ‖ payload (see the target).
payload = bytes(range(256)) * 4
for kind in list(range(22)) + [0xC0, 0xC1, 0xC2, 0xC3]:
    for rank, dims in ((0, b""), (1, b"\x05"), (2, b"\x03\x04"), (3, b"\x02\x00\x03")):
        for sep, flags in ((0, 0x03), (2, 0x8a), (3, 0x25)):
            put("text_render", bytes([kind, rank]) + dims + bytes([sep, flags]) + payload)
for t in sorted(os.listdir(corpus)):
    print(t, len(os.listdir(os.path.join(corpus, t))))
PY
