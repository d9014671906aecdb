"""Target 16: the Python package (issue 59) against the libraries people load with.

- `m[name]` of the 1 GiB float32 tensor W of a local TF checkpoint vs
  `tf.train.load_checkpoint(P).get_tensor(name)` (both check the tensor's CRC32C: modelfs
  with `cache_dir=none`, so no checksum remembered from a previous run is used), and vs
  `safe_open(...).get_tensor` of the same weights in a safetensors file;
- 4,000 random rows by id (ids drawn from the table's own keys) from a 10 M-id TF hash table:
  per-lookup p50/p99;
- the peak RSS of a process that holds W: against W's bytes.

Every file is read once beforehand (all readers read from the page cache); median of RUNS.
Usage: python_api.py W1G_PREFIX HASHTABLE_PREFIX WORKDIR (a python with modelfs installed,
tensorflow-cpu and safetensors for the baselines). Prints one JSON object.
"""

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import time

RUNS = int(os.environ.get("RUNS", "3"))


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def in_child(code):
    """Runs `code` in a fresh python; its last stdout line as JSON."""
    p = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, check=True,
                       text=True)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    w1g, table, work = sys.argv[1:4]
    out = {}
    data = w1g + ".data-00000-of-00001"
    warm(data)

    # Each load in its own process: a fresh process is what a user's script is, and each
    # measures its own peak RSS.
    mfs = f"""
import json, resource, time, modelfs
t = time.perf_counter(); a = modelfs.open({w1g!r}, cache_dir="none")["W"]; s = time.perf_counter() - t
print(json.dumps({{"s": s, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                   "bytes": a.nbytes, "sum": float(a[::4096].sum())}}))
"""
    tf = f"""
import json, os, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import tensorflow as tf
r = tf.train.load_checkpoint({w1g!r})
t = time.perf_counter(); a = r.get_tensor("W"); s = time.perf_counter() - t
print(json.dumps({{"s": s, "sum": float(a[::4096].sum())}}))
"""
    st_path = os.path.join(work, "w1g.safetensors")
    if not os.path.exists(st_path):
        import modelfs
        from safetensors.numpy import save_file
        save_file({"W": modelfs.open(w1g)["W"]}, st_path)
    warm(st_path)
    st = f"""
import json, time
from safetensors import safe_open
t = time.perf_counter()
with safe_open({st_path!r}, framework="numpy") as f:
    a = f.get_tensor("W")
s = time.perf_counter() - t
print(json.dumps({{"s": s, "sum": float(a[::4096].sum())}}))
"""
    mst = f"""
import json, time, modelfs
t = time.perf_counter(); a = modelfs.open({st_path!r})["W"]; s = time.perf_counter() - t
print(json.dumps({{"s": s, "sum": float(a[::4096].sum())}}))
"""
    runs = {k: [in_child(c) for _ in range(RUNS)] for k, c in
            [("modelfs_tf", mfs), ("tf", tf), ("safetensors", st), ("modelfs_st", mst)]}
    sums = {k: v[0]["sum"] for k, v in runs.items()}
    assert len(set(sums.values())) == 1, sums
    for k, v in runs.items():
        out[k + "_s"] = statistics.median(r["s"] for r in v)
    peak = max(r["rss"] for r in runs["modelfs_tf"])
    out["rss_over_array_mib"] = (peak - runs["modelfs_tf"][0]["bytes"]) / 2**20

    import modelfs
    m = modelfs.open(table, cache_dir=os.path.join(work, "rows-cache-py"))
    keys = m["m/emb/.ATTRIBUTES/table-keys"].ravel()
    t, _ = timed(lambda: m.rows("m/emb", [int(keys[0])]))
    out["rows_first_s"] = t
    random.seed(59)
    ids = [int(keys[random.randrange(len(keys))]) for _ in range(4000)]
    lat = []
    for i in ids:
        t, (found, _) = timed(lambda: m.rows("m/emb", [i]))
        assert len(found) == 1
        lat.append(t)
    lat.sort()
    out["rows_p50_ms"] = lat[len(lat) // 2] * 1e3
    out["rows_p99_ms"] = lat[int(len(lat) * 0.99)] * 1e3
    t, (found, rows) = timed(lambda: m.rows("m/emb", ids))
    out["rows_4000_at_once_s"] = t
    print(json.dumps(out))


if __name__ == "__main__":
    main()
