"""A scripted target for end-to-end tests: serves whatever exposition text the test sets at
/metrics, or answers 503 while `down` (Prometheus records up 0, as for an unreachable sidecar)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Exposition:
    def __init__(self) -> None:
        self.text = ""
        self.down = False
        self.start = 0.0  # a scripted window's start, for the test's own bookkeeping
        exposition = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if exposition.down:
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = exposition.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Exposition:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
