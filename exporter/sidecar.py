"""Assemble the sidecar from a Config: sources, restore keeper, poll loop, collectors, app; and run
it."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import httpx
import structlog
import uvicorn
from prometheus_client.registry import Collector

from exporter import logs
from exporter.app import build_app
from exporter.collectors.exposition import ExpositionCache
from exporter.collectors.http import HttpCollector
from exporter.collectors.registry import Collectors, build_registry
from exporter.config import Config
from exporter.cycle.loop import PollLoop
from exporter.cycle.pins import Pins
from exporter.defaults import HOST_TIMEOUT
from exporter.durable import DirectoryHeld, DirectoryLock, LockUnusable
from exporter.engines.source import KindSource
from exporter.engines.state import KindState
from exporter.layout import LayoutError, Records, load, records
from exporter.oncall.html import page
from exporter.phases.book import PhaseBook, PhaseStore
from exporter.phases.capture import Capture, capture_of
from exporter.redact import redact_url
from exporter.restore import preflight
from exporter.restore.events import TokenFile
from exporter.restore.keeper import PreflightProbe, RestoreKeeper
from exporter.restore.store import StateStore
from exporter.restore.window import Bounds
from exporter.sources.base import Result
from exporter.sources.blocking import BoundedRunner
from exporter.sources.engine import EngineSource, EngineTraffic
from exporter.sources.gpu_report import GpuReport
from exporter.sources.host import HostReport, HostSource
from exporter.sources.nvml import NvmlSource
from exporter.status import status
from exporter.stop import STOP_GRACE, STOP_SIGNALS, StopDeadline
from exporter.version import USER_AGENT
from exporter.web import limits
from exporter.web.auth import AuthFailures
from exporter.web.connections import ConnectionGuard
from exporter.web.guard import WebGuard
from exporter.web.protocol import protocol_class
from exporter.web.state import WebConfigState
from exporter.web.webconfig import WebConfigError

log = structlog.get_logger("helios_exporter")
PREFLIGHT_GRACE = 2.0  # seconds a probe may run past --preflight-timeout before it is cut


@dataclass
class Sidecar:
    config: Config
    loop: PollLoop
    keeper: RestoreKeeper
    registry: Collectors
    cache: ExpositionCache
    client: httpx.AsyncClient
    events_token: TokenFile | None
    clock: Callable[[], float]
    closers: list[Any]
    phases: PhaseBook
    connections: ConnectionGuard
    auth_failures: AuthFailures
    web: WebConfigState | None
    kind: Callable[[], KindState] | None = None

    def close(self) -> None:
        self.loop.close()
        for closer in self.closers:
            closer.close()

    def status(self) -> dict[str, Any]:
        return self._status(self.clock())

    def page(self) -> str:
        """The on-call page (`GET /`): /status and the page read one clock reading."""
        now = self.clock()
        return page(self._status(now), now)

    def _status(self, now: float) -> dict[str, Any]:
        # The collectors' health for the published view, learned without rendering /metrics.
        out = status(self.loop.view, self.keeper.bounds, self.config, now,
                     since_last_cycle=self.loop.since_last_cycle(),
                     collectors=self.cache.health(),
                     web=None if self.web is None else self.web.status())
        # --engine-kind other than helios: what the engine is read as (exporter/engines/).
        out["engine_kind"] = None if self.kind is None else self.kind().as_status()
        return out


def build(
    config: Config,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Callable[[], float] = time.time,
    timer: Callable[[], float] = time.perf_counter,
    monotonic: Callable[[], float] | None = None,
    host: Callable[[], Result[HostReport]] | None = None,
    nvml: Callable[[], Result[GpuReport]] | None = None,
    process: Collector | None = None,
    platform: Collector | None = None,
    build_info: Collector | None = None,
) -> Sidecar:
    """The sidecar for `config`. Everything it reads can be injected (tests do): the engine's
    HTTP transport, the wall clock, the timer of durations, the monotonic clock of the restore
    window's durations (by default the wall clock's own timeline when that is injected) and of
    the loop's freshness (/healthz; time.monotonic by default), the
    host and NVML polls (instead of psutil and the NVML library), and the
    process/platform/build-info collectors. Raises
    `WebConfigError` when --web-config-file does not load, `LayoutError` when --expect-layout
    does not derive."""
    web = None if config.web_config_file is None else WebConfigState(config.web_config_file)
    timeout = httpx.Timeout(config.timeout)
    client = httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=8),
                               headers={"User-Agent": USER_AGENT},
                               transport=transport)
    engine_source = (EngineSource if config.engine_kind == "helios" else partial(
        KindSource, kind=config.engine_kind))(client, config.engine_url,
                                              config.max_response_bytes, EngineTraffic(),
                                              clock=clock, timeout=config.timeout, timer=timer)
    preflight_probes: dict[str, PreflightProbe] = {}
    auth = None
    if config.preflight_auth_file is not None:
        auth = config.preflight_auth_file.read_text().strip()
    for probe, url in (("direct", config.preflight_direct_url),
                       ("routed", config.preflight_routed_url)):
        if url is not None:
            preflight_probes[probe] = _probe(client, url, config, auth)
    bounds = Bounds(config.request_cutoff, config.restore_bound, config.down_grace,
                    tuple(preflight_probes))
    blocking, closers = _blocking_sources(config, host, nvml)
    # A probe past its own timeout is cut at this deadline, a failed check with its reason.
    keeper = RestoreKeeper(StateStore(config.state_dir), bounds, preflight_probes, clock,
                           monotonic=monotonic or (time.monotonic if clock is time.time else None),
                           preflight_deadline=config.preflight_timeout + PREFLIGHT_GRACE)
    # A published view makes the cached exposition stale (`cache` is bound just below, before
    # any cycle can run).
    loop = PollLoop(engine_source, keeper, config.poll_interval,
                    max_series_per_family=config.max_series_per_family, blocking=blocking,
                    clock=clock, timer=timer, on_publish=lambda _: cache.invalidate(),
                    pins=Pins(config.expect_image_digest, config.expect_package,
                              config.expect_checkpoint, config.expect_ranks,
                              config.expect_power_limit_watts),
                    nvml_all_gpus=config.nvml_all_gpus, layout=_layout(config),
                    monotonic=monotonic or time.monotonic)
    connections = ConnectionGuard(config.http_max_connections, config.http_read_timeout,
                                  config.http_idle_timeout)
    failures = AuthFailures()
    kind = _kind_state(engine_source)
    registry = build_registry(lambda: loop.view, bounds, gpu="nvml" in blocking,
                              http=HttpCollector(connections, failures, web), process=process,
                              platform=platform, build_info=build_info, timer=timer,
                              engines=kind)
    cache = ExpositionCache(registry)
    token = None if config.events_token_file is None else TokenFile(config.events_token_file)

    async def fresh_capture() -> Capture:
        # The capture's time is its cycle's, taken once the cycle lock is held: a phase edge
        # that waited for a running poll cycle is stamped when its own poll began.
        return capture_of(await loop.cycle(blocking=False))

    phases = PhaseBook(PhaseStore(config.state_dir), fresh_capture,
                       on_change=lambda: loop.publish_open_phases(phases.open_phases()))
    return Sidecar(config, loop, keeper, registry, cache, client, token, clock, closers, phases,
                   connections, failures, web, kind)


def _kind_state(source: EngineSource) -> Callable[[], KindState] | None:
    """The engine kind's state, read live (--engine-kind other than helios)."""
    return (lambda: source.state) if isinstance(source, KindSource) else None


def _layout(config: Config) -> Records | None:
    """--expect-layout's records, derived once: the file is not read again while serving."""
    return None if config.expect_layout is None else records(load(config.expect_layout))


def _probe(client: httpx.AsyncClient, url: str, config: Config, auth: str | None) -> PreflightProbe:
    async def run() -> tuple[bool, str]:
        return await preflight.probe(client, url, config.preflight_max_tokens,
                                     config.preflight_timeout, auth, config.preflight_model)
    return run


def _blocking_sources(
    config: Config,
    host: Callable[[], Result[HostReport]] | None,
    nvml: Callable[[], Result[GpuReport]] | None,
) -> tuple[dict[str, BoundedRunner[Any]], list[Any]]:
    """The host source always, NVML unless --no-nvml; and what to close at shutdown."""
    if host is None:
        host = HostSource(config.engine_pid_file, config.engine_process_name).poll
    runners: dict[str, BoundedRunner[Any]] = {"host": BoundedRunner("host", host, HOST_TIMEOUT)}
    closers: list[Any] = []
    if not config.no_nvml:
        if nvml is None:
            # Each GPU gets at most half the source's bound, so one stuck GPU is reported as
            # down while the others still answer within the poll.
            source = NvmlSource(gpu_timeout=min(1.0, config.nvml_timeout / 2))
            closers.append(source)
            nvml = source.poll
        runners["nvml"] = BoundedRunner("nvml", nvml, config.nvml_timeout)
    return runners, closers


def _bind(host: str, port: int) -> socket.socket:
    """Bind before starting: a busy port is a clear error and exit 1, not a crash in a task."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted connections only when the listening
    # socket says it is TCP. Without it Nagle meets delayed ACKs and every keep-alive scrape waits
    # about 40 ms.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling (the sidecar stops the poll loop first), and
    with a long listen queue (exporter/web/limits.py says why)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        for sock in sockets or ():
            sock.listen(limits.LISTEN_QUEUE)


def web_app(sidecar: Sidecar) -> Any:
    """The ASGI app `serve` runs: the routes and, with a web configuration, basic auth around
    them (stepping aside for the routes that the events token guards)."""
    config = sidecar.config
    app: Any = build_app(sidecar.loop, sidecar.cache, sidecar.status, sidecar.events_token,
                         sidecar.phases, page=sidecar.page, auth_failures=sidecar.auth_failures,
                         stale_after=config.stale_after)
    if sidecar.web is not None:
        app = WebGuard(app, sidecar.web, sidecar.auth_failures, bearer_gets=frozenset(
            {"/experiment/phases"} if sidecar.events_token is not None else ()))
    return app


def _server(sidecar: Sidecar) -> _Server:
    """uvicorn with the guarded protocol (exporter/web/protocol.py) and the app (`web_app`)."""
    config = sidecar.config
    app = web_app(sidecar)
    web = sidecar.web
    guard = sidecar.connections
    return _Server(uvicorn.Config(
        app, host=config.listen_host, port=config.listen_port, log_config=None,
        access_log=False, lifespan="off", timeout_graceful_shutdown=2,
        http=protocol_class(guard, web.tls if web is not None else lambda: None),
        ws="none", backlog=limits.backlog(guard.max_connections),
        # The client address is the TCP peer: nothing in front of the sidecar may rewrite it
        # (failed credentials are slowed down per client).
        proxy_headers=False,
    ))


def _fit_connection_cap(guard: ConnectionGuard) -> None:
    """Raise the descriptor limit as Go programs do, and keep the cap far below it."""
    before, soft, hard = limits.raise_nofile()
    wanted = guard.max_connections
    guard.max_connections = limits.connection_cap(wanted, soft)
    log.info("file_descriptor_limit", soft_at_start=before, soft=soft, hard=hard,
             http_max_connections=guard.max_connections)
    if guard.max_connections < wanted:
        log.warning("http_max_connections_lowered", wanted=wanted,
                    http_max_connections=guard.max_connections,
                    reason="the file-descriptor limit could not hold twice as many")


async def serve(config: Config, *, hard_exit: bool = True) -> int:
    """Run the sidecar until SIGTERM, SIGINT or SIGHUP; the exit status. `hard_exit` (a process
    of its own, as the command runs it): the process ends within `STOP_GRACE` of the signal
    whatever a thread is stuck in (stop.py)."""
    try:
        sidecar = build(config)
    except WebConfigError as exc:  # validated at start; changed since: still a clear error
        log.error("web_config_invalid", file=str(config.web_config_file), errors=exc.errors)
        return 2
    except LayoutError as exc:  # the same for --expect-layout
        log.error("layout_invalid", file=str(config.expect_layout),
                  errors=[p.message for p in exc.problems])
        return 2
    lock = DirectoryLock(config.state_dir)
    try:
        lock.acquire()
    except DirectoryHeld as exc:
        log.error("state_dir_in_use", state_dir=str(config.state_dir), holder_pid=exc.holder,
                  error=str(exc))
        sidecar.close()
        await sidecar.client.aclose()
        return 2
    except LockUnusable as exc:  # one that exists and cannot be locked: the rule would be off
        log.error("state_dir_lock_unusable", state_dir=str(config.state_dir), error=str(exc))
        sidecar.close()
        await sidecar.client.aclose()
        return 2
    except OSError as exc:  # no lock file can exist there: the state writes fail and say so
        log.warning("state_dir_lock_unavailable", state_dir=str(config.state_dir),
                    error=exc.strerror or str(exc))
    sidecar.loop.load_state()
    sidecar.phases.load()
    _fit_connection_cap(sidecar.connections)
    server = _server(sidecar)
    try:
        sock = _bind(config.listen_host, config.listen_port)
    except OSError as exc:
        log.error("listen_failed", listen=f"{config.listen_host}:{config.listen_port}",
                  error=exc.strerror or str(exc))
        sidecar.close()
        lock.release()
        await sidecar.client.aclose()
        return 1
    stop = asyncio.Event()
    deadline = StopDeadline(STOP_GRACE, enforce=hard_exit, flush=logs.flush)
    for sig in STOP_SIGNALS:
        asyncio.get_running_loop().add_signal_handler(sig, _stop, sig, stop, deadline)
    log.info("sidecar_starting", engine_url=redact_url(config.engine_url),
             engine_kind=config.engine_kind, listen=f"{config.listen_host}:{config.listen_port}",
             poll_interval=config.poll_interval, state_dir=str(config.state_dir),
             events_api=sidecar.events_token is not None,
             tls=sidecar.web is not None and sidecar.web.tls_enabled,
             basic_auth=sidecar.web is not None and bool(sidecar.web.config.users),
             preflight=list(sidecar.keeper.probes), sources=list(sidecar.loop.blocking_sources))
    try:
        async with _running(sidecar, server, sock, stop):
            await stop.wait()
    finally:
        sidecar.close()
        lock.release()
    log.info("sidecar_stopped", cycles=sidecar.loop.view.cycles)
    deadline.leave_stuck_threads(0)
    return 0


def _stop(sig: signal.Signals, stop: asyncio.Event, deadline: StopDeadline) -> None:
    log.info("stop_requested", signal=sig.name)
    deadline.start()
    stop.set()


@contextlib.asynccontextmanager
async def _running(
    sidecar: Sidecar, server: uvicorn.Server, sock: socket.socket, stop: asyncio.Event
) -> AsyncIterator[None]:
    server_task = asyncio.create_task(server.serve(sockets=[sock]))
    poll_task = asyncio.create_task(sidecar.loop.run_forever())
    server_task.add_done_callback(lambda _: stop.set())
    try:
        yield
    finally:
        # Stop polling first; a poll cut mid-flight leaves the last persisted state, which is
        # always a complete one (state is written atomically at each transition).
        poll_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await poll_task
        await sidecar.keeper.aclose()
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await server_task
        await sidecar.client.aclose()
