#!/usr/bin/env python3
"""Keras files written by the real writers (issue 73), for the shapes no PyPI package ships
(fixtures/real/keras has the legacy `.h5` files other projects wrote):

- Keras 3 on the TensorFlow and the JAX backend: a small model (Conv1D, a bfloat16 Dense,
  a Dense quantized to int8 by `layer.quantize("int8")`, LayerNormalization, an Embedding),
  compiled and trained one step so the optimizer's variables are saved too, as `.keras`
  (`model.save`), `.weights.h5` (`save_weights`), sharded weights (`save_weights(
  "….weights.json", max_shard_size=…)`) and Keras 3's legacy `.h5` (`model.save("….h5")`);
- tf-keras (Keras 2 API): the same kind of model (without bf16/int8, which it lacks) as legacy
  `.h5` full model and `save_weights` `.h5`.

`expected.json` is h5py's read of each file (scripts/real_keras_expected.py's format), plus
"writers" (package versions per file) and "reloaded": for each `.keras`/`.weights.h5`, whether
the writer's own `load_model`/`load_weights` gives back the same weights.

Keras never writes a chunked or filtered dataset (its h5 writers call `create_dataset(name,
data=…)` with no chunks or compression), so none of these files has one.

  python scripts/gen_keras.py fixtures/keras
(in a venv with keras 3, tensorflow-cpu, jax[cpu] and tf-keras; `--backend X` is internal.)
"""
import json
import os
import subprocess
import sys

OUT = sys.argv[1]


def keras3(backend):
    os.environ["KERAS_BACKEND"] = backend
    import keras
    import numpy as np

    keras.utils.set_random_seed(0)
    inp = keras.Input((6, 4), name="x")
    tok = keras.Input((3,), dtype="int32", name="tokens")
    h = keras.layers.Conv1D(8, 3, name="conv")(inp)
    h = keras.layers.GlobalAveragePooling1D(name="pool")(h)
    e = keras.layers.Flatten(name="flat")(keras.layers.Embedding(20, 4, name="embed")(tok))
    h = keras.layers.Concatenate(name="cat")([h, e])
    h = keras.layers.Dense(16, activation="relu", dtype="bfloat16", name="dense_bf16")(h)
    h = keras.layers.LayerNormalization(name="norm")(h)
    h = keras.layers.Dense(12, name="dense_int8")(h)
    out = keras.layers.Dense(3, name="head")(h)
    model = keras.Model([inp, tok], out, name="small")
    model.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(0).normal(size=(4, 6, 4)).astype("float32")
    t = np.random.default_rng(1).integers(0, 20, size=(4, 3)).astype("int32")
    model.fit([x, t], np.zeros((4, 3), "float32"), epochs=1, verbose=0)
    model.get_layer("dense_int8").quantize("int8")

    stem = os.path.join(OUT, f"keras-{keras.__version__}_{backend}")
    model.save(stem + ".keras")
    model.save_weights(stem + ".weights.h5")
    model.save_weights(stem + "_sharded.weights.json", max_shard_size=0.000002)
    try:
        model.save(stem + "_legacy.h5")
        legacy = "written"
    except Exception as e:  # noqa: BLE001 - recorded: Keras 3 may refuse legacy h5
        legacy = f"{type(e).__name__}: {e}"

    want = [np.asarray(w) for w in model.get_weights()]
    back = keras.saving.load_model(stem + ".keras")
    ok_keras = all(np.array_equal(a, np.asarray(b)) for a, b in zip(want, back.get_weights()))
    back.load_weights(stem + ".weights.h5")
    ok_w = all(np.array_equal(a, np.asarray(b)) for a, b in zip(want, back.get_weights()))
    print(json.dumps({"keras": keras.__version__, "backend": backend, "stem": stem,
                      "reloaded": {".keras": ok_keras, ".weights.h5": ok_w},
                      "legacy_h5": legacy}))


def tf_keras():
    import numpy as np
    import tensorflow as tf
    import tf_keras as keras

    tf.keras.utils.set_random_seed(0)
    model = keras.Sequential([
        keras.layers.Input((6, 4)),
        keras.layers.Conv1D(8, 3, name="conv"),
        keras.layers.BatchNormalization(name="bn"),
        keras.layers.LSTM(5, name="lstm"),
        keras.layers.Dense(3, name="head"),
    ], name="small")
    model.compile(optimizer="adam", loss="mse")
    x = np.random.default_rng(0).normal(size=(4, 6, 4)).astype("float32")
    model.fit(x, np.zeros((4, 3), "float32"), epochs=1, verbose=0)
    stem = os.path.join(OUT, f"tf-keras-{keras.__version__}")
    model.save(stem + "_model.h5")
    model.save_weights(stem + "_weights.h5")
    want = model.get_weights()
    back = keras.models.load_model(stem + "_model.h5")
    ok = all(np.array_equal(a, b) for a, b in zip(want, back.get_weights()))
    print(json.dumps({"keras": keras.__version__, "backend": "tensorflow", "stem": stem,
                      "reloaded": {"_model.h5": ok}}))


if __name__ == "__main__":
    if "--backend" in sys.argv:
        b = sys.argv[sys.argv.index("--backend") + 1]
        tf_keras() if b == "tf-keras" else keras3(b)
        sys.exit(0)
    os.makedirs(OUT, exist_ok=True)
    runs = []
    for b in ("tensorflow", "jax", "tf-keras"):
        r = subprocess.run([sys.executable, __file__, OUT, "--backend", b],
                           capture_output=True, text=True, env={**os.environ,
                                                                "TF_CPP_MIN_LOG_LEVEL": "3"})
        if r.returncode:
            sys.exit(f"{b}: {r.stderr[-3000:]}")
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import h5py
    import numpy
    from real_keras_expected import write_expected
    writers = {r["stem"].split(os.sep)[-1]: {k: v for k, v in r.items() if k != "stem"}
               for r in runs}
    import keras
    import tensorflow
    writers["versions"] = {"keras": keras.__version__, "tensorflow": tensorflow.__version__,
                           "h5py": h5py.__version__, "numpy": numpy.__version__}
    try:
        import jax
        writers["versions"]["jax"] = jax.__version__
    except ImportError:
        pass
    files = write_expected(OUT, {"writers": writers})
    for k, v in files.items():
        print(k, len(v["datasets"]))
