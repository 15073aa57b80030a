"""A local Alertmanager webhook receiver for end-to-end tests and benchmarks.

Every POST is recorded with its path (Alertmanager's receiver, e.g. ``/helios-page`` with
deploy/alertmanager/alertmanager-test.yml), its wall-clock arrival time and its JSON body
(webhook payload version 4). The server runs in a daemon thread of the calling process:

    with WebhookReceiver() as hook:
        ...  # point Alertmanager at hook.port
        hook.wait_for(lambda: hook.deliveries("HeliosRestoreBoundBreached", status="firing"), 30)
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Post:
    """One webhook POST as it arrived."""

    path: str
    received_at: float  # time.time() when the body had been read
    body: dict[str, Any]

    @property
    def receiver(self) -> str:
        return self.path.strip("/")

    @property
    def status(self) -> str:
        return str(self.body.get("status", ""))

    @property
    def alerts(self) -> list[dict[str, Any]]:
        alerts: list[dict[str, Any]] = self.body.get("alerts", [])
        return alerts


@dataclass(frozen=True)
class Delivery:
    """One alert inside a POST (a POST of a group may carry several alerts)."""

    post: Post
    alert: dict[str, Any]

    @property
    def labels(self) -> dict[str, str]:
        labels: dict[str, str] = self.alert.get("labels", {})
        return labels

    @property
    def status(self) -> str:
        return str(self.alert.get("status", ""))

    @property
    def received_at(self) -> float:
        return self.post.received_at


class WebhookReceiver:
    """Records every POST; answers 200 (or 400 for a body that is not JSON, also recorded)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._lock = threading.Lock()
        self._posts: list[Post] = []
        self._bad: list[tuple[str, float, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                now = time.time()
                try:
                    body = json.loads(raw)
                    if not isinstance(body, dict):
                        raise ValueError("not an object")
                except ValueError:
                    with receiver._lock:
                        receiver._bad.append((self.path, now, raw))
                    self.send_response(400)
                    self.end_headers()
                    return
                with receiver._lock:
                    receiver._posts.append(Post(self.path, now, body))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> WebhookReceiver:
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True,
                                        name=f"webhook-{self.port}")
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> WebhookReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def posts(self) -> list[Post]:
        with self._lock:
            return list(self._posts)

    def bad_posts(self) -> list[tuple[str, float, bytes]]:
        with self._lock:
            return list(self._bad)

    def deliveries(self, alertname: str | None = None, *, status: str | None = None,
                   instance: str | None = None, receiver: str | None = None) -> list[Delivery]:
        """Alerts received so far, in arrival order, filtered by label / alert status / path."""
        found = []
        for post in self.posts():
            if receiver is not None and post.receiver != receiver:
                continue
            for alert in post.alerts:
                d = Delivery(post, alert)
                if alertname is not None and d.labels.get("alertname") != alertname:
                    continue
                if instance is not None and d.labels.get("instance") != instance:
                    continue
                if status is not None and d.status != status:
                    continue
                found.append(d)
        return found

    def wait_for(self, check: Callable[[], T], timeout: float, what: str = "webhook POST",
                 interval: float = 0.05) -> T:
        """Poll `check` until it returns something truthy; TimeoutError with what was seen."""
        deadline = time.monotonic() + timeout
        while True:
            result = check()
            if result:
                return result
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {what}; "
                                   f"received: {self.summary()}")
            time.sleep(interval)

    def summary(self) -> list[str]:
        """One short line per received alert, for failure messages."""
        return [f"{d.received_at:.2f} {d.post.receiver} {d.status} "
                f"{d.labels.get('alertname')} {d.labels.get('instance')}"
                for d in self.deliveries()]
