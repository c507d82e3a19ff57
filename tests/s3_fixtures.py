"""An S3-protocol endpoint for tests: ``moto`` in server mode on a free local port, one bucket, and the
standard AWS environment variables pointing at it (what skewlab.shared.filesystems reads)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

BUCKET = "skewlab-test"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def s3_endpoint(monkeypatch, tmp_path):
    """``s3://BUCKET`` on a moto server; the AWS_* variables are set for this process and its children."""
    pytest.importorskip("moto")
    boto3 = pytest.importorskip("boto3")
    server = shutil.which("moto_server", path=os.path.dirname(sys.executable)) or shutil.which("moto_server")
    assert server, "moto[server] is installed without its moto_server script"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([server, "-H", "127.0.0.1", "-p", str(port)], stdout=open(tmp_path / "moto.log", "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=2)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "moto.log").read_text()
                time.sleep(0.2)
        for name, value in {"AWS_ENDPOINT_URL": url, "AWS_ACCESS_KEY_ID": "testing",
                            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
            monkeypatch.setenv(name, value)
        boto3.client("s3", endpoint_url=url).create_bucket(Bucket=BUCKET)
        yield f"s3://{BUCKET}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
