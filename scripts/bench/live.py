"""Target 12 (issue 38): a mounted directory gains 500 checkpoints while mounted.

A CheckpointManager-like run: each step links in a new checkpoint's data shard, then its
index, then rewrites the `checkpoint` state file by rename (TF's order), every 20 ms. Measured:
the time until the mount shows the last one, `ls -l` of the root (median of RUNS) against the
same listing on a fresh mount, and the daemon's RSS before and after (no per-checkpoint state
for checkpoints no one opened) and its VmHWM against 64 MiB + cache=.
"""

import os
import shutil
import subprocess
import time

STEPS = 500


def write_state(run, n):
    tmp = os.path.join(run, "checkpoint.tmp")
    with open(tmp, "w") as f:
        f.write(f'model_checkpoint_path: "ckpt-{n}"\n')
        for k in range(max(1, n - 4), n + 1):
            f.write(f'all_model_checkpoint_paths: "ckpt-{k}"\n')
    os.rename(tmp, os.path.join(run, "checkpoint"))


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def ls_time(mnt, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(["ls", "-l", mnt], check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2]


def bench_live(ctx):
    base = os.path.join(ctx.WORK, "live")
    shutil.rmtree(base, ignore_errors=True)
    run = os.path.join(base, "run")
    os.makedirs(run)
    src = ctx.fixture("live-one", 16, 256, 256)
    data, index = src + ".data-00000-of-00001", src + ".index"
    os.link(data, os.path.join(run, "ckpt-1.data-00000-of-00001"))
    os.link(index, os.path.join(run, "ckpt-1.index"))
    write_state(run, 1)
    mnt = ctx.mountpoint()
    ctx.mount(run, mnt, ctx.env, "cache=256M")
    pid = ctx.daemon_of(mnt)
    os.listdir(mnt)
    before = rss_kib(pid)
    t0 = time.perf_counter()
    for n in range(2, STEPS + 2):
        os.link(data, os.path.join(run, f"ckpt-{n}.data-00000-of-00001"))
        os.link(index, os.path.join(run, f"ckpt-{n}.index"))
        write_state(run, n)
        time.sleep(0.02)
    written = time.perf_counter() - t0
    last = f"ckpt-{STEPS + 1}"
    t1 = time.perf_counter()
    while os.readlink(os.path.join(mnt, "latest")) != last:
        if time.perf_counter() - t1 > 30:
            raise SystemExit(f"{last} not shown within 30 s")
        time.sleep(0.01)
    seen = time.perf_counter() - t1
    shown = len(os.listdir(mnt))
    ls_live = ls_time(mnt, ctx.RUNS)
    # Open a few (the latest and some old ones), as users browsing would.
    for n in (STEPS + 1, STEPS // 2, 2):
        with open(os.path.join(mnt, f"ckpt-{n}", "block_000", "layer_000", "kernel.npy"), "rb") as f:
            f.read()
    after = rss_kib(pid)
    hwm = rss_kib(pid, "VmHWM")
    ctx.umount(mnt)
    fresh = ctx.mountpoint()
    ctx.mount(run, fresh, ctx.env, "cache=256M")
    os.listdir(fresh)
    ls_fresh = ls_time(fresh, ctx.RUNS)
    ctx.umount(fresh)
    ctx.log(f"12: {STEPS} checkpoints written in {written:.1f} s; the last shown {seen*1e3:.0f} ms "
            f"after its state file; {shown} root entries")
    ctx.add("12", f"ls -l of {STEPS + 1} checkpoints, followed / fresh mount",
            f"{ls_live*1e3:.1f} ms / {ls_fresh*1e3:.1f} ms", "< 100 ms", ls_live < 0.1)
    ctx.add("12", "last checkpoint shown after its state file", f"{seen*1e3:.0f} ms", "< 2 s",
            seen < 2)
    grew = (after - before) / 1024
    ctx.add("12", f"daemon RSS before / after {STEPS} checkpoints (3 opened)",
            f"{before/1024:.0f} / {after/1024:.0f} MiB (+{grew:.1f})", "bounded", None)
    bound = 64 + 256
    ctx.add("12", "VmHWM", f"{hwm/1024:.0f} MiB", f"<= {bound} MiB", hwm / 1024 <= bound)
    shutil.rmtree(base, ignore_errors=True)
