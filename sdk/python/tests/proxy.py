"""A proxy in front of chatd that injects faults: 503s, dropped connections, lost answers, cut streams."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit


@dataclass
class Seen:
    method: str
    path: str
    idempotency_key: str | None
    last_event_id: str | None


# What the proxy does with request number n (from 0): None forwards it;
# "503" answers 503 itself; "drop" closes the connection unanswered; "lost"
# forwards it and drops the answer (the work is done, the client never
# knows); ("cut", k) forwards a stream and cuts it after its k-th
# message_part event.
Plan = Callable[[int, Seen], "str | tuple[str, int] | None"]


class Proxy:
    def __init__(self, upstream: str) -> None:
        u = urlsplit(upstream)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        self.plan: Plan = lambda n, s: None
        self.seen: list[Seen] = []
        self.retry_after = "0"
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                proxy.handle(self)

            do_POST = do_PATCH = do_DELETE = do_GET

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        body = h.rfile.read(int(h.headers.get("Content-Length") or 0))
        seen = Seen(h.command, h.path, h.headers.get("Idempotency-Key"), h.headers.get("Last-Event-ID"))
        with self._lock:
            n = len(self.seen)
            self.seen.append(seen)
        action = self.plan(n, seen)
        if action == "503":
            payload = b'{"message":"The database is not reachable."}'
            h.send_response(503)
            h.send_header("Content-Type", "application/json")
            h.send_header("Retry-After", self.retry_after)
            h.send_header("Content-Length", str(len(payload)))
            h.end_headers()
            h.wfile.write(payload)
            return
        if action == "drop":
            _drop(h)
            return
        up = http.client.HTTPConnection(self.host, self.port, timeout=120)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("host", "connection")}
        up.request(h.command, h.path, body=body or None, headers=headers)
        resp = up.getresponse()
        if action == "lost":
            resp.read()
            up.close()
            _drop(h)
            return
        cut = action[1] if isinstance(action, tuple) else None
        h.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                h.send_header(k, v)
        h.send_header("Connection", "close")
        h.end_headers()
        parts = 0
        buf = b""
        try:
            while True:
                chunk = resp.read1(65536)
                if not chunk:
                    break
                if cut is None:
                    h.wfile.write(chunk)
                    h.wfile.flush()
                    continue
                buf += chunk
                while b"\n\n" in buf:  # forward whole events, counting message_part ones
                    block, buf = buf.split(b"\n\n", 1)
                    h.wfile.write(block + b"\n\n")
                    h.wfile.flush()
                    if b"event: message_part" in block:
                        parts += 1
                        if parts >= cut:
                            _drop(h)
                            return
        except OSError:
            pass
        finally:
            up.close()


def _drop(h: BaseHTTPRequestHandler) -> None:
    h.close_connection = True
    try:
        h.connection.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    h.connection.close()
