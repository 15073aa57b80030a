"""ConnectionGuard: who makes room at the cap (the bookkeeping alone; the real server with real
sockets is in test_slow_clients.py and test_slow_requests.py)."""

from __future__ import annotations

from exporter.web.connections import ConnectionGuard


class Conn:
    def __init__(self, name: str) -> None:
        self.name, self.shed_count = name, 0

    def shed(self) -> None:
        self.shed_count += 1

    def __repr__(self) -> str:
        return self.name


def test_waiting_longest_goes_first_then_idle_longest_then_refusal() -> None:
    guard = ConnectionGuard(3, 5.0, 75.0)
    a, b, c = Conn("a"), Conn("b"), Conn("c")
    for conn in (a, b, c):
        assert guard.admit(conn)
    guard.busy(a)  # a's request arrived: being served
    guard.busy(b)
    guard.idle(b)  # b answered, now idle
    d = Conn("d")
    assert guard.admit(d)  # c has waited longest for its request
    assert (a.shed_count, b.shed_count, c.shed_count) == (0, 0, 1)
    guard.busy(d)
    e = Conn("e")
    assert guard.admit(e)  # nobody waiting: the idle one goes
    assert b.shed_count == 1
    guard.busy(e)
    assert not guard.admit(Conn("f"))  # everyone busy: refused
    assert guard.refused == 1 and guard.closed["evicted"] == 2 and guard.open == 3
    assert guard.accepted == 5


def test_a_kept_alive_connection_waits_again_at_its_next_request() -> None:
    guard = ConnectionGuard(2, 5.0, 75.0)
    a, b = Conn("a"), Conn("b")
    guard.admit(a)
    guard.busy(a)
    guard.idle(a)
    guard.admit(b)
    guard.waiting(a)  # a's next request began, b is still waiting for its first
    guard.admit(Conn("c"))
    assert b.shed_count == 1 and a.shed_count == 0  # b began to wait first


def test_lost_connections_leave_no_trace() -> None:
    guard = ConnectionGuard(1, 5.0, 75.0)
    a = Conn("a")
    guard.admit(a)
    guard.lost(a)
    guard.idle(a)  # late notifications of a closed connection are ignored
    guard.waiting(a)
    assert guard.open == 0
    b = Conn("b")
    assert guard.admit(b) and a.shed_count == 0
