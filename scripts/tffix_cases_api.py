"""Fixture cases written through TF's high-level APIs: Keras + optimizers, tf.train.Checkpoint,
CheckpointManager, TF1 Saver, SavedModel (TF2 and TF1 builder).

Timestamps in `checkpoint` state files are rewritten with TF's own state writer
(update_checkpoint_state_internal) to fixed values, so that regenerating gives identical bytes.
"""
import contextlib
import os
import shutil

import numpy as np
import tensorflow as tf
from tensorflow.python.checkpoint import checkpoint_management as cm

from tffix_record import Expected, record_checkpoint

FIXED_TIMES = [1700000000.125, 1700000100.5, 1700000200.75]
LAST_PRESERVED = 1699999000.0


@contextlib.contextmanager
def cwd(path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def fix_state_file(save_dir, paths, relative):
    """Rewrites <save_dir>/checkpoint with TF's writer, same paths, fixed timestamps."""
    cm.update_checkpoint_state_internal(
        save_dir=save_dir, model_checkpoint_path=paths[-1], all_model_checkpoint_paths=paths,
        save_relative_paths=relative, all_model_checkpoint_timestamps=FIXED_TIMES[-len(paths):],
        last_preserved_timestamp=LAST_PRESERVED)


def _train_one_step(model, opt):
    x = np.arange(15, dtype=np.float32).reshape(5, 3) / 10
    y = np.ones((5, 2), np.float32)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x) - y) ** 2)
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))


def _keras_case(d, keras, optimizer):
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)),
                              keras.layers.Dense(4, activation="relu", name="hidden"),
                              keras.layers.Dense(2, name="out")])
    _train_one_step(model, optimizer)
    ckpt_dir = os.path.join(d, "train")
    path = tf.train.Checkpoint(model=model, optimizer=optimizer).save(os.path.join(ckpt_dir, "ckpt"))
    fix_state_file(ckpt_dir, [path], relative=True)
    exp = Expected(d)
    listing = record_checkpoint(exp, path)
    exp.write("train/ckpt-1", listing, source="train")
    return listing


def case_adam_keras2(d):
    """tf_keras (Keras 2) + legacy Adam: classic `.OPTIMIZER_SLOT/optimizer/m|v` slot keys."""
    import tf_keras
    _keras_case(d, tf_keras, tf_keras.optimizers.legacy.Adam(0.01))
    return ("Keras 2 (tf_keras %s) Sequential trained one step with legacy Adam, saved by "
            "tf.train.Checkpoint(model, optimizer).save: .OPTIMIZER_SLOT/optimizer/m and v slot "
            "keys, optimizer/iter (int64), save_counter, a `checkpoint` state file" % tf_keras.__version__)


def case_keras_empty_prefix(d):
    """tf_keras `save_weights("weights/")`: files `weights/.index`, `weights/.data-…` and a
    `checkpoint` naming "."."""
    import tf_keras as keras
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)),
                              keras.layers.Dense(4, activation="relu", name="hidden"),
                              keras.layers.Dense(2, name="out")])
    with cwd(d):
        model.save_weights("weights/")
    exp = Expected(d)
    listing = record_checkpoint(exp, os.path.join(d, "weights/"))
    exp.write("weights/", listing, source="weights")
    return ("tf_keras `save_weights('weights/')`: a checkpoint with an empty base name "
            "(`weights/.index`, `weights/.data-00000-of-00001`), `checkpoint` naming \".\"")


def case_adam_keras3(d):
    """tf.keras (Keras 3) + Adam: no slot keys, optimizer/_variables/<i> instead."""
    import keras
    _keras_case(d, tf.keras, tf.keras.optimizers.Adam(0.01))
    return ("Keras 3 (%s) model trained one step with Adam, tf.train.Checkpoint(model, optimizer): "
            "optimizer/_variables/<i> and optimizer/_trainable_variables/<i> keys (model weights "
            "reached first through the optimizer)" % keras.__version__)


class RootWithTensors(tf.Module):
    """A root object that saves tensors of its own (keys starting with '/') besides children."""

    def __init__(self):
        super().__init__()
        self._own_v1 = tf.constant([9.0, 10.0])
        self._own_odd = tf.constant(42, tf.int32)

    def _serialize_to_tensors(self):
        return {"v1": self._own_v1, "x.y/z": self._own_odd}

    def _restore_from_tensors(self, restored_tensors):
        return tf.no_op()


def case_object_tf2(d):
    m = RootWithTensors()
    m.v = tf.Variable([1.0, 2.0, 3.0], name="v")
    setattr(m, "a.b", tf.Variable(3.5))
    setattr(m, "c/d", tf.Variable(4, dtype=tf.int64))
    setattr(m, "dots..and.S", tf.Variable([0.5]))
    m.s = tf.Variable(b"hello\nworld \xff", dtype=tf.string)
    m.bf = tf.Variable(tf.constant([0.1, -2.0], tf.bfloat16))
    m.d = {"x.y/z": tf.Variable([5.0]), "plain": tf.Variable([[1, 2], [3, 4]], dtype=tf.int32)}
    m.lst = [tf.Variable(1.0), tf.Variable(2.0)]
    m.child = tf.Module()
    m.child.w = tf.Variable([[1.0, -1.0]])
    m.child.shared = m.v  # shared child: saved once, under the first path found
    m.child.back = m      # cycle
    m.table = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, default_value=-1)
    m.table.insert(tf.constant([b"a", b"b", b"\xff"]), tf.constant([1, 2, 3], tf.int64))
    prefix = tf.train.Checkpoint(root=m).write(os.path.join(d, "obj"))
    exp = Expected(d)
    listing = record_checkpoint(exp, prefix)
    exp.write("obj", listing)
    return ("TF2 object-based tf.train.Checkpoint.write of a tf.Module: object graph, names with "
            "'.' and '/' (escaped .. and .S), a string variable, a bf16 variable, dict and list "
            "children, a shared child, a cycle, a MutableHashTable (-keys/-values attributes), and "
            "a root that saves tensors itself (keys '/.ATTRIBUTES/v1' and the doubly escaped "
            "'/.ATTRIBUTES/x....y..Sz')")


def _tf1_graph(step_count):
    """A TF1 graph: W, b, a partitioned emb, AdamOptimizer; returns (saver, sess, emb specs)."""
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.set_random_seed(0)
        x = tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3) / 4)
        W = tf.compat.v1.get_variable("W", initializer=np.full((3, 2), 0.5, np.float32))
        b = tf.compat.v1.get_variable("b", initializer=np.array([0.1, -0.1], np.float32))
        emb_full = np.arange(30, dtype=np.float32).reshape(10, 3) / 10

        def emb_init(shape, dtype=None, partition_info=None):
            start = partition_info.single_offset(shape) if partition_info else 0
            return tf.constant(emb_full[start:start + shape[0]])

        emb = tf.compat.v1.get_variable("emb", shape=[10, 3], dtype=tf.float32,
                                        initializer=emb_init,
                                        partitioner=tf.compat.v1.fixed_size_partitioner(3))
        gs = tf.compat.v1.train.get_or_create_global_step()
        loss = tf.reduce_sum(tf.matmul(x, W) + b) + tf.reduce_sum(tf.square(tf.concat(list(emb), 0)))
        train = tf.compat.v1.train.AdamOptimizer(0.1).minimize(loss, global_step=gs)
        specs = [v._get_save_slice_info().spec for v in emb]
        saver = tf.compat.v1.train.Saver(max_to_keep=5)
        sess = tf.compat.v1.Session(graph=g)
        sess.run(tf.compat.v1.global_variables_initializer())
        for _ in range(step_count):
            sess.run(train)
    return g, saver, sess, train, specs


def _tf1_slice_specs(specs):
    return {k: specs for k in ("emb", "emb/Adam", "emb/Adam_1")}


def case_tf1_saver(d):
    g, saver, sess, _, specs = _tf1_graph(1)
    with cwd(d), g.as_default():
        path = saver.save(sess, "model.ckpt", global_step=1)
    sess.close()
    fix_state_file(d, [path], relative=False)  # path is relative already (we passed one)
    exp = Expected(d)
    listing = record_checkpoint(exp, os.path.join(d, path), slice_specs=_tf1_slice_specs(specs))
    exp.write(path, listing, source=".")
    return ("TF1 tf.compat.v1.train.Saver (graph mode) after one AdamOptimizer step: W beside "
            "W/Adam and W/Adam_1, beta1_power, global_step, a fixed_size_partitioner(3) variable "
            "emb (and its partitioned slots), .meta, relative `checkpoint` state file")


STALE_DIR = "/tmp/modelfs-fixture-gen/run7"


def case_tf1_saver_moved(d):
    shutil.rmtree(os.path.dirname(STALE_DIR), ignore_errors=True)
    os.makedirs(STALE_DIR)
    g, saver, sess, train, specs = _tf1_graph(1)
    paths = []
    with g.as_default():
        paths.append(saver.save(sess, os.path.join(STALE_DIR, "model.ckpt"), global_step=100))
        sess.run(train)
        paths.append(saver.save(sess, os.path.join(STALE_DIR, "model.ckpt"), global_step=200))
    sess.close()
    fix_state_file(STALE_DIR, paths, relative=False)
    dest = os.path.join(d, "run7")
    shutil.move(STALE_DIR, dest)
    shutil.rmtree(os.path.dirname(STALE_DIR), ignore_errors=True)
    exp = Expected(d)
    all_prefixes = {}
    listing = None
    for p in paths:
        rel = "run7/" + os.path.basename(p)
        sub = Expected(d)
        sub.arrays = exp.arrays  # one npz for the whole case
        lst = record_checkpoint(sub, os.path.join(d, rel), slice_specs=_tf1_slice_specs(specs))
        all_prefixes[rel] = {"listing": lst, "tensors": sub.tensors}
        exp.tensors, listing = sub.tensors, lst
    exp.write("run7/model.ckpt-200", listing, source="run7", all_prefixes=all_prefixes,
              note="saved under the absolute path %s, then moved here: `checkpoint` names "
              "stale absolute paths; all_prefixes holds the expected values of every prefix"
              % STALE_DIR)
    return ("TF1 Saver directory with two steps saved under an absolute path and then moved "
            "(stale absolute paths in `checkpoint`), .meta files")


def case_ckpt_manager(d):
    step = tf.Variable(0, dtype=tf.int64)
    w = tf.Variable(np.zeros((2, 2), np.float32))
    ckpt = tf.train.Checkpoint(step=step, w=w)
    run = os.path.join(d, "run")
    mgr = tf.train.CheckpointManager(ckpt, run, max_to_keep=2)
    paths = []
    for i in range(3):
        step.assign_add(1)
        w.assign_add(np.full((2, 2), 0.25 * (i + 1), np.float32))
        paths.append(mgr.save())
    kept = paths[-2:]
    fix_state_file(run, kept, relative=True)
    exp = Expected(d)
    all_prefixes = {}
    listing = None
    for p in kept:
        rel = "run/" + os.path.basename(p)
        sub = Expected(d)
        sub.arrays = exp.arrays
        lst = record_checkpoint(sub, p)
        all_prefixes[rel] = {"listing": lst, "tensors": sub.tensors}
        exp.tensors, listing = sub.tensors, lst
    exp.write("run/ckpt-3", listing, source="run", all_prefixes=all_prefixes,
              note="CheckpointManager(max_to_keep=2) after 3 saves: ckpt-1 was deleted; the state "
              "file names ckpt-2 and ckpt-3 (relative). all_prefixes holds every kept prefix")
    return ("tf.train.CheckpointManager(max_to_keep=2), 3 saves: two prefixes in one directory "
            "and a relative `checkpoint` state file (ckpt-1 deleted)")


class Affine(tf.Module):
    def __init__(self, vocab_path):
        super().__init__()
        self.w = tf.Variable(np.arange(6, dtype=np.float32).reshape(3, 2) / 2, name="w")
        self.b = tf.Variable([0.5, -0.5], name="b")
        self.label = tf.Variable(b"affine", dtype=tf.string)
        self.vocab = tf.saved_model.Asset(vocab_path)

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="x")])
    def serve(self, x):
        return {"y": tf.matmul(x, self.w) + self.b}


def _fix_fingerprint_uuid(path):
    """fingerprint.pb carries a random uuid (field 7); pin it so regeneration is reproducible.
    Everything else in the file is TF's (the hashes are deterministic)."""
    from tensorflow.core.protobuf import fingerprint_pb2
    fp = fingerprint_pb2.FingerprintDef()
    with open(path, "rb") as f:
        raw = f.read()
    fp.ParseFromString(raw)
    if not fp.uuid:
        return
    fp.uuid = "1" * 38  # same form as TF's: a decimal 128-bit number
    with open(path, "wb") as f:
        f.write(fp.SerializeToString(deterministic=True))


def case_savedmodel(d):
    vocab = os.path.join(d, "vocab_src.txt")
    with open(vocab, "w") as f:
        f.write("alpha\nbeta\n")
    m = Affine(vocab)
    out = os.path.join(d, "saved_model")
    tf.saved_model.save(m, out, signatures={"serving_default": m.serve})
    os.remove(vocab)
    _fix_fingerprint_uuid(os.path.join(out, "fingerprint.pb"))
    exp = Expected(d)
    listing = record_checkpoint(exp, os.path.join(out, "variables", "variables"))
    exp.write("saved_model/variables/variables", listing, source="saved_model")
    return ("TF2 tf.saved_model.save of a tf.Module with a serving_default signature, a string "
            "variable and an asset (mount the directory; tensors are variables/variables)")


def case_savedmodel_tf1(d):
    g = tf.Graph()
    out = os.path.join(d, "saved_model")
    with g.as_default(), tf.compat.v1.Session(graph=g) as sess:
        x = tf.compat.v1.placeholder(tf.float32, [None, 2], name="x")
        W = tf.compat.v1.get_variable("dense/kernel", initializer=np.array([[1.0], [2.0]], np.float32))
        b = tf.compat.v1.get_variable("dense/bias", initializer=np.array([0.5], np.float32))
        y = tf.identity(tf.matmul(x, W) + b, name="y")
        sess.run(tf.compat.v1.global_variables_initializer())
        sig = tf.compat.v1.saved_model.predict_signature_def({"x": x}, {"y": y})
        builder = tf.compat.v1.saved_model.Builder(out)
        builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        builder.save()
    exp = Expected(d)
    listing = record_checkpoint(exp, os.path.join(out, "variables", "variables"))
    exp.write("saved_model/variables/variables", listing, source="saved_model")
    return "TF1 tf.compat.v1.saved_model.Builder SavedModel (plain op-name keys dense/kernel, dense/bias)"


def case_sharded_maxsize(d):
    """TF2 size-based sharding (CheckpointOptions + MaxShardSizePolicy): several data files
    written by Checkpoint.write itself; tensors above the limit are split into slices."""
    m = tf.Module()
    m.small = tf.Variable(np.arange(8, dtype=np.float32) - 3.5)
    m.mid = tf.Variable(np.arange(64, dtype=np.float32).reshape(16, 4) / 4)
    m.big = tf.Variable(np.arange(96, dtype=np.float64).reshape(24, 4) * 1.5)
    m.ids = tf.Variable(np.arange(40, dtype=np.int64) * -7)
    m.label = tf.Variable(b"sharded", dtype=tf.string)
    policy = tf.train.experimental.MaxShardSizePolicy(max_shard_size=300)
    opts = tf.train.CheckpointOptions(experimental_sharding_callback=policy)
    prefix = tf.train.Checkpoint(m=m).write(os.path.join(d, "ckpt"), options=opts)
    exp = Expected(d)
    listing = record_checkpoint(exp, prefix)
    n = len([f for f in os.listdir(d) if ".data-" in f])
    exp.write("ckpt", listing, note="CheckpointOptions(experimental_sharding_callback="
              "MaxShardSizePolicy(max_shard_size=300)): %d data files" % n)
    sliced = [k for k, t in exp.tensors.items() if "slices" in t]
    return ("TF2 Checkpoint.write with MaxShardSizePolicy(300 bytes): %d data files%s"
            % (n, "; tensors split into slices: " + ", ".join(sliced) if sliced else ""))
