"""Target 18: HDFS (issue 71), on a MiniDFSCluster (scripts/hdfs: two DataNodes, replication 2,
HDFS's production block size of 128 MiB) on loopback.

- First cat of a 256 MiB tensor by hdfs:// (and webhdfs://) on a fresh mount vs Hadoop's Java
  client's `-cat` of the checkpoint's data file in the same run (FsShell in a fresh JVM, as
  `hdfs dfs -cat` runs): >= 1.0x. verify=crc vs verify=none: >= 0.8x.
- ls -lR of the 100k-tensor checkpoint by hdfs:// vs the local walk: <= 2x, with the NameNode's
  RPCs counted from its own metrics (JMX): no per-file call beyond the listing's.
"""

import json
import os
import shutil
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JAR = os.path.join(HERE, "..", "hdfs", "target", "minihdfs.jar")


class Cluster:
    def __init__(self, work, log):
        base = os.path.join(work, "hdfs")
        shutil.rmtree(base, ignore_errors=True)
        os.makedirs(base)
        self.conf = os.path.join(base, "conf")
        os.makedirs(self.conf)
        # FsShell wants a core-site.xml on its class path; the URL names the cluster.
        with open(os.path.join(self.conf, "core-site.xml"), "w") as f:
            f.write("<configuration/>\n")
        self.p = subprocess.Popen(["java", "-Xmx1g", "-jar", JAR, os.path.join(base, "base"),
                                   "--block-size", str(128 << 20)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.p.stdout.readline())
        self.namenode = ready["namenode"]
        self.http = ready["webhdfs"]
        self.webhdfs = self.http.replace("http://", "webhdfs://")
        self.rpc_port = self.namenode.rsplit(":", 1)[1]
        log(f"MiniDFSCluster at {self.namenode}")

    def command(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        answer = self.p.stdout.readline().strip()
        if answer != "ok":
            raise RuntimeError(f"{line}: {answer}")

    def hadoop_cat(self, path):
        """Seconds Hadoop's FsShell takes to -cat `path` to /dev/null, JVM start included."""
        cp = self.conf + ":" + JAR
        t = time.perf_counter()
        subprocess.run(["java", "-cp", cp, "org.apache.hadoop.fs.FsShell", "-cat",
                        self.namenode + path], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        return time.perf_counter() - t

    def rpcs(self):
        """The NameNode's client RPCs so far, by method (its rpcdetailed metrics)."""
        import urllib.request
        q = f"Hadoop:service=NameNode,name=RpcDetailedActivityForPort{self.rpc_port}"
        with urllib.request.urlopen(f"{self.http}/jmx?qry={q}") as r:
            bean = json.load(r)["beans"][0]
        return {k[:-len("NumOps")]: v for k, v in bean.items()
                if k.endswith("NumOps") and not k.startswith("Deferred") and v}

    def stop(self):
        try:
            self.command("quit")
        except Exception:
            pass
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()


def bench_hdfs(w256, many, ctx):
    if not (shutil.which("java") and os.path.exists(JAR)):
        ctx.add("18", "HDFS (java or scripts/hdfs not built: scripts/hdfs/build.sh)", "", "", None)
        return
    c = Cluster(ctx.WORK, ctx.log)
    try:
        c.command(f"put {os.path.dirname(w256)} /w256")
        c.command(f"put {os.path.dirname(many)} /many")
        data = "/w256/ckpt.data-00000-of-00001"
        mnt = ctx.mountpoint()

        def first_cat(url, opts):
            # Default caches (memory and disk, emptied before each mount): a checksum pass keeps
            # what it fetched for the read that follows.
            ctx.reset()
            ctx.mount(url, mnt, ctx.env, f"layouts=json,bin,{opts}")
            t = ctx.timed(["cat", os.path.join(mnt, "W.bin")])
            ctx.umount(mnt)
            return t

        java, ours, crc, web = [], [], [], []
        for _ in range(ctx.RUNS):
            java.append(c.hadoop_cat(data))
            ours.append(first_cat(c.namenode + "/w256/ckpt", "verify=none"))
            crc.append(first_cat(c.namenode + "/w256/ckpt", "verify=crc"))
            web.append(first_cat(c.webhdfs + "/w256/ckpt", "verify=none"))
        j, o, k, w = (ctx.median(x) for x in (java, ours, crc, web))
        ctx.log(f"raw: java {java}, hdfs {ours}, crc {crc}, webhdfs {web}")
        ctx.add("18", "first cat of a 256 MiB W.bin by hdfs:// (verify=none) vs Hadoop's -cat "
                "of the data file (fresh JVM)", f"{o:.2f} s vs {j:.2f} s = {j / o:.2f}x",
                ">= 1.0x", j / o >= 1.0)
        ctx.add("18", "  the same by webhdfs://", f"{w:.2f} s = {j / w:.2f}x", ">= 1.0x",
                j / w >= 1.0)
        ctx.add("18", "  hdfs:// verify=crc vs verify=none", f"{k:.2f} s vs {o:.2f} s = "
                f"{o / k:.2f}x", ">= 0.8x", o / k >= 0.8)

        local, remote, calls = [], [], None
        for _ in range(ctx.RUNS):
            ctx.mount(many, mnt, ctx.env)
            local.append(ctx.timed(["ls", "-lR", mnt]))
            ctx.umount(mnt)
            before = c.rpcs()
            ctx.mount(c.namenode + "/many/ckpt", mnt, ctx.env)
            remote.append(ctx.timed(["ls", "-lR", mnt]))
            ctx.umount(mnt)
            after = c.rpcs()
            calls = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
        lo, re = ctx.median(local), ctx.median(remote)
        per_file = sum(calls.get(k, 0) for k in ("GetFileInfo", "GetBlockLocations"))
        shown = ", ".join(f"{k} {v}" for k, v in sorted(calls.items())
                          if not k.startswith("Overall") and "Heartbeat" not in k
                          and "BlockReport" not in k)
        ctx.add("18", "ls -lR of the 100k-tensor checkpoint by hdfs:// vs the local walk; "
                "NameNode RPCs of one mount + walk", f"{re:.2f} s vs {lo:.2f} s = {re / lo:.2f}x; "
                f"{shown}", "<= 2x, no per-file RPC", re / lo <= 2 and per_file < 100)
        os.rmdir(mnt)
    finally:
        c.stop()
