"""Target 11 of scripts/bench.sh: `modelfs stats` and `modelfs diff` (issue 28) on the 1 GiB
float32 tensor W of targets 1-3, against `modelfs verify` of the same checkpoint (which reads
every byte and checks its CRC32C): stats >= 0.8x verify's speed, diff of two 1 GiB checkpoints
(W and a later "step" with other values, GEN_SEED=1) <= 1.5x one verify. Page cache warm for
all three (each is run once before timing); cache_dir=none so no remembered result is used."""

import os
import subprocess
import time


def bench_compare(ctx):
    w = ctx.fixture("w", 1, ctx.W_ROWS, ctx.W_COLS)
    d = os.path.join(ctx.WORK, "w-step2")
    w2 = os.path.join(d, "ckpt")
    if not os.path.exists(w2 + ".index"):
        os.makedirs(d, exist_ok=True)
        ctx.log("generating w-step2 (GEN_SEED=1)")
        subprocess.run([ctx.GEN, w2 + ".tmp", "1", str(ctx.W_ROWS), str(ctx.W_COLS)], check=True,
                       env=dict(os.environ, GEN_SEED="1"))
        os.rename(w2 + ".tmp.data-00000-of-00001", w2 + ".data-00000-of-00001")
        os.rename(w2 + ".tmp.index", w2 + ".index")
    opts = ["-o", "cache_dir=none"]

    def run(*args, ok=(0,)):
        t = time.perf_counter()
        r = subprocess.run([ctx.MODELFS, *args], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, env=ctx.env)
        if r.returncode not in ok:
            raise RuntimeError(f"modelfs {' '.join(args)}: exit {r.returncode}")
        return time.perf_counter() - t

    verify = lambda: run("verify", *opts, w)
    stats = lambda: run("stats", *opts, w)
    diff = lambda: run("diff", *opts, w, w2, ok=(1,))
    for f in (verify, stats, diff):
        f()
    v, s, df = [], [], []
    for _ in range(ctx.RUNS):
        v.append(verify())
        s.append(stats())
        df.append(diff())
    v, s, df = ctx.median(v), ctx.median(s), ctx.median(df)
    ctx.add(11, "stats of 1 GiB W vs verify (speed)", f"{s:.2f} vs {v:.2f} s = {v / s:.2f}x",
            ">= 0.8x", v / s >= 0.8)
    ctx.add(11, "diff of two 1 GiB ckpts vs one verify", f"{df:.2f} vs {v:.2f} s = {df / v:.2f}x",
            "<= 1.5x", df / v <= 1.5)
