"""Shared set-up of the Python package's tests: the repository's fixtures, the `modelfs`
command the wheel installed (the answers are compared with it), and a moto S3 server on a
free loopback port for the remote tests."""

import os
import shutil
import socket
import subprocess
import time
import urllib.request

import numpy as np
import pytest

import modelfs

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "fixtures")


def required():
    """Under CI (or MODELFS_REQUIRE_FUSE=1) what a test needs must be there: a missing
    /dev/fuse or package fails the test instead of skipping it."""
    return os.environ.get("CI") == "true" or os.environ.get("MODELFS_REQUIRE_FUSE") == "1"


def needs_fuse():
    if not os.path.exists("/dev/fuse"):
        if required():
            pytest.fail("no /dev/fuse, and CI requires real mounts")
        pytest.skip("no /dev/fuse on this machine")


def needs(module):
    if required():
        # The module itself (`dask.dataframe`), as importorskip gives, not its package.
        import importlib
        return importlib.import_module(module)
    return pytest.importorskip(module)


def fixture(rel):
    path = os.path.join(FIXTURES, rel)
    # A checkpoint prefix is no file: its index is.
    there = os.path.exists(path) or os.path.exists(path + ".index")
    assert there, f"fixture missing: {path}"
    return path


def cli(*args, check=True):
    """Runs the installed `modelfs` command; its stdout as bytes."""
    p = subprocess.run([modelfs._binary(), *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise AssertionError(f"modelfs {' '.join(args)}: {p.returncode} {p.stderr.decode()}")
    return p


def npy_of(source, name, *opts):
    """The mount's NAME.npy (through `modelfs cat`, the mount's own tree), or None when the
    mount has no such file."""
    args = ["cat", source, f"{name}.npy"] + (["-o", ",".join(opts)] if opts else [])
    p = cli(*args, check=False)
    if p.returncode == 64:
        return None
    assert p.returncode == 0, p.stderr.decode()
    import io
    return p.stdout, np.load(io.BytesIO(p.stdout), allow_pickle=False)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Moto:
    """moto's S3 server, started here and stopped at the end; objects PUT unsigned (moto
    does not check signatures)."""

    def __init__(self, workdir):
        exe = shutil.which("moto_server")
        if exe is None:
            pytest.fail("moto_server is not installed (scripts/test installs moto[server])")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(workdir, "moto.log"), "w")
        self.proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("moto_server did not start")
                time.sleep(0.1)

    def request(self, method, path, body=None):
        # An empty body still says its length, or the server waits for one.
        headers = {"Content-Length": str(len(body or b"")),
                   "Content-Type": "application/octet-stream"}
        req = urllib.request.Request(f"{self.url}/{path}", data=body, method=method,
                                     headers=headers)
        urllib.request.urlopen(req).read()

    def upload(self, bucket, local, prefix):
        """Uploads `local` (a file or a directory tree) under `prefix`."""
        if os.path.isfile(local):
            with open(local, "rb") as f:
                self.request("PUT", f"{bucket}/{prefix}", f.read())
            return
        for root, _, files in os.walk(local):
            for name in files:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, local)
                with open(path, "rb") as f:
                    self.request("PUT", f"{bucket}/{prefix}/{rel}", f.read())

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="session")
def moto(tmp_path_factory):
    for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_REGION": "us-east-1"}.items():
        os.environ[k] = v
    server = Moto(str(tmp_path_factory.mktemp("moto")))
    server.request("PUT", "models")
    yield server
    server.stop()
