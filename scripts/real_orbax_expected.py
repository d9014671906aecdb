#!/usr/bin/env python3
"""Real Orbax checkpoints (issue 73): the backward-compatibility checkpoints that the
orbax-checkpoint wheel itself ships (written by an earlier Orbax, on Google's side, in May 2026),
copied byte for byte into fixtures/real/orbax/<name>/ (ORIGIN.md there lists each one's path in
the wheel and license), with `expected.json`: what Orbax 0.12.8's restore returns from each
(same format as fixtures/orbax/*/expected.json, see scripts/gen_orbax.py), or the error it raises
for a damaged one, and the OCDBT keys tensorstore lists (`keys.txt`, written next to
expected.json, outside the checkpoint).

  /tmp/orbaxv/bin/python scripts/real_orbax_expected.py [--copy]   (default fixtures/real/orbax)

(the venv of scripts/gen_orbax.py; `--copy` copies the checkpoints from the installed wheel first)
"""
import json
import os
import shutil
import sys

sys.argv, _args = sys.argv[:1], sys.argv[1:]
import gen_orbax  # noqa: E402  (sets the JAX env before importing jax)

import orbax.checkpoint as ocp  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "fixtures", "real", "orbax")
WHEEL_DIR = "orbax/checkpoint/experimental/v1/_src/testing/compatibility/checkpoints"

# name -> (path under WHEEL_DIR, item dir inside it or "", what it is)
PICKS = {
    "v0_direct": ("v0_checkpoints/direct_checkpoint/checkpoint_metadata_present/pytree_checkpointable_has_metadata", ""),
    "v0_direct_no_metadata": ("v0_checkpoints/direct_checkpoint/checkpoint_metadata_missing/pytree_checkpointable_missing_metadata", ""),
    "v0_composite": ("v0_checkpoints/composite_checkpoint/checkpoint_metadata_present/pytree_checkpointable_has_metadata", "state"),
    "v1_composite": ("v1_checkpoints/composite_checkpoint/checkpoint_metadata_present/pytree_checkpointable_has_metadata", "state"),
    "v0_direct_missing_d": ("v0_checkpoints/direct_checkpoint/critical_metadata_alterations/missing_pytree_data_dir_d", ""),
}


def plain_restore_error(path):
    try:
        ocp.PyTreeCheckpointer().restore(path)
    except Exception as e:
        return f"{type(e).__name__}: {str(e).replace(path, '<checkpoint>').splitlines()[0][:240]}"
    return None


def by_tensorstore(path):
    """Each `<param>/.zarray` (or zarr.json) array in the OCDBT kvstore, read by tensorstore."""
    import hashlib

    import tensorstore as ts

    base = {"driver": "ocdbt", "base": "file://" + path + "/"}
    try:
        keys = ts.KvStore.open(base).result().list().result()
    except Exception as e:
        return {"error": f"{type(e).__name__}: {str(e).replace(path, '<checkpoint>')[:240]}"}
    out = {}
    for key in sorted(keys):
        key = key.decode()
        for suffix, driver in (("/.zarray", "zarr"), ("/zarr.json", "zarr3")):
            if key.endswith(suffix):
                param = key[: -len(suffix)]
                a = ts.open({"driver": driver, "kvstore": dict(base, path=param + "/")}).result().read().result()
                out[param] = {"dtype": gen_orbax.dtype_name(a.dtype), "shape": list(a.shape),
                              "sha256": hashlib.sha256(gen_orbax.le_bytes(a)).hexdigest(),
                              "first": gen_orbax.first_values(a)}
    return out


def main():
    src_root = os.path.normpath(os.path.join(os.path.dirname(ocp.__file__), "..", "..", WHEEL_DIR))
    for name, (rel, item) in PICKS.items():
        dst = os.path.join(OUT, name)
        ckpt = os.path.join(dst, "checkpoint")
        if "--copy" in _args:
            shutil.rmtree(dst, ignore_errors=True)
            shutil.copytree(os.path.join(src_root, rel), ckpt)
        item_dir = os.path.join(ckpt, item) if item else ckpt
        extra = {"wheel_path": f"orbax_checkpoint-0.12.8 wheel: {WHEEL_DIR}/{rel}", "item_dir": item}
        item_dir = os.path.abspath(item_dir)  # Orbax's metadata() gives None for a relative path
        try:
            exp, _ = gen_orbax.expected_of(item_dir)
        except Exception:  # no tree metadata or damaged: what Orbax's plain restore says, and
            # what tensorstore reads from each zarr array it can find
            exp = {"restore_error": plain_restore_error(item_dir), "arrays_by_tensorstore": by_tensorstore(item_dir)}
        try:
            gen_orbax.write_keys(item_dir, dst)
        except Exception as e:
            with open(os.path.join(dst, "keys.txt"), "w") as f:
                f.write(f"# tensorstore could not list the OCDBT kvstore: {type(e).__name__}: {str(e)[:300]}\n")
        gen_orbax.write_expected(dst, exp, "orbax-checkpoint's own compatibility checkpoint (see ORIGIN.md)", extra)
        print(name, json.dumps(exp)[:200])


if __name__ == "__main__":
    main()
