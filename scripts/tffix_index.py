"""A minimal reader of TF bundle .index files, used only to check generated fixtures
(data-block count of the multi-block case, slice order of partitioned entries). No TF needed.
Handles what TF's bundle writer produces: uncompressed blocks (type 0)."""
import struct

MAGIC = bytes.fromhex("57fb808b247547db")


def _varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if not c & 0x80:
            return v, i


def _block(data, off, size):
    if data[off + size] != 0:
        raise ValueError("compressed block: not handled here")
    blk = data[off:off + size]
    nres = struct.unpack_from("<I", blk, size - 4)[0]
    end = size - 4 * (nres + 1)
    i, key, out = 0, b"", []
    while i < end:
        shared, i = _varint(blk, i)
        unshared, i = _varint(blk, i)
        vlen, i = _varint(blk, i)
        key = key[:shared] + blk[i:i + unshared]
        i += unshared
        out.append((key, blk[i:i + vlen]))
        i += vlen
    return out


def read_index(path):
    """-> (list of (separator, handle) of the index block, list of (key, value) of all entries)."""
    data = open(path, "rb").read()
    if data[-8:] != MAGIC:
        raise ValueError("not a table")
    foot = data[-48:-8]
    _, i = _varint(foot, 0)
    _, i = _varint(foot, i)
    ioff, i = _varint(foot, i)
    isize, i = _varint(foot, i)
    index = []
    entries = []
    for sep, val in _block(data, ioff, isize):
        off, j = _varint(val, 0)
        size, _ = _varint(val, j)
        index.append((sep, (off, size)))
        entries.extend(_block(data, off, size))
    return index, entries


def _fields(buf):
    """Top-level protobuf fields: [(number, wire type, value)] (value bytes for wire type 2)."""
    i, out = 0, []
    while i < len(buf):
        tag, i = _varint(buf, i)
        num, wt = tag >> 3, tag & 7
        if wt == 0:
            v, i = _varint(buf, i)
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        elif wt == 2:
            n, i = _varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wt)
        out.append((num, wt, v))
    return out


def slice_extents(entry_value, shape):
    """BundleEntryProto.slices as [[[start, length], …], …] (whole dims spelled out)."""
    out = []
    for num, _, sl in _fields(entry_value):
        if num != 7:
            continue
        ext = []
        for d, (_, _, e) in enumerate(f for f in _fields(sl) if f[0] == 1):
            fs = {n: v for n, _, v in _fields(e)}
            ext.append([fs.get(1, 0), fs[2]] if 2 in fs else [0, shape[d]])
        out.append(ext)
    return out


def slice_specs(entry_value, shape):
    """BundleEntryProto.slices as SaveV2/RestoreV2 spec strings ("10 4 0,4:-"), in list order;
    a whole dimension (no length) is "-"."""
    out = []
    for num, _, sl in _fields(entry_value):
        if num != 7:
            continue
        ext = []
        for _, _, e in (f for f in _fields(sl) if f[0] == 1):
            fs = {n: v for n, _, v in _fields(e)}
            ext.append("%d,%d" % (fs.get(1, 0), fs[2]) if 2 in fs else "-")
        out.append(" ".join(str(d) for d in shape) + " " + ":".join(ext))
    return out
