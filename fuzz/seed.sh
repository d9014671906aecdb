#!/bin/sh
# Seeds fuzz/corpus/<target>/ from the committed fixtures (fixtures/tf, fixtures/angel) and the
# real-world models (../shared/realworld, or $MODELFS_SHARED/realworld). Idempotent: seed files
# are named by content hash. Usage: fuzz/seed.sh
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
    elif name.endswith(".safetensors"):
        put("safetensors", data)
    elif name.endswith((".npy", ".npz")):
        put("numpy", data)
    elif data[:4] == b"GGUF":
        put("gguf", data)
    elif name.endswith((".pt", ".bin")) and data[:4] == b"PK\x03\x04":
        put("torch", data)
        import zipfile
        with zipfile.ZipFile(p) as z:
            for n in z.namelist():
                if n.endswith("/data.pkl"):
                    put("torch", z.read(n))  # the pickle alone
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
