"""A real GCS emulator (gcp-storage-emulator) in its own process on a free 127.0.0.1 port.

A separate process, so the pipeline talks to it over HTTP exactly as it talks to GCS, and the
server's work does not share the test process's interpreter lock.
"""

from __future__ import annotations

import collections
import contextlib
import http.client
import http.server
import io
import json
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

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

    def intercept(self, handler: Any, method: str, path: str, body: bytes) -> bool:
        """Answer the request here instead of relaying it (True when answered): IAM's 403."""
        if not self.refused(method, path, body):
            return False
        error = {"code": 403, "message": "Caller does not have storage access to the bucket."}
        handler._answer(403, {"Content-Type": "application/json"}, json.dumps({"error": error}))
        return True

    def serialized(self, method: str, path: str) -> contextlib.AbstractContextManager[object]:
        """What one request holds while it is decided and relayed (nothing here)."""
        return contextlib.nullcontext()

    def relink(self, text: str) -> str:
        """The emulator's own address in a link, replaced by the proxy's."""
        return text.replace(self.upstream.netloc, urllib.parse.urlsplit(self.url).netloc)

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _relay(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(proxy.latency_s)
                with proxy.serialized(self.command, self.path):
                    self._relay_body(body)

            def _relay_body(self, body: bytes) -> None:
                if proxy.intercept(self, self.command, self.path, body):
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

            def reset(self) -> None:
                """Drop the connection with a TCP reset, answering nothing."""
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.rfile.close()
                self.connection.close()  # the last reference: the reset goes out now
                self.rfile, self.wfile = io.BytesIO(), io.BytesIO()  # for the server's own clean-up
                self.close_connection = True

            def stall(self, hold_s: float, released: threading.Event) -> str:
                """Answer nothing until the client hangs up ("client gave up"), or until `hold_s`
                passes or the proxy closes ("held", then a 503 so that the client moves on)."""
                self.close_connection = True
                deadline = time.monotonic() + hold_s
                while time.monotonic() < deadline and not released.is_set():
                    if select.select([self.connection], [], [], 0.1)[0]:
                        try:
                            more = self.connection.recv(1, socket.MSG_PEEK)
                        except OSError:
                            more = b""
                        if not more:
                            return "client gave up"
                with contextlib.suppress(OSError):
                    self._answer(
                        503, {"Content-Type": "application/json"}, json.dumps({"error": {"code": 503}})
                    )
                return "held"

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _relay

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def request_kind(method: str, path: str) -> str:
    """Which kind of GCS JSON API request this is: list, download, metadata, upload, batch or other."""
    route, _, query = path.partition("?")
    if route.startswith("/upload/"):
        return "upload"
    if route.startswith("/batch/"):
        return "batch"
    if route.startswith("/download/") or "alt=media" in query:
        return "download"
    if method == "GET" and re.search(r"/b/[^/]+/o$", route):
        return "list"
    if method == "GET" and "/o/" in route:
        return "metadata"
    return "other"


class FaultProxy(PermissionProxy):
    """A proxy in front of the emulator that injects the faults a long run meets on GCS.

    `faults` maps a request kind (`request_kind`) to {ordinal: fault}: the n-th request of that
    kind (1-based, retries counted) gets the fault instead of its answer. Faults:
      "503": answered 503 Service Unavailable, as GCS does when busy;
      "reset": the connection is dropped with a TCP reset, nothing answered;
      "stall": accepted and never answered, until the client hangs up or `hold_s` passes (then a
        503). `stalls` records which it was for each stall: "client gave up" shows that the
        client's own time limit ended the wait, which no stall outlasting it ever shows.
    Only the fault is made up: the client, Beam and the emulator are real, over HTTP.
    """

    FAULTS = ("503", "reset", "stall")

    def __init__(self, upstream: str, faults: Mapping[str, Mapping[int, str]], hold_s: float = 45.0) -> None:
        super().__init__(upstream, {})
        self.faults = {kind: dict(plan) for kind, plan in faults.items()}
        self.hold_s = hold_s
        self.counts: collections.Counter[str] = collections.Counter()
        self.injected: list[tuple[str, int, str]] = []
        self.stalls: list[str] = []
        self._lock = threading.Lock()
        self._released = threading.Event()

    def __exit__(self, *exc: object) -> None:
        self._released.set()
        super().__exit__(*exc)

    def intercept(self, handler: Any, method: str, path: str, body: bytes) -> bool:
        kind = request_kind(method, path)
        with self._lock:
            self.counts[kind] += 1
            ordinal = self.counts[kind]
            fault = self.faults.get(kind, {}).get(ordinal)
            if fault is not None:
                self.injected.append((kind, ordinal, fault))
        if fault is None:
            return super().intercept(handler, method, path, body)
        if fault == "503":
            error = {"code": 503, "message": "We encountered an internal error. Please try again."}
            handler._answer(503, {"Content-Type": "application/json"}, json.dumps({"error": error}))
        elif fault == "reset":
            handler.reset()
        elif fault == "stall":
            outcome = handler.stall(self.hold_s, self._released)
            with self._lock:
                self.stalls.append(outcome)
        else:
            raise ValueError(f"unknown fault {fault!r}; one of {self.FAULTS}")
        return True


class GenerationProxy(PermissionProxy):
    """A proxy in front of the emulator that honours GCS's generation preconditions.

    gcp-storage-emulator (2026.7.19) ignores `ifGenerationMatch`: a second upload with
    `if_generation_match=0` (create only if absent) overwrites the object, where GCS answers 412
    Precondition Failed (tests/test_claim.py checks both, so a release that starts honouring
    it shows). So this stand-in checks the precondition of every request that carries one
    (uploads, downloads, deletes) against the emulator's own generation of the object, and answers
    412 as GCS does; requests with one are handled one at a time, so the check and the write
    are one step, as they are in GCS. Only that decision is made here: the client, Beam and the
    emulator behind it are real. `failed` lists the (method, object) pairs it answered 412.
    """

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream, {})
        self._lock = threading.Lock()
        self.failed: list[tuple[str, str]] = []

    def serialized(self, method: str, path: str) -> contextlib.AbstractContextManager[object]:
        return self._lock if "ifGenerationMatch=" in path else contextlib.nullcontext()

    def intercept(self, handler: Any, method: str, path: str, body: bytes) -> bool:
        route, _, query = path.partition("?")
        wanted = urllib.parse.parse_qs(query).get("ifGenerationMatch")
        if not wanted:
            return super().intercept(handler, method, path, body)
        bucket, name = self._object(route, query, body)
        if self._generation(bucket, name) == int(wanted[0]):
            return super().intercept(handler, method, path, body)
        self.failed.append((method, name))
        error = {"code": 412, "message": "At least one of the pre-conditions you specified did not hold."}
        handler._answer(412, {"Content-Type": "application/json"}, json.dumps({"error": error}))
        return True

    @staticmethod
    def _object(route: str, query: str, body: bytes) -> tuple[str, str]:
        """The bucket and object a request is about: in its path, or an upload's `name`
        (in the query, or in the JSON part of a multipart body)."""
        found = re.search(r"/b/([^/]+)/o/(.+)$", route)
        if found:
            return found[1], urllib.parse.unquote(found[2])
        bucket = re.search(r"/b/([^/]+)/o$", route)[1]
        named = urllib.parse.parse_qs(query).get("name")
        if named:
            return bucket, named[0]
        return bucket, json.loads(re.search(rb"\{.*?\}", body, re.S)[0])["name"]

    def _generation(self, bucket: str, name: str) -> int:
        """The emulator's generation of an object; 0 when there is none (GCS's meaning)."""
        target = self.upstream
        connection = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        quoted = urllib.parse.quote(name, safe="")
        connection.request("GET", f"/storage/v1/b/{bucket}/o/{quoted}")
        answer = connection.getresponse()
        data = answer.read()
        connection.close()
        return int(json.loads(data)["generation"]) if answer.status == 200 else 0
