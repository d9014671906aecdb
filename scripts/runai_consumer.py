#!/usr/bin/env python3
"""A real consumer of the consolidated `.safetensors` view (issue 73): Run:ai's Model Streamer
(PyPI `runai-model-streamer`, CPU) streams the mount's `.safetensors` of PyTorch DCP and Orbax
checkpoints, and every tensor it gives equals what the checkpoint's own framework read
(the fixtures' expected.json, by torch 2.15 and orbax-checkpoint 0.12.8).

Needs torch and runai-model-streamer (not the tests: they are evidence, run by hand):
    python3 -m venv /tmp/runaiv && /tmp/runaiv/bin/pip install runai-model-streamer numpy
    /tmp/runaiv/bin/python scripts/runai_consumer.py [MODELFS_BIN]
Exit 0 when every tensor of every checkpoint is equal."""

import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

from runai_model_streamer import SafetensorsStreamer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/modelfs")
F = os.path.join(ROOT, "fixtures")


def dcp_expected(name):
    e = json.load(open(os.path.join(F, "dcp/expected.json")))["fixtures"][name]
    planner = e["metadata"][0]["planner_data"]
    return {"/".join(str(p) for p in planner[fqn]): w["sha256"]
            for fqn, w in e["reads"].items() if "value" not in w}


def orbax_expected(name):
    e = json.load(open(os.path.join(F, f"orbax/{name}/expected.json")))
    want = {k: w["sha256"] for k, w in e["arrays"].items()}
    # Python scalars are saved as 0-d arrays (int64, float64, bool): their values restored.
    fmt = {"int": "<q", "float": "<d", "bool": "?"}
    for k, v in e["values"].items():
        if v.get("metadata") == "ScalarMetadata":
            want[k] = hashlib.sha256(struct.pack(fmt[v["python_type"]], v["value"])).hexdigest()
    return want


CASES = [("dcp/multi", dcp_expected("multi")), ("dcp/single", dcp_expected("single")),
         ("orbax/sharded_zarr3", orbax_expected("sharded_zarr3")),
         ("orbax/ocdbt", orbax_expected("ocdbt")), ("orbax/multiprocess", orbax_expected("multiprocess"))]


def main():
    failed = 0
    for src, want in CASES:
        mnt = tempfile.mkdtemp(prefix="runai-")
        subprocess.run([BIN, "mount", os.path.join(F, src), mnt], check=True)
        try:
            got = {}
            with SafetensorsStreamer() as s:
                s.stream_file(os.path.join(mnt, ".safetensors"))
                for name, t in s.get_tensors():
                    b = t.contiguous().view(-1).view(__import__("torch").uint8).numpy().tobytes()
                    got[name] = hashlib.sha256(b).hexdigest()
        finally:
            subprocess.run([BIN, "umount", mnt], check=True)
            os.rmdir(mnt)
        bad = [k for k in want if got.get(k) != want[k]]
        extra = sorted(set(got) - set(want))
        print(f"{src}: {len(got)} tensors streamed, {len(want) - len(bad)}/{len(want)} equal"
              + (f"; differ or missing: {bad}" if bad else "")
              + (f"; not expected: {extra}" if extra else ""))
        failed += bool(bad or extra)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
