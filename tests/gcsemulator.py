"""A real GCS emulator (gcp-storage-emulator) in its own process on a free 127.0.0.1 port.

A separate process, so the pipeline talks to it over HTTP exactly as it talks to GCS, and the
server's work does not share the test process's interpreter lock.
"""

from __future__ import annotations

import http.client
import http.server
import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Emulator:
    """`with Emulator() as emu:` starts the server and waits until it answers; `emu.url` is its address."""

    def __init__(self, port: int | None = None, startup_s: float = 30.0) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.startup_s = startup_s
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> Emulator:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gcp_storage_emulator",
                "start",
                "--host=127.0.0.1",
                f"--port={self.port}",
                "--in-memory",
                "--quiet",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + self.startup_s
        while True:
            try:
                with urllib.request.urlopen(self.url + "/", timeout=1) as answer:
                    answer.read()
                return self
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__()
                    raise RuntimeError(f"the GCS emulator did not start on {self.url}") from None
                time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def client(self):
        """A google-cloud-storage client for test set-up only (buckets, uploads); the pipeline
        under test never uses it, it goes through Beam's filesystems."""
        from google.auth.credentials import AnonymousCredentials
        from google.cloud import storage

        return storage.Client(
            project="test",
            credentials=AnonymousCredentials(),
            client_options={"api_endpoint": self.url},
        )

    def upload_tree(self, bucket: str, prefix: str, files: Mapping[str, bytes]) -> None:
        """relpath -> bytes under gs://bucket/prefix/, creating the bucket if needed."""
        client = self.client()
        target = client.lookup_bucket(bucket) or client.create_bucket(bucket)
        for relpath, data in files.items():
            target.blob(f"{prefix.strip('/')}/{relpath}" if prefix else relpath).upload_from_string(data)


class PermissionProxy:
    """An HTTP proxy on 127.0.0.1 in front of the emulator that answers 403 as GCS's IAM would.

    The emulator has no IAM, and there is no real GCS here, so this is the one stand-in: the
    client, Beam and the emulator behind it are real, only the decision to refuse is made up.
    `denied` maps a bucket to "all" (no role at all), "write" (Object Viewer: reads only) or
    "copy" (no copies: cuts a write off at Beam's finalize step, after every temp file is written).
    `latency_s` delays every answer, as a stand-in for GCS's tens of milliseconds per request.
    Links the emulator hands out (an object's mediaLink, an upload session's Location) are
    rewritten to point at the proxy, so downloads and upload sessions are delayed and refused too.
    """

    def __init__(self, upstream: str, denied: Mapping[str, str], latency_s: float = 0.0) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.denied = dict(denied)
        self.latency_s = latency_s
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> PermissionProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)

    def refused(self, method: str, path: str, body: bytes) -> bool:
        """Whether IAM would refuse this request (batch requests carry theirs in the body)."""
        text = path + "\n" + body.decode("latin-1")
        for bucket, mode in self.denied.items():
            if f"/b/{bucket}/" not in text and not path.split("?")[0].endswith(f"/b/{bucket}"):
                continue
            if mode == "all" or (mode == "write" and method not in ("GET", "HEAD")):
                return True
            if mode == "copy" and re.search(r"/(copyTo|rewriteTo)/", text):
                return True
        return False

    def relink(self, text: str) -> str:
        """The emulator's own address in a link, replaced by the proxy's."""
        return text.replace(self.upstream.netloc, urllib.parse.urlsplit(self.url).netloc)

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(proxy.latency_s)
                if proxy.refused(self.command, self.path, body):
                    error = {"code": 403, "message": "Caller does not have storage access to the bucket."}
                    self._answer(403, {"Content-Type": "application/json"}, json.dumps({"error": error}))
                    return
                target = proxy.upstream
                upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                upstream.close()
                skip = ("transfer-encoding", "connection", "content-length")
                kept = {k: proxy.relink(v) for k, v in answer.getheaders() if k.lower() not in skip}
                if (answer.getheader("Content-Type") or "").startswith("application/json"):
                    data = proxy.relink(data.decode()).encode()
                self._answer(answer.status, kept, data)

            def _answer(self, status: int, headers: Mapping[str, str], data: bytes | str) -> None:
                data = data.encode() if isinstance(data, str) else data
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        return Handler
