#!/usr/bin/env python3
"""modelfs performance figures, each a ratio measured side by side in one run (see
scripts/bench.sh and README "Performance"). Prints a table with pass/fail per target.

Environment: MODELFS (binary), GEN (gen_bench_ckpt binary), BENCH_DIR (work dir),
RUNS (median of, default 5), LS_RUNS (default RUNS), SAVETXT_VALUES (values for the
numpy.savetxt rate, default 2,000,000), ONLY (comma list of target numbers to run;
7, remote sources over S3, needs moto_server and boto3: `pip install 'moto[server]'`;
9, Angel models at production size, generated once under BENCH_DIR/angel: ~4 GB).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MODELFS = os.environ.get("MODELFS", "target/release/modelfs")
GEN = os.environ.get("GEN", "target/release/examples/gen_bench_ckpt")
FORMAT_RATE = os.environ.get("FORMAT_RATE", "target/release/examples/format_rate")
CRC_RATE = os.environ.get("CRC_RATE", "target/release/examples/crc_rate")
WORK = os.environ.get("BENCH_DIR", "/tmp/modelfs-bench")
RUNS = int(os.environ.get("RUNS", "5"))
LS_RUNS = int(os.environ.get("LS_RUNS", str(RUNS)))
SAVETXT_VALUES = int(os.environ.get("SAVETXT_VALUES", "2000000"))
ONLY = set(filter(None, os.environ.get("ONLY", "").split(",")))

W_ROWS = W_COLS = 16384  # 1 GiB of float32
ROWS = []  # (target, figure, value, goal, verdict)


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def timed(cmd, env=None, stdout=subprocess.DEVNULL):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=stdout, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def median(xs):
    return statistics.median(xs)


def fixture(name, tensors, rows, cols):
    d = os.path.join(WORK, name)
    prefix = os.path.join(d, "ckpt")
    if not os.path.exists(prefix + ".index"):
        os.makedirs(d, exist_ok=True)
        log(f"generating {name}: {tensors} x [{rows},{cols}] float32")
        t = time.perf_counter()
        run([GEN, prefix + ".tmp", str(tensors), str(rows), str(cols)])
        os.rename(prefix + ".tmp.data-00000-of-00001", prefix + ".data-00000-of-00001")
        os.rename(prefix + ".tmp.index", prefix + ".index")
        log(f"  {time.perf_counter() - t:.1f} s")
    return prefix


class Env:
    """XDG_CACHE_HOME pointing into the work dir (never the user's own cache)."""

    def __init__(self, name):
        self.cache = os.path.join(WORK, "cache-" + name)
        self.env = dict(os.environ, XDG_CACHE_HOME=self.cache)

    def reset(self):
        shutil.rmtree(self.cache, ignore_errors=True)


def mountpoint():
    return tempfile.mkdtemp(prefix="mnt-", dir=WORK)


def mount(src, mnt, env, opts=None):
    cmd = [MODELFS, "mount"] + (["-o", opts] if opts else []) + [src, mnt]
    return timed(cmd, env=env)


def umount(mnt):
    subprocess.run([MODELFS, "umount", mnt], stderr=subprocess.DEVNULL)


def add(target, figure, value, goal, ok):
    verdict = "n/a" if ok is None else ("PASS" if ok else "MISS")
    ROWS.append((target, figure, value, goal, verdict))
    log(f"{target}: {figure} = {value} ({goal}) {verdict}")


def want(n):
    return not ONLY or str(n) in ONLY


# 1. Mount time, 100,000 tensors vs 10.
def bench_mount(many, ten, env):
    big, small = [], []
    for _ in range(RUNS):
        for src, out in ((ten, small), (many, big)):
            mnt = mountpoint()
            out.append(mount(src, mnt, env.env))
            os.stat(os.path.join(mnt, "block_000"))
            umount(mnt)
            os.rmdir(mnt)
    r = median(big) / median(small)
    add("1", "mount 100k / mount 10 tensors",
        f"{median(big)*1e3:.1f} ms / {median(small)*1e3:.1f} ms = {r:.2f}x", "<= 2x", r <= 2)


# 2. Walking the 100k mount (issue 56) vs tf.train.list_variables of the same checkpoint.
TF_LIST = """
import sys, time
t = time.perf_counter()
import tensorflow as tf
t1 = time.perf_counter()
tf.train.list_variables(sys.argv[1])
print(time.perf_counter() - t1)
"""


def tf_list_times(many):
    """(whole `python -c 'import tensorflow...; list_variables'`, the call alone) in s, or None."""
    py = os.environ.get("TF_PYTHON", sys.executable)
    whole, call = [], []
    for _ in range(RUNS):
        t = time.perf_counter()
        r = subprocess.run([py, "-c", TF_LIST, many], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        whole.append(time.perf_counter() - t)
        call.append(float(r.stdout.split()[-1]))
    return median(whole), median(call)


def walk(mnt):
    """The walk issue 56 measures on a fresh mount: ls -lR, its RSS, du -s, find -size +0,
    ls -lR again; and the entries shown."""
    pid = daemon_of(mnt)
    t = {"ls": timed(["ls", "-lR", mnt])}
    rss = status_kib(pid, "VmRSS:") * 1024 if pid else 0
    t["du"] = timed(["du", "-s", mnt])
    t["find"] = timed(["sh", "-c", f"find {mnt} -size +0 | wc -l"])
    t["ls2"] = timed(["ls", "-lR", mnt])
    shown = int(subprocess.run(["sh", "-c", f"find {mnt} | wc -l"], capture_output=True,
                               text=True).stdout) - 1
    return t, rss, shown


def bench_ls(many, env):
    tf = tf_list_times(many)
    runs = []
    for _ in range(LS_RUNS):
        env.reset()
        mnt = mountpoint()
        mount(many, mnt, env.env)
        runs.append(walk(mnt))
        umount(mnt)
        os.rmdir(mnt)
    m = {k: median([r[0][k] for r in runs]) for k in runs[0][0]}
    rss, shown = max(r[1] for r in runs), runs[0][2]
    goals = {"ls": 1.0, "du": 0.5, "find": 0.5, "ls2": 0.2}
    names = {"ls": "ls -lR", "du": "du -s after it", "find": "find -size +0 | wc -l",
             "ls2": "a second ls -lR"}
    for k, goal in goals.items():
        if tf:
            whole, call = tf
            add("2", f"100k mount (fresh, default options): {names[k]} vs TF list_variables "
                "(python -c: import + call; the call alone)",
                f"{m[k]:.2f} s vs {whole:.2f} s = {m[k] / whole:.2f}x (call {call:.2f} s: "
                f"{m[k] / call:.1f}x)", f"<= {goal}x", m[k] / whole <= goal)
        else:
            add("2", f"100k mount: {names[k]} (TF not installed)", f"{m[k]:.2f} s", "", None)
    limit = (64 << 20) + 300 * shown
    add("2", f"100k mount: daemon RSS after ls -lR ({shown:,} entries shown)",
        f"{rss / 2**20:.0f} MiB", f"<= 64 MiB + 300 B each = {limit / 2**20:.0f} MiB",
        rss <= limit)
    bench_s3_walk(many, env, m["ls"])


def bench_s3_walk(many, env, local_ls):
    """The same ls -lR over moto S3: time against the local walk, and what the server saw."""
    import shutil
    if not shutil.which("moto_server"):
        add("2", "100k mount over S3 (moto_server not installed)", "", "", None)
        return
    from remote import Moto
    m = Moto(WORK)
    try:
        m.upload("walk", many, "many/ckpt")
        s3env = dict(env.env, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                     AWS_REGION="us-east-1")
        times, seen = [], []
        for _ in range(LS_RUNS):
            env.reset()
            g0, h0 = m.gets("many/ckpt"), m.heads("many/ckpt")
            mnt = mountpoint()
            mount("s3://walk/many/ckpt", mnt, s3env, f"endpoint={m.url}")
            times.append(timed(["ls", "-lR", mnt]))
            time.sleep(1)  # the server logs a request when its body is sent
            seen.append((m.gets("many/ckpt") - g0, m.heads("many/ckpt") - h0))
            umount(mnt)
            os.rmdir(mnt)
        t = median(times)
        gets, heads = max(seen)
        add("2", "100k mount over S3 (moto): ls -lR vs the local walk; requests the server saw",
            f"{t:.2f} s vs {local_ls:.2f} s = {t / local_ls:.2f}x; {gets} GETs, {heads} HEADs",
            "<= 2x, no per-file GET/HEAD", t / local_ls <= 2 and gets + heads < 100)
    finally:
        m.stop()


def cat_time(path):
    return timed(["cat", path])


# 3. Raw reads against a plain FUSE passthrough (`bindfs -r` over the checkpoint's directory:
# one pread per request, no decoding, no checks): cat W.bin / W.npy first read on a fresh
# mount, fio 4 KiB random reads on a fresh mount; second reads against cat of the data file
# (and of a tmpfs copy, which like FUSE keeps its page cache in 4 KiB pages).
def bindfs_mount(src_dir, mnt):
    proc = subprocess.Popen(["bindfs", "-f", "-r", src_dir, mnt], stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while not os.path.ismount(mnt):
        if time.time() > deadline or proc.poll() is not None:
            raise RuntimeError("bindfs did not mount")
        time.sleep(0.01)
    return proc


def bindfs_umount(proc, mnt):
    subprocess.run(["fusermount3", "-u", mnt], stderr=subprocess.DEVNULL)
    proc.wait()


def fio_iops(path):
    out = run(["fio", "--name=r", f"--filename={path}", "--rw=randread", "--bs=4k",
               "--numjobs=4", "--ioengine=psync", "--runtime=3", "--time_based",
               "--group_reporting", "--readonly", "--output-format=json"],
              capture_output=True, text=True).stdout
    import json
    return json.loads(out)["jobs"][0]["read"]["iops"]


def bench_binary(w, env):
    data = w + ".data-00000-of-00001"
    size = os.path.getsize(data)
    have = {t: shutil.which(t) is not None for t in ("bindfs", "fio")}
    for t, ok in have.items():
        if not ok:
            log(f"{t} not installed (apt-get install {t}): its rows are skipped")
    shm = None
    if os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free > 2 * size:
        shm = os.path.join("/dev/shm", "modelfs-bench-w.data")
        shutil.copyfile(data, shm)
    cat_time(data)  # warm the page cache
    r = {k: [] for k in ("bin1", "bin2", "npy1", "npy2", "src", "shm", "bindfs",
                         "fio", "fio_bindfs")}
    try:
        for _ in range(RUNS):
            r["src"].append(cat_time(data))
            if shm:
                cat_time(shm)
                r["shm"].append(cat_time(shm))
            mnt = mountpoint()
            for lay in ("bin", "npy"):  # each first read on a fresh mount
                mount(w, mnt, env.env, "layouts=json," + lay)
                p = os.path.join(mnt, "W." + lay)
                r[lay + "1"].append(cat_time(p))
                r[lay + "2"].append(cat_time(p))
                umount(mnt)
            if have["fio"]:
                mount(w, mnt, env.env, "layouts=json,bin")
                r["fio"].append(fio_iops(os.path.join(mnt, "W.bin")))
                umount(mnt)
            if have["bindfs"]:
                proc = bindfs_mount(os.path.dirname(data), mnt)
                r["bindfs"].append(cat_time(os.path.join(mnt, os.path.basename(data))))
                bindfs_umount(proc, mnt)
                if have["fio"]:
                    proc = bindfs_mount(os.path.dirname(data), mnt)
                    r["fio_bindfs"].append(fio_iops(os.path.join(mnt, os.path.basename(data))))
                    bindfs_umount(proc, mnt)
            os.rmdir(mnt)
    finally:
        if shm:
            os.remove(shm)
    gbs = lambda t: f"{size / t / 2**30:.2f} GiB/s"
    log("raw seconds: " + ", ".join(f"{k} {[round(x, 3) for x in v]}" for k, v in r.items()
                                     if not k.startswith("fio")))

    def per_layout(read, base, versus, goal):
        b = median(r[base])
        for lay in ("bin", "npy"):
            t = median(r[lay + read])
            what = "first" if read == "1" else "second"
            add("3", f"cat W.{lay} ({what} read) vs {versus}",
                f"{gbs(t)} vs {gbs(b)} = {b / t:.2f}x", f">= {goal}x", b / t >= goal)

    if r["bindfs"]:
        per_layout("1", "bindfs", "bindfs -r", 1.2)
    if r["fio_bindfs"]:
        a, b = median(r["fio"]), median(r["fio_bindfs"])
        add("3", "fio randread 4k x4 IOPS vs bindfs -r", f"{a / 1e3:.0f}k vs {b / 1e3:.0f}k = "
            f"{a / b:.2f}x", ">= 1.0x", a / b >= 1.0)
    per_layout("2", "src", "cat data file", 0.95)
    if r["shm"]:
        m = median(r["shm"])
        t = median(r["bin2"])
        add("3", "cat W.bin (second read) vs cat of a tmpfs copy",
            f"{gbs(t)} vs {gbs(m)} = {m / t:.2f}x", "(4 KiB pages both)", None)


def format_rate(w, env):
    out = run([FORMAT_RATE, w, "W"], env=env.env, capture_output=True, text=True).stdout
    f = dict(kv.split("=") for kv in out.split())
    return int(f["values"]), float(f["seconds"])


def savetxt_rate(w):
    # The tensor's first values, straight from the data file (the fixture's one tensor starts
    # at offset 0, little-endian float32): numpy's own formatter, no TensorFlow needed.
    code = f"""
import time, numpy as np
v = np.fromfile({w + ".data-00000-of-00001"!r}, dtype='<f4', count={SAVETXT_VALUES})
t = time.perf_counter()
with open('/dev/null', 'w') as f:
    np.savetxt(f, v)
print(time.perf_counter() - t)
"""
    out = run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    return SAVETXT_VALUES / float(out.strip().splitlines()[-1])


TAIL = ["tail", "-c", "100", "{}"]
WC = ["sh", "-c", 'wc -c < "$1"', "sh", "{}"]


def daemon_of(mnt):
    """The pid of the daemon serving `mnt` (the newest `modelfs mount ... mnt`)."""
    out = subprocess.run(["pgrep", "-n", "-f", f"modelfs mount .*{mnt}$"],
                         capture_output=True, text=True).stdout.split()
    return int(out[0]) if out else None


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fresh(w, env, argv, opts="layouts=json,txt,cache_dir=none"):
    """Runs `argv` ("{}" = W.txt) on a fresh mount; (wall seconds, daemon CPU seconds)."""
    mnt = mountpoint()
    mount(w, mnt, env.env, opts)
    pid = daemon_of(mnt)
    c0 = cpu_seconds(pid) if pid else 0
    path = os.path.join(mnt, "W.txt")
    t = timed([path if a == "{}" else a for a in argv])
    c1 = cpu_seconds(pid) if pid else 0
    umount(mnt)
    os.rmdir(mnt)
    return t, c1 - c0


# 4. Text, the first read: fresh-mount cat / tail -c 100 / wc -c of W.txt (size unknown)
#    against the same with sizes known and against `modelfs index`; the daemon's CPU during the
#    fresh cat; cat vs numpy.savetxt and the one-core formatter.
# 5. tail -c 100 with sizes known; the size pass (stat, text_size=exact) vs the one-core loop.
def bench_text(w, env, do4, do5):
    n = W_ROWS * W_COLS
    cores = os.cpu_count()
    r = {k: [] for k in ("cat", "cpu", "tail", "wc", "kcat", "ktail", "kwc", "index", "loop",
                         "stat", "savetxt")}
    known = "layouts=json,txt"
    for _ in range(RUNS):
        env.reset()
        r["index"].append(timed([MODELFS, "index", "-o", "layouts=json,txt", w], env=env.env))
        r["loop"].append(format_rate(w, env)[1])
        if do4:
            t, cpu = fresh(w, env, ["cat", "{}"])
            r["cat"].append(t)
            r["cpu"].append(cpu / t)
            r["tail"].append(fresh(w, env, TAIL)[0])
            r["wc"].append(fresh(w, env, WC)[0])
            r["kcat"].append(fresh(w, env, ["cat", "{}"], known)[0])
            r["kwc"].append(fresh(w, env, WC, known)[0])
        if do5:
            r["ktail"].append(fresh(w, env, TAIL, known)[0])
            mnt = mountpoint()
            mount(w, mnt, env.env, "layouts=json,txt,cache_dir=none,text_size=exact")
            t = time.perf_counter()
            os.stat(os.path.join(mnt, "W.txt"))
            r["stat"].append(time.perf_counter() - t)
            umount(mnt)
            os.rmdir(mnt)
    m = {k: median(v) for k, v in r.items() if v}
    log("raw: " + ", ".join(f"{k}={[round(x, 3) for x in v]}" for k, v in r.items() if v))
    loop_rate = n / m["loop"]
    mv = lambda x: f"{x / 1e6:.1f} M values/s"
    s = lambda x: f"{x:.2f} s"
    add("4", "modelfs index W (no cache) / one-core formatter", f"{s(m['index'])} / {s(m['loop'])}",
        "(reference)", None)
    if do4:
        for _ in range(RUNS):
            r["savetxt"].append(savetxt_rate(w))
        ratio = m["kcat"] / m["cat"]
        add("4", "cat W.txt fresh (size unknown) vs sizes known",
            f"{s(m['cat'])} vs {s(m['kcat'])} = {ratio:.2f}x", ">= 0.9x", ratio >= 0.9)
        goal = 0.8 * cores
        add("4", "daemon CPU / wall during the fresh cat", f"{m['cpu']:.2f}x ({cores} cores)",
            f">= {goal:.1f}x", m["cpu"] >= goal)
        for k, what in (("tail", "tail -c 100"), ("wc", "wc -c")):
            ratio = m[k] / m["index"]
            add("4", f"{what} W.txt fresh vs modelfs index",
                f"{s(m[k])} vs {s(m['index'])} = {ratio:.2f}x", "<= 1.2x", ratio <= 1.2)
        add("4", "wc -c W.txt, sizes known", s(m["kwc"]), "(reference)", None)
        fr, sr = n / m["cat"], median(r["savetxt"])
        add("4", "cat W.txt (fresh) vs numpy.savetxt",
            f"{mv(fr)} vs {mv(sr)} = {fr / sr:.1f}x", ">= 30x", fr / sr >= 30)
        add("4", "cat W.txt (fresh) vs 1-thread in-process loop",
            f"{mv(fr)} vs {mv(loop_rate)} = {fr / loop_rate:.2f}x", ">= 1.6x",
            fr / loop_rate >= 1.6)
    if do5:
        t = m["ktail"]
        add("5", "tail -c 100 W.txt, fresh mount, sizes known", f"{t * 1e3:.1f} ms", "<= 5 ms",
            t <= 0.005)
        sr = n / m["stat"]
        add("5", "size pass (stat, text_size=exact, no cache) vs 1-thread loop",
            f"{mv(sr)} vs {mv(loop_rate)} = {sr / loop_rate:.2f}x", ">= 1.8x",
            sr / loop_rate >= 1.8)


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def vm_hwm(pid):
    return status_kib(pid, "VmHWM:") * 1024


# 6. Peak RSS of the daemon reading every file of the 4 GiB checkpoint.
def bench_rss(big, env):
    env.reset()
    mnt = mountpoint()
    p = subprocess.Popen([MODELFS, "mount", "-f", big, mnt], env=env.env,
                         stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while not os.path.ismount(mnt):
        if time.time() > deadline or p.poll() is not None:
            raise SystemExit("the 4 GiB mount did not come up")
        time.sleep(0.05)
    t = time.perf_counter()
    reader = subprocess.Popen(["sh", "-c", f"find {mnt} -type f -exec cat {{}} + > /dev/null"])
    anon = 0
    while reader.poll() is None:
        anon = max(anon, status_kib(p.pid, "RssAnon:"))
        time.sleep(0.1)
    secs = time.perf_counter() - t
    hwm = vm_hwm(p.pid)
    umount(mnt)
    p.wait(timeout=30)
    os.rmdir(mnt)
    limit = (64 + 256) << 20
    add("6", "peak RSS reading all of the 4 GiB ckpt (json,txt,npy)",
        f"VmHWM {hwm / 2**20:.0f} MiB, RssAnon max {anon / 1024:.0f} MiB (read in {secs:.0f} s)",
        "<= 64 MiB + 256M cache",
        hwm <= limit)


# 8. The `.tf/` view's index: checksums of a 4 GiB checkpoint (a TF source stores them), and
# the rate of computing them where the source has none (a dense Angel model), per core,
# against one core's CRC32C over bytes in memory.
def bench_views(big, env):
    times = []
    for _ in range(RUNS):
        env.reset()
        times.append(timed([MODELFS, "cat", big, ".tf/model.index"], env=env.env))
    t = median(times)
    add("8", "first read of .tf/model.index, 4 GiB TF ckpt", f"{t * 1000:.0f} ms (no data read)",
        "checksums at >= 0.8x 1-core CRC32C/core", t < 1.0)
    angel = os.path.join(WORK, "angel512m")
    if not os.path.exists(os.path.join(angel, "w7", "meta")):
        log("generating angel512m: 8 x [4096,4096] float ValueBinaryRowFormat")
        run([sys.executable, os.path.join(os.path.dirname(__file__), "gen_angel.py"),
             angel, "8", "4096", "4096"])
    size = 8 * 4096 * 4096 * 4
    run(["sh", "-c", f"cat {angel}/*/0 > /dev/null"])
    times = []
    for _ in range(RUNS):
        env.reset()
        times.append(timed([MODELFS, "cat", angel, ".tf/model.index"], env=env.env))
    t = median(times)
    out = subprocess.run([CRC_RATE], check=True, capture_output=True, text=True).stdout
    kv = dict(x.split("=") for x in out.split())
    one_core = int(kv["bytes"]) / float(kv["seconds"])
    cores = os.cpu_count()
    rate = size / t
    ratio = rate / cores / one_core
    add("8", "checksums computed for .tf/ of a 512 MiB Angel model",
        f"{rate / 1e9:.2f} GB/s on {cores} cores = {ratio:.2f}x of 1-core CRC32C "
        f"({one_core / 1e9:.1f} GB/s) per core", ">= 0.8x per core", ratio >= 0.8)
    env.reset()
    run([MODELFS, "cat", angel, ".tf/model.index"], env=env.env)
    again = median([timed([MODELFS, "cat", angel, ".tf/model.index"], env=env.env)
                    for _ in range(RUNS)])
    add("8", "second mount, same source: .tf/model.index", f"{again * 1000:.0f} ms",
        "checksums remembered", again < t / 4)


def damon_active():
    import glob
    for state in glob.glob("/sys/kernel/mm/damon/admin/kdamonds/*/state"):
        try:
            with open(state) as f:
                if f.read().strip() == "on":
                    return True
        except OSError:
            pass
    return False


def bench_python():
    """Target 16 (issue 59): the Python package against TensorFlow and safetensors. Builds the
    wheel, installs it into a venv that sees the system's tensorflow-cpu and safetensors."""
    import json
    w = fixture("w1g", 1, W_ROWS, W_COLS)
    table = os.path.join(WORK, "hashtable", "ckpt")
    if not os.path.exists(table + ".index"):
        log("target 16: no 10 M-id hash table yet (run target 10 first: ONLY=10)")
        return
    venv = os.path.join(WORK, "py-venv")
    subprocess.run(["bash", "scripts/wheel"], check=True, stdout=subprocess.DEVNULL)
    if not os.path.exists(venv):
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    wheel = sorted(__import__("glob").glob("target/wheels/modelfs-*.whl"))[-1]
    subprocess.run([f"{venv}/bin/pip", "install", "-q", "--force-reinstall", "--no-deps", wheel],
                   check=True)
    p = subprocess.run([f"{venv}/bin/python", os.path.join(os.path.dirname(os.path.abspath(__file__)), "python_api.py"), w, table, WORK],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                       env=dict(os.environ, RUNS=str(RUNS)))
    if p.returncode != 0:
        add(16, "Python package", "failed (tensorflow-cpu and safetensors installed?)", "", None)
        return
    r = json.loads(p.stdout.strip().splitlines()[-1])
    m, tf, st, mst = r["modelfs_tf_s"], r["tf_s"], r["safetensors_s"], r["modelfs_st_s"]
    add(16, "`m[name]` of the 1 GiB W (TF checkpoint, CRC checked) vs `tf.train.load_checkpoint(P).get_tensor`",
        f"{m:.3f} vs {tf:.3f} s = {tf / m:.1f}x faster", ">= 3x", tf / m >= 3)
    add(16, "the same vs `safe_open(...).get_tensor` of W in a safetensors file (and `m[name]` of that file)",
        f"{m:.3f} vs {st:.3f} s = {st / m:.2f}x ({mst:.3f} s = {st / mst:.2f}x)", ">= 0.9x",
        st / m >= 0.9)
    add(16, "4,000 random rows by id (`m.rows`) from a 10 M-id TF hash table: p50 / p99",
        f"{r['rows_p50_ms']:.3f} / {r['rows_p99_ms']:.3f} ms", "p99 < 1 ms", r["rows_p99_ms"] < 1)
    add(16, "peak RSS of a process holding W, over W's bytes (python + numpy alone: ~27 MiB)",
        f"{r['rss_over_array_mib']:.0f} MiB", "<= 64 MiB", r["rss_over_array_mib"] <= 64)


# 19. Spark (issue 72): a 10 M-id Monolith table read by modelfs.spark on 1 and 2 cores.
def bench_engines():
    import json
    py = os.environ.get("ENGINES_PYTHON", sys.executable)
    probe = subprocess.run([py, "-c", "import pyspark, modelfs.spark"], capture_output=True)
    if probe.returncode != 0:
        add(19, "Spark (ENGINES_PYTHON needs pyspark and modelfs)", "not run", "", None)
        return
    root = os.path.join(WORK, "monolith", "ps")
    table, n = "MonolithHashTable_bench_0", 10_000_000
    if not os.path.exists(os.path.join(root, f"{table}.samples.json")):
        log("generating a 10 M-id Monolith table (gen_monolith)")
        subprocess.run([os.environ["GEN_MONOLITH"], os.path.join(root, "assets"), table, str(n),
                        "16", "16"], check=True)
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, RUNS=str(RUNS), MODELFS_BIN=MODELFS)

    def run_json(args, cpus=None):
        pin = ["taskset", "-c", cpus] if cpus else []
        p = subprocess.run(pin + [py, os.path.join(here, "engines.py")] + args,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        if p.returncode != 0:
            return None
        return json.loads(p.stdout.strip().splitlines()[-1])

    one = run_json(["spark", "1", root, table, str(n)], "0")
    two = run_json(["spark", "2", root, table, str(n)], "0,1")
    rest = run_json(["rest", root, table, str(n)])
    if not (one and two and rest):
        add(19, "Spark", "failed", "", None)
        return
    log(f"engines: 1 core {one}, 2 cores {two}, {rest}")
    ratio = two["rows_per_s"] / one["rows_per_s"]
    exact = one["count_ok"] and one["sum_ok"] and two["count_ok"] and two["sum_ok"]
    add(19, f"10 M-id Monolith table into Spark ({two['partitions']} partitions), rows/s: 2 "
        "executor cores vs 1 (CPUs pinned)",
        f"{two['rows_per_s'] / 1e6:.2f} M vs {one['rows_per_s'] / 1e6:.2f} M = {ratio:.2f}x",
        ">= 1.7x, count and sum exact", ratio >= 1.7 and exact)
    add(19, "  vs `modelfs row` of 20,000 of its ids (first look included); `cat` of the shards",
        f"{rest['row_rows_per_s'] / 1e3:.0f} k rows/s; {rest['cat_rows_per_s'] / 1e6:.1f} M rows/s",
        "", None)


# 20. ONNX (issue 73): a 1 GiB initializer in external data, first read by modelfs vs onnx's own.
def bench_onnx():
    py = os.environ.get("ENGINES_PYTHON", sys.executable)
    if subprocess.run([py, "-c", "import onnx"], capture_output=True).returncode != 0:
        add(20, "ONNX (ENGINES_PYTHON needs onnx)", "not run", "", None)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.path.join(WORK, "onnx1g")
    if not os.path.exists(os.path.join(d, "weights.data")):
        log("generating a 1 GiB ONNX initializer (onnx)")
        subprocess.run([py, os.path.join(here, "onnx_load.py"), "gen", d], check=True)
    env = Env("onnx").env
    subprocess.run(["cat", os.path.join(d, "weights.data")], stdout=subprocess.DEVNULL)
    ours, theirs = [], []
    for _ in range(RUNS):
        mnt = mountpoint()
        mount(os.path.join(d, "model.onnx"), mnt, env, "cache_dir=none")
        ours.append(timed(["cat", os.path.join(mnt, "W.npy")]))
        umount(mnt)
        out = subprocess.run([py, os.path.join(here, "onnx_load.py"), "load", d],
                             capture_output=True, text=True, check=True).stdout
        theirs.append(float(out.strip().splitlines()[-1]))
    o, t = median(ours), median(theirs)
    add(20, "ONNX: first `cat` of a 1 GiB initializer's `.npy` (external data, fresh mount) vs "
        "`onnx.load` + `numpy_helper.to_array` (fresh process; page cache warm)",
        f"{o:.2f} vs {t:.2f} s = {t / o:.2f}x", ">= 2x", t / o >= 2)


# 21. PyTorch DCP (issue 73): a 1 GiB tensor, first read by modelfs vs torch's own path to it
# (`dcp_to_torch_save` + `torch.load`); mount of a checkpoint in 100 `.distcp` files.
def bench_dcp():
    py = os.environ.get("DCP_PYTHON", os.environ.get("ENGINES_PYTHON", sys.executable))
    if subprocess.run([py, "-c", "import torch"], capture_output=True).returncode != 0:
        add(21, "PyTorch DCP (DCP_PYTHON or ENGINES_PYTHON needs torch)", "not run", "", None)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.path.join(WORK, "dcp1g")
    if not os.path.exists(os.path.join(d, "many", ".metadata")):
        log("generating a DCP checkpoint with a 1 GiB tensor and one of 100 files (torch)")
        subprocess.run([py, os.path.join(here, "dcp_load.py"), "gen", d], check=True)
    env = Env("dcp").env
    for f in os.listdir(d):
        if f.endswith(".distcp"):
            subprocess.run(["cat", os.path.join(d, f)], stdout=subprocess.DEVNULL)
    ours, theirs, mounts = [], [], []
    for _ in range(RUNS):
        mnt = mountpoint()
        mount(d, mnt, env, "cache_dir=none")
        ours.append(timed(["cat", os.path.join(mnt, "W.npy")]))
        umount(mnt)
        out = subprocess.run([py, os.path.join(here, "dcp_load.py"), "load", d],
                             capture_output=True, text=True, check=True).stdout
        theirs.append(float(out.strip().splitlines()[-1]))
        mnt = mountpoint()
        t0 = time.perf_counter()
        mount(os.path.join(d, "many"), mnt, env, "cache_dir=none")
        subprocess.run(["ls", "-lR", mnt], stdout=subprocess.DEVNULL, check=True)
        mounts.append(time.perf_counter() - t0)
        umount(mnt)
    o, t, m = median(ours), median(theirs), median(mounts)
    add(21, "PyTorch DCP: first `cat` of a 1 GiB tensor's `.npy` (fresh mount) vs "
        "`dcp_to_torch_save` + `torch.load` (fresh process; page cache warm)",
        f"{o:.2f} vs {t:.2f} s = {t / o:.2f}x", ">= 2x", t / o >= 2)
    add(21, "  mount + `ls -lR` of a DCP checkpoint in 100 `.distcp` files (200 tensors)",
        f"{m:.2f} s", "< 1 s", m < 1)


def first_cat_vs_load(name, src, inside, py, script, d):
    """Median seconds of the first `cat` of `inside` on a fresh mount of `src`, and of the
    framework's own load (`python script load d`, its last line), RUNS times each."""
    here = os.path.dirname(os.path.abspath(__file__))
    env = Env(name).env
    ours, theirs = [], []
    for _ in range(RUNS):
        mnt = mountpoint()
        mount(src, mnt, env, "cache_dir=none")
        ours.append(timed(["cat", os.path.join(mnt, inside)]))
        umount(mnt)
        out = subprocess.run([py, os.path.join(here, script), "load", d],
                             capture_output=True, text=True, check=True).stdout
        theirs.append(float(out.strip().splitlines()[-1]))
    return median(ours), median(theirs)


# 22. Keras (issue 73): a 1 GiB dataset of a `.weights.h5`, first read by modelfs vs h5py's.
def bench_keras():
    py = os.environ.get("KERAS_PYTHON", os.environ.get("ENGINES_PYTHON", sys.executable))
    if subprocess.run([py, "-c", "import h5py"], capture_output=True).returncode != 0:
        add(22, "Keras (KERAS_PYTHON or ENGINES_PYTHON needs h5py)", "not run", "", None)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.path.join(WORK, "keras1g")
    src = os.path.join(d, "model.weights.h5")
    if not os.path.exists(src):
        log("generating a 1 GiB Keras weights file (h5py)")
        subprocess.run([py, os.path.join(here, "keras_load.py"), "gen", d], check=True)
    subprocess.run(["cat", src], stdout=subprocess.DEVNULL)
    o, t = first_cat_vs_load("keras", src, "layers/dense/vars/0.npy", py, "keras_load.py", d)
    add(22, "Keras: first `cat` of a 1 GiB dataset's `.npy` in a `.weights.h5` (fresh mount) vs "
        "h5py's read of it (fresh process; page cache warm)",
        f"{o:.2f} vs {t:.2f} s = {t / o:.2f}x", ">= 2x", t / o >= 2)


# 23. Orbax (issue 73): a 1 GiB array of an Orbax checkpoint (OCDBT, zstd), first read by
# modelfs vs Orbax's restore of the item.
def bench_orbax():
    py = os.environ.get("ORBAX_PYTHON", os.environ.get("ENGINES_PYTHON", sys.executable))
    if subprocess.run([py, "-c", "import orbax.checkpoint"], capture_output=True).returncode != 0:
        add(23, "Orbax (ORBAX_PYTHON or ENGINES_PYTHON needs orbax-checkpoint)", "not run", "", None)
        return
    here = os.path.dirname(os.path.abspath(__file__))
    d = os.path.join(WORK, "orbax1g")
    src = os.path.join(d, "ck")
    if not os.path.exists(os.path.join(src, "_METADATA")):
        log("generating an Orbax checkpoint with a 1 GiB array (orbax-checkpoint)")
        subprocess.run([py, os.path.join(here, "orbax_load.py"), "gen", d], check=True)
    subprocess.run(["cat"] + [os.path.join(r, f) for r, _, fs in os.walk(src) for f in fs],
                   stdout=subprocess.DEVNULL)
    o, t = first_cat_vs_load("orbax", src, "w.npy", py, "orbax_load.py", d)
    add(23, "Orbax: first `cat` of a 1 GiB array's `.npy` (OCDBT, zstd; fresh mount) vs "
        "Orbax's restore of the item (fresh process; page cache warm)",
        f"{o:.2f} vs {t:.2f} s = {t / o:.2f}x", ">= 2x", t / o >= 2)


# 17. One checksum pass however many readers start at once: four readers of a fresh 1 GiB
# tensor's quarters vs one reader of the whole (verify=crc, nothing remembered).
def bench_quarters(w, env):
    size = W_ROWS * W_COLS * 4
    quarter = size // 4
    mnt = mountpoint()
    one, four = [], []

    def quarters(p):
        t = time.perf_counter()
        procs = [subprocess.Popen(["dd", f"if={p}", "of=/dev/null", "bs=1M", "iflag=skip_bytes,count_bytes",
                                   f"skip={q * quarter}", f"count={quarter}"],
                                  stderr=subprocess.DEVNULL) for q in range(4)]
        if any(pr.wait() != 0 for pr in procs):
            raise RuntimeError("dd failed")
        return time.perf_counter() - t

    for _ in range(RUNS):
        for runs, read in ((one, cat_time), (four, quarters)):
            mount(w, mnt, env.env, "layouts=json,bin,cache_dir=none,verify=crc")
            runs.append(read(os.path.join(mnt, "W.bin")))
            umount(mnt)
    os.rmdir(mnt)
    log(f"raw seconds: one {[round(x, 3) for x in one]}, four {[round(x, 3) for x in four]}")
    ratio = median(four) / median(one)
    add("17", "4 readers of a fresh 1 GiB W.bin's quarters vs 1 reader of all",
        f"{median(four):.3f} vs {median(one):.3f} s = {ratio:.2f}x", "<= 1.2x", ratio <= 1.2)


def main():
    os.makedirs(WORK, exist_ok=True)
    started = time.perf_counter()
    env = Env("bench")
    if want(1) or want(2):
        many = fixture("many", 100000, 8, 8)
        ten = fixture("ten", 10, 8, 8)
    if want(3) or want(4) or want(5) or want(17):
        w = fixture("w1g", 1, W_ROWS, W_COLS)
    if want(6) or want(8):
        big = fixture("big4g", 256, 2048, 2048)
    env.reset()
    if want(1):
        bench_mount(many, ten, env)
    if want(2):
        bench_ls(many, env)
    if want(3):
        bench_binary(w, env)
    if want(4) or want(5):
        bench_text(w, env, want(4), want(5))
    if want(17):
        bench_quarters(w, env)
    if want(6):
        bench_rss(big, Env("rss"))
    if want(8):
        bench_views(big, Env("views"))
    if want(9):
        import types
        from angel import bench_angel
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("angel").env, MODELFS=MODELFS,
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    daemon_of=daemon_of, vm_hwm=vm_hwm, median=median,
                                    add=add, log=log)
        bench_angel(ctx)
    if want(11):
        import types
        from compare import bench_compare
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("compare").env, MODELFS=MODELFS,
                                    GEN=GEN, fixture=fixture, W_ROWS=W_ROWS, W_COLS=W_COLS,
                                    log=log, add=add, median=median)
        bench_compare(ctx)
    if want(10):
        import types
        from rows import bench_rows
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("rows").env, MODELFS=MODELFS,
                                    GEN_MONOLITH=os.environ["GEN_MONOLITH"],
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    daemon_of=daemon_of, vm_hwm=vm_hwm, median=median,
                                    add=add, log=log)
        bench_rows(ctx)
    if want(15):
        import types
        from rowdiff import bench_rowdiff
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("rowdiff").env, MODELFS=MODELFS,
                                    GEN_MONOLITH=os.environ["GEN_MONOLITH"], median=median,
                                    add=add, log=log)
        bench_rowdiff(ctx)
    if want(16):
        bench_python()
    if want(12):
        import types
        from live import bench_live
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("live").env, fixture=fixture,
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    daemon_of=daemon_of, add=add, log=log)
        bench_live(ctx)
    if want(13):
        import types
        from loads import bench_loads
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("loads").env, run=run,
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    bindfs_mount=bindfs_mount, bindfs_umount=bindfs_umount,
                                    median=median, add=add, log=log)
        bench_loads(ctx)
    if want(14):
        import types
        from sources import bench_sources
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("sources").env,
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    daemon_of=daemon_of, median=median, add=add, log=log)
        bench_sources(ctx)
    if want(7):
        # Imported here: boto3 comes with moto[server], needed by this target only.
        import types
        from remote import bench_remote
        w256 = fixture("w256m", 1, 8192, 8192)
        w1g = fixture("w1g", 1, W_ROWS, W_COLS)
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=Env("remote").env,
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    timed=timed, median=median, add=add, log=log)
        bench_remote(w1g, w256, ctx)
    if want(18):
        import types
        from hdfs import bench_hdfs
        w256 = fixture("w256m", 1, 8192, 8192)
        many = fixture("many", 100000, 8, 8)
        e = Env("hdfs")
        ctx = types.SimpleNamespace(WORK=WORK, RUNS=RUNS, env=e.env, reset=e.reset,
                                    mountpoint=mountpoint, mount=mount, umount=umount,
                                    timed=timed, median=median, add=add, log=log)
        bench_hdfs(w256, many, ctx)
    if want(19):
        bench_engines()
    if want(20):
        bench_onnx()
    if want(21):
        bench_dcp()
    if want(22):
        bench_keras()
    if want(23):
        bench_orbax()
    cores = os.cpu_count()
    print(f"\nmodelfs benchmark — {cores} cores, median of {RUNS} runs "
          f"(ls: {LS_RUNS}), {time.perf_counter() - started:.0f} s total")
    if damon_active():
        print("DAMON page-out was active: page-cache figures vary (QUIET=1 pauses it)")
    print()
    w0 = max(len(r[1]) for r in ROWS)
    w1 = max(len(r[2]) for r in ROWS)
    w2 = max(len(r[3]) for r in ROWS)
    print(f"{'#':<2} {'figure':<{w0}}  {'measured':<{w1}}  {'target':<{w2}}  verdict")
    for t, fig, val, goal, verdict in ROWS:
        print(f"{t:<2} {fig:<{w0}}  {val:<{w1}}  {goal:<{w2}}  {verdict}")


if __name__ == "__main__":
    main()
