#!/usr/bin/env python3
"""Smoke test of the MiniDFSCluster launcher (Python 3 stdlib only).

Builds the launcher if needed, starts a 2-DataNode cluster (replication 2, 1 MiB blocks),
puts a small local directory through Hadoop's own client, and checks over WebHDFS REST
(LISTSTATUS, and OPEN following the NameNode's redirect to a DataNode on 127.0.0.1) that every
file is there byte for byte; then again with a DataNode stopped, after append, chmod (permission
denied for another user), safe mode, and restarts of the DataNode and the NameNode. Exit 0 on
success. Only loopback is contacted.

    python3 scripts/hdfs/smoke.py [--keep]   # --keep: leave the temp dir (and log) behind
"""

import getpass
import http.client
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
JAR = os.path.join(HERE, "target", "minihdfs.jar")
USER = "smoke"


def log(msg):
    print(f"smoke: {msg}", flush=True)


def build_if_needed():
    sources = [os.path.join(HERE, "pom.xml"), os.path.join(HERE, "build.sh")]
    for root, _, files in os.walk(os.path.join(HERE, "src")):
        sources += [os.path.join(root, f) for f in files]
    if os.path.exists(JAR) and os.path.getmtime(JAR) >= max(map(os.path.getmtime, sources)):
        return
    t = time.monotonic()
    out = subprocess.run(
        [os.path.join(HERE, "build.sh")], check=True, stdout=subprocess.PIPE, text=True
    )
    log(f"built {out.stdout.strip().splitlines()[-1]} in {time.monotonic() - t:.1f} s")


class Cluster:
    """The launcher process and its line protocol."""

    def __init__(self, base):
        self.base = base
        t = time.monotonic()
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", "-jar", JAR, base],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.info = json.loads(self._line(120))
        self.start_secs = time.monotonic() - t
        nn = urllib.parse.urlsplit(self.info["webhdfs"])
        assert nn.hostname == "127.0.0.1", self.info
        assert self.info["namenode"].startswith("hdfs://127.0.0.1:"), self.info
        self.http = (nn.hostname, nn.port)

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _line(self, timeout):
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"launcher silent for {timeout} s") from None
        if line is None:
            raise AssertionError(f"launcher exited (rc {self.proc.wait()})")
        return line

    def cmd(self, line, expect="ok"):
        t = time.monotonic()
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = self._line(180)
        log(f"{line} -> {answer} ({time.monotonic() - t:.2f} s)")
        if expect == "ok":
            assert answer == "ok", f"{line!r}: {answer}"
        else:
            assert answer.startswith("error:") and expect in answer, f"{line!r}: {answer}"

    def quit(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        assert self._line(60) == "ok"
        assert self.proc.wait(60) == 0

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def request(host, port, path, query):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    try:
        conn.request("GET", path + "?" + urllib.parse.urlencode(query))
        resp = conn.getresponse()
        return resp.status, resp.getheader("Location"), resp.read()
    finally:
        conn.close()


class WebHdfs:
    def __init__(self, host, port, datanode_ports):
        self.host, self.port = host, port
        # WebHDFS's excludedatanodes names a DataNode by its data-transfer port, not the HTTP
        # port it redirects to.
        self.xfer = {dn["http"]: dn["xfer"] for dn in datanode_ports}
        self.refused = []  # paths whose redirected read a DataNode refused (retried elsewhere)

    def call(self, path, op, user=USER, **params):
        query = {"op": op, "user.name": user, **params}
        status, _, body = request(self.host, self.port, "/webhdfs/v1" + path, query)
        return status, json.loads(body) if body else None

    def walk(self, path):
        """{relative path: ("FILE", length) or ("DIRECTORY", 0)} under path, by LISTSTATUS."""
        status, body = self.call(path, "LISTSTATUS")
        assert status == 200, (path, status, body)
        out = {}
        for st in body["FileStatuses"]["FileStatus"]:
            name = st["pathSuffix"]
            out[name] = (st["type"], st["length"] if st["type"] == "FILE" else 0)
            if st["type"] == "DIRECTORY":
                for sub, v in self.walk(f"{path}/{name}").items():
                    out[f"{name}/{sub}"] = v
        return out

    def open(self, path, user=USER):
        """A file's bytes: OPEN at the NameNode, then its 307 redirect to a DataNode on 127.0.0.1.
        A DataNode that refuses (stopped, the NameNode not yet aware) is excluded and OPEN asked
        again, as Hadoop's own WebHDFS client does."""
        excluded = []
        while True:
            query = {"op": "OPEN", "user.name": user}
            if excluded:
                query["excludedatanodes"] = ",".join(excluded)
            status, location, body = request(self.host, self.port, "/webhdfs/v1" + path, query)
            if status != 307:
                return status, body
            dn = urllib.parse.urlsplit(location)
            assert dn.hostname == "127.0.0.1", location
            try:
                query = urllib.parse.parse_qsl(dn.query)
                status, _, body = request(dn.hostname, dn.port, dn.path, query)
            except ConnectionRefusedError:
                excluded.append(f"{dn.hostname}:{self.xfer[dn.port]}")
                self.refused.append(path)
                assert len(excluded) < 2, f"every DataNode refused {path}"
                continue
            return status, body


def make_tree(root):
    """A small model-like directory: text, empty, nested, and a 3-block binary (1 MiB blocks)."""
    files = {
        "checkpoint": b'model_checkpoint_path: "model.ckpt-1"\n',
        "empty": b"",
        "model.ckpt-1.index": bytes(range(256)) * 5,
        "vars/model.ckpt-1.data-00000-of-00001": os.urandom(3 * (1 << 20) + 12345),
        "vars/deep/x.bin": os.urandom(70000),
    }
    for rel, data in files.items():
        os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
        with open(os.path.join(root, rel), "wb") as f:
            f.write(data)
    return files


def check_all(web, files, what):
    t = time.monotonic()
    listing = web.walk("/smoke")
    want = {rel: ("FILE", len(data)) for rel, data in files.items()}
    want.update({"vars": ("DIRECTORY", 0), "vars/deep": ("DIRECTORY", 0)})
    assert listing == want, (what, listing, want)
    for rel, data in files.items():
        status, body = web.open("/smoke/" + rel)
        assert status == 200, (what, rel, status, body[:300])
        assert body == data, f"{what}: /smoke/{rel}: {len(body)} bytes, not the {len(data)} put"
    log(f"{what}: {len(files)} files listed and read byte for byte ({time.monotonic() - t:.2f} s)")


def main():
    keep = "--keep" in sys.argv[1:]
    build_if_needed()
    tmp = tempfile.mkdtemp(prefix="minihdfs-smoke-")
    cluster = None
    ok = False
    try:
        local = os.path.join(tmp, "model")
        files = make_tree(local)
        cluster = Cluster(os.path.join(tmp, "base"))
        log(f"cluster up in {cluster.start_secs:.1f} s: {json.dumps(cluster.info)}")
        web = WebHdfs(*cluster.http, cluster.info["datanode_ports"])

        cluster.cmd("ping")
        cluster.cmd(f"put {local} /smoke")
        check_all(web, files, "after put")

        cluster.cmd("stop-datanode 0")
        check_all(web, files, "DataNode 0 stopped")
        refused = len(web.refused)
        time.sleep(4)  # past dfs.namenode.stale.datanode.interval: the NameNode lists it last
        web.refused = []
        check_all(web, files, "DataNode 0 stale")
        # An empty file has no block and so no replica to prefer: the NameNode redirects it to
        # any DataNode it holds live, the stopped one included (excludedatanodes then helps).
        stale_reads = set(web.refused) - {"/smoke/empty"}
        assert not stale_reads, f"reads sent to the stale DataNode: {stale_reads}"

        extra = os.path.join(tmp, "extra")
        with open(extra, "wb") as f:
            f.write(os.urandom(1 << 20))
        files["vars/deep/x.bin"] += open(extra, "rb").read()
        cluster.cmd(f"append {extra} /smoke/vars/deep/x.bin")
        cluster.cmd("restart-datanode 0")
        check_all(web, files, "after append and DataNode 0 restarted")

        cluster.cmd("chmod 700 /smoke/vars")
        status, body = web.open("/smoke/vars/deep/x.bin")
        assert status == 403 and b"AccessControlException" in body, (status, body[:300])
        # The NameNode's superuser is the user that started it.
        status, body = web.open("/smoke/vars/deep/x.bin", user=getpass.getuser())
        assert status == 200 and body == files["vars/deep/x.bin"], status
        cluster.cmd("chmod 755 /smoke/vars")
        log("chmod 700: another user is denied (403 AccessControlException), the owner reads")

        cluster.cmd("safemode enter")
        conn = http.client.HTTPConnection(*cluster.http, timeout=30)
        conn.request("PUT", "/webhdfs/v1/smoke/newdir?op=MKDIRS&user.name=" + USER)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        assert resp.status == 403 and b"SafeModeException" in body, (resp.status, body[:300])
        log("safe mode: MKDIRS refused (403 SafeModeException), reads go on")
        check_all(web, files, "in safe mode")
        cluster.cmd("safemode leave")

        cluster.cmd("restart-namenode")
        check_all(web, files, "after NameNode restart")

        cluster.cmd("rm /smoke/empty")
        del files["empty"]
        check_all(web, files, "after rm")
        cluster.cmd("rm /smoke/empty", expect="no such path")
        cluster.cmd("stop-datanode 7", expect="no datanode 7")

        t = time.monotonic()
        cluster.quit()
        log(f"quit: cluster down, exit 0 ({time.monotonic() - t:.1f} s)")
        ok = True
    finally:
        if cluster:
            cluster.kill()
        logfile = os.path.join(tmp, "base", "minihdfs.log")
        if not ok and os.path.exists(logfile):
            with open(logfile, errors="replace") as f:
                sys.stderr.write("---- launcher log (tail) ----\n" + "".join(f.readlines()[-60:]))
        if keep or not ok:
            print(f"smoke: left {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    log(f"PASS ({refused} redirected reads refused right after the stop, retried elsewhere)")


if __name__ == "__main__":
    main()
