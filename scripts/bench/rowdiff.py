"""Target 15 of scripts/bench.sh: `modelfs diff --rows` (issue 42) of two saves of a 10 M-id
table with 1 % of ids changed, 0.1 % removed and 0.1 % added, for three writers:
- a TF MutableHashTable written by TensorFlow (gen_hashtable.py; the next save made in
  TensorFlow from the first: remove, insert);
- a Monolith table, 16 shards (gen_monolith ... next);
- an Angel embedding, TextColumnFormat (gen_angel.py emb ... next).
Figures: every difference found and no other (against the generator's truth file); the time
against `modelfs verify` of both saves (each reads every byte and checks every checksum),
page cache warm; the CLI's peak RSS (GNU time's %M) against 64 MiB."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
N = int(os.environ.get("ROWDIFF_IDS", "10000000"))
# A comma list of writers to run (tf, monolith, angel); all when unset.
ONLY = set(filter(None, os.environ.get("ROWDIFF_ONLY", "").split(",")))
DIM = 16


def run_measured(argv, env, stdout=subprocess.DEVNULL):
    """(seconds, peak RSS in MiB, exit status) of one command. The peak is GNU time's: a
    child forked from this python carries the python's resident set into its ru_maxrss
    (the kernel keeps the larger of the pre-exec and post-exec high-water marks)."""
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"rowdiff-rss-{os.getpid()}")
    t = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-o", out, "-f", "%M", *argv], stdout=stdout,
                       stderr=subprocess.DEVNULL, env=env)
    secs = time.perf_counter() - t
    with open(out) as f:
        kib = int(f.read().split()[-1])
    os.remove(out)
    return secs, kib / 1024, p.returncode


def warm(path):
    subprocess.run(f"find {path} -type f -exec cat {{}} + > /dev/null", shell=True)


def truth_of(path):
    with open(path) as f:
        return sorted(tuple(line.split("\t")[:2]) for line in f.read().splitlines())


def check(out_path, truth):
    got = []
    with open(out_path) as f:
        for line in f:
            if line.startswith("#"):
                continue
            i, what, _ = line.rstrip("\n").split("\t")
            got.append((i, what))
    got.sort()
    missing = len(set(truth) - set(got))
    extra = len(set(got) - set(truth))
    return len(got), missing, extra


def fixtures(ctx):
    """(name, A, B, table, truth file) of each writer, generated when missing."""
    root = os.path.join(ctx.WORK, "rowdiff")
    out = []
    py = os.environ.get("TF_PYTHON", "python3")
    tf = os.path.join(root, "tf")
    if not os.path.exists(os.path.join(tf, "b", "truth")):
        ctx.log(f"generating two saves of a {N}-id MutableHashTable with TensorFlow")
        subprocess.run([py, os.path.join(HERE, "gen_hashtable.py"), os.path.join(tf, "a"),
                        str(N), str(DIM), os.path.join(tf, "b")], check=True)
    out.append(("TF MutableHashTable", os.path.join(tf, "a", "ckpt"), os.path.join(tf, "b", "ckpt"),
                "m/emb", os.path.join(tf, "b", "truth")))
    mono = os.path.join(root, "monolith")
    table = "MonolithHashTable_diff_0"
    for side, extra in (("a", []), ("b", ["next"])):
        if not os.path.exists(os.path.join(mono, side, f"{table}.samples.json")):
            ctx.log(f"generating Monolith save {side} ({N} ids)")
            subprocess.run([ctx.GEN_MONOLITH, os.path.join(mono, side, "assets"), table, str(N),
                            str(DIM), "16", *extra], check=True)
    out.append(("Monolith", os.path.join(mono, "a"), os.path.join(mono, "b"),
                f"hash_tables/{table}", os.path.join(mono, "b", f"{table}.truth")))
    angel = os.path.join(root, "angel")
    for side, extra in (("a", []), ("b", ["next"])):
        if not os.path.exists(os.path.join(angel, side, "emb", "meta")):
            ctx.log(f"generating Angel embedding save {side} ({N} ids)")
            subprocess.run([sys.executable, os.path.join(HERE, "gen_angel.py"),
                            os.path.join(angel, side), "emb", str(N), str(DIM), "8", *extra],
                           check=True)
    out.append(("Angel embedding", os.path.join(angel, "a"), os.path.join(angel, "b"), "emb",
                os.path.join(angel, "b", "emb.truth")))
    return out


def bench_rowdiff(ctx):
    env = dict(ctx.env)
    opts = ["-o", "cache_dir=none"]
    for name, a, b, table, truth_path in fixtures(ctx):
        if ONLY and name.split()[0].lower() not in ONLY:
            continue
        truth = truth_of(truth_path)
        for side in (a, b):
            warm(side if os.path.isdir(side) else os.path.dirname(side))
        out_path = os.path.join(ctx.WORK, "rowdiff", "out.txt")
        verifies, diffs, hwms, exact = [], [], [], []
        for _ in range(ctx.RUNS):
            v = 0.0
            for side in (a, b):
                secs, _, code = run_measured([ctx.MODELFS, "verify", *opts, side], env)
                if code != 0:
                    raise RuntimeError(f"verify {side}: exit {code}")
                v += secs
            with open(out_path, "w") as f:
                secs, hwm, code = run_measured([ctx.MODELFS, "diff", "--rows", *opts, a, b, table],
                                               env, stdout=f)
            if code != 1:
                raise RuntimeError(f"diff --rows {name}: exit {code}")
            verifies.append(v)
            diffs.append(secs)
            hwms.append(hwm)
            exact.append(check(out_path, truth))
        v, d, hwm = ctx.median(verifies), ctx.median(diffs), max(hwms)
        found, missing, extra = exact[-1]
        ok = all(m == 0 and e == 0 for _, m, e in exact)
        ctx.add(15, f"diff --rows {name} {N // 10**6} M ids: differences found (missing / false)",
                f"{found} of {len(truth)} ({missing} / {extra})", "all, none false", ok)
        ctx.add(15, f"diff --rows {name}: time vs verify of both saves",
                f"{d:.2f} vs {v:.2f} s = {d / v:.2f}x", "<= 2x", d / v <= 2.0)
        ctx.add(15, f"diff --rows {name}: CLI peak RSS (GNU time)", f"{hwm:.0f} MiB",
                "<= 64 MiB", hwm <= 64)
