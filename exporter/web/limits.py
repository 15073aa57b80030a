"""The file-descriptor limit, and the connection cap that must stay far below it.

Every open connection holds a descriptor. Go programs (node_exporter, Prometheus) raise their soft
RLIMIT_NOFILE to the hard limit when they start (the Go runtime does it since Go 1.19); the
sidecar does the same, logs both, and then keeps `--http-max-connections` to at most half of what
is left after `FD_RESERVE` descriptors for everything else (state files, engine connections, NVML,
logs): between accepting a burst of connections and refusing those over the cap, as many again
may be open for a moment (asyncio accepts at most `backlog(cap)` connections in one go).

The kernel's own queue of connections not yet accepted is longer (`LISTEN_QUEUE`, bounded by
net.core.somaxconn) and costs no descriptor: a burst of connections waits there for a moment
instead of having its SYNs dropped, which would make every client in it, Prometheus included,
retry its connect a second later.
"""

from __future__ import annotations

import contextlib
import resource

from exporter.defaults import FD_RESERVE


def raise_nofile() -> tuple[int, int, int]:
    """(soft limit at start, soft limit now, hard limit); RLIM_INFINITY is -1."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    before = soft
    if hard != resource.RLIM_INFINITY and (soft == resource.RLIM_INFINITY or soft < hard):
        # A container may refuse; the soft limit then stays as it was.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return before, soft, hard


def connection_cap(wanted: int, soft: int) -> int:
    """`wanted`, or less when the descriptor limit `soft` could not hold twice as many."""
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, (soft - FD_RESERVE) // 2))


LISTEN_QUEUE = 4096


def backlog(cap: int) -> int:
    """How many connections asyncio accepts in one go (its `backlog`)."""
    return max(16, cap // 4)
