"""The sidecar's open client connections: the cap, and who makes room when it is reached.

Whatever can reach the pod can open connections, so the number open is capped
(`--http-max-connections`, far below the file-descriptor limit). A cap alone would be a lever
for the very attack it bounds: a client that keeps the cap filled with connections that never
finish a request (slowloris) would lock Prometheus out for good. So at the cap a newcomer is not
turned away while someone has made the sidecar wait: the connection that has been waiting longest
for its request to arrive is closed to make room, then the one idle the longest between requests.
Only when every open connection is busy with a request is the newcomer refused (a 503 on plain
HTTP, a closed connection under TLS). Prometheus sends its request the moment it connects, so a
flood of half-open connections cannot crowd it out; a flood of complete requests is refused fast.

Counted for `helios_exporter_http_*` (exporter/collectors/http.py). Pure bookkeeping: the HTTP
protocol (exporter/web/protocol.py) reports what its connection does and closes what it is told.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from exporter.labels import CONNECTION_CLOSE_REASONS


class Connection(Protocol):
    def shed(self) -> None:
        """Close at once: another connection needs the room."""


class ConnectionGuard:
    def __init__(self, max_connections: int, read_timeout: float, idle_timeout: float) -> None:
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.idle_timeout = idle_timeout
        self._open: set[Connection] = set()
        # Insertion order is the order in which they began to wait / went idle: oldest first.
        self._waiting: OrderedDict[Connection, None] = OrderedDict()
        self._idle: OrderedDict[Connection, None] = OrderedDict()
        self.accepted = 0  # admitted, since start
        self.refused = 0  # turned away at the cap, every open connection being busy
        self.closed = dict.fromkeys(CONNECTION_CLOSE_REASONS, 0)  # closed by the sidecar, by reason
        self.tls_handshake_failures = 0

    @property
    def open(self) -> int:
        return len(self._open)

    def admit(self, conn: Connection) -> bool:
        """A new connection: True when it may stay (it then waits for its request)."""
        if len(self._open) >= self.max_connections:
            victim = self._victim()
            if victim is None:
                self.refused += 1
                return False
            self.closed["evicted"] += 1
            self.lost(victim)
            victim.shed()
        self.accepted += 1
        self._open.add(conn)
        self._waiting[conn] = None
        return True

    def _victim(self) -> Connection | None:
        for queue in (self._waiting, self._idle):
            if queue:
                return next(iter(queue))
        return None

    # What the connection does -----------------------------------------------------------------
    def waiting(self, conn: Connection) -> None:
        """A request has begun to arrive (or the connection is new): not complete yet."""
        self._idle.pop(conn, None)
        if conn in self._open and conn not in self._waiting:
            self._waiting[conn] = None

    def busy(self, conn: Connection) -> None:
        """The whole request arrived: it is served, never closed to make room."""
        self._waiting.pop(conn, None)
        self._idle.pop(conn, None)

    def idle(self, conn: Connection) -> None:
        """The response went out; the connection is kept alive for the next request."""
        if conn in self._open and conn not in self._waiting:
            self._idle[conn] = None

    def closing(self, reason: str) -> None:
        """The sidecar closes a connection itself (a deadline, a head too large)."""
        self.closed[reason] += 1

    def lost(self, conn: Connection) -> None:
        """The connection is gone, whoever closed it."""
        self._open.discard(conn)
        self._waiting.pop(conn, None)
        self._idle.pop(conn, None)

    def connections(self) -> list[Connection]:
        return list(self._open)
