"""Real `serve` processes against a hostile engine and a hostile preflight endpoint: memory
stays bounded, /metrics stays fast, poll cycles go on, /healthz answers at once.

The engine's and the preflight's faults, each against a sidecar of its own process, so that
its peak memory (`VmHWM` of /proc/PID/status) is what these faults cost: a double gzip of a
few hundred bytes (256 MiB and 1 GiB of zeros), a 1 MB single gzip layer of 1 GiB, deflate,
br and an unknown coding, pass-through label values of 10 KB that change every poll, infinite
bucket bounds; and a preflight endpoint that drips, answers 1 GiB of gzip, stacks gzip or nests 100,000 deep.
Before these bounds the double gzip took the sidecar from 84 to 345 MiB (2.1 GiB for 1.8 KB), the
changing labels to 505 MiB, and the dripping probe stopped every poll cycle.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.procs import Proc, start_sidecar
from tests.helpers import promtool_check_metrics
from tests.hostile.bombs import zeros_gzip
from tests.hostile.stub import (
    SANE,
    SANE_METRICS,
    Behaviour,
    Case,
    HostileEngine,
    drip,
    each_time,
    hang_up,
    head,
    json_body,
    respond,
    running_engine,
    sane_snapshot,
)
from tests.process_guard import process_fixture
from tools.harness import families

PEAK_BUDGET_MIB = 150  # under every fault
# Seconds one /metrics or /healthz may take (the kubelet allows 3), or 20 times the slowest of
# the same answers before any fault, on this machine now (Sidecar.yardstick), if that is more.
SCRAPE_BUDGET = 2.0
HEALTHZ_BUDGET = 2.0
PACE = 20
POLL_INTERVAL = 0.2
MiB = 1 << 20


def gzipped(body: bytes, coding: str = "gzip") -> Behaviour:
    return respond(200, body, {"Content-Type": "application/json", "Content-Encoding": coding})


def vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


@dataclass
class Sidecar:
    proc: Proc
    url: str
    client: httpx.Client
    slowest_scrape: float = 0.0
    slowest_healthz: float = 0.0
    yardstick: float = 0.0  # the slowest healthy /metrics or /healthz, before any fault

    def measure_yardstick(self) -> None:
        took = []
        for path in ("/metrics", "/healthz") * 5:
            t0 = time.perf_counter()
            self.client.get(self.url + path)
            took.append(time.perf_counter() - t0)
        self.yardstick = max(took)

    @property
    def pid(self) -> int:
        assert self.proc.popen is not None
        return self.proc.popen.pid

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = self.client.get(self.url + "/status").json()
        return data

    def scrape(self) -> bytes:
        t0 = time.perf_counter()
        resp = self.client.get(self.url + "/metrics")
        took = time.perf_counter() - t0
        self.slowest_scrape = max(self.slowest_scrape, took)
        assert resp.status_code == 200
        assert took < max(SCRAPE_BUDGET, PACE * self.yardstick), f"/metrics took {took:.2f}s"
        return resp.content

    def healthz(self) -> None:
        t0 = time.perf_counter()
        resp = self.client.get(self.url + "/healthz")
        took = time.perf_counter() - t0
        self.slowest_healthz = max(self.slowest_healthz, took)
        assert resp.status_code == 200, resp.text
        assert took < max(HEALTHZ_BUDGET, PACE * self.yardstick), f"/healthz took {took:.2f}s"

    def cycles(self, n: int, timeout: float = 60.0,
               until: Callable[[dict[str, Any]], bool] | None = None) -> dict[str, Any]:
        """Wait for `n` more completed poll cycles (and `until`), scraping and probing all the
        while: /metrics and /healthz answer within their budgets throughout."""
        start = self.status()["poll_cycles"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.scrape()
            self.healthz()
            status = self.status()
            if status["poll_cycles"] >= start + n and (until is None or until(status)):
                return status
            time.sleep(0.05)
        pytest.fail(f"not {n} poll cycles in {timeout}s:\n{self.proc.tail()}")

    def peak_ok(self) -> float:
        peak = vm_hwm_mib(self.pid)
        assert peak < PEAK_BUDGET_MIB, f"peak RSS {peak:.0f} MiB"
        return peak


def running_sidecar(engine: HostileEngine, tmp: Path, *extra: str) -> Iterator[Sidecar]:
    proc, url = start_sidecar(engine.url, tmp / "sidecar.log", "--poll-interval",
                              str(POLL_INTERVAL), "--timeout", "1.0", *extra,
                              state_dir=tmp / "state", ready=30)
    client = httpx.Client(timeout=10.0)
    try:
        sidecar = Sidecar(proc, url, client)
        sidecar.measure_yardstick()
        yield sidecar
    finally:
        client.close()
        rc = proc.stop()
    assert rc == 0, proc.tail()
    log = (tmp / "sidecar.log").read_text(errors="replace")
    assert "poll_cycle_failed" not in log and "Traceback" not in log


# -- the engine's answers ------------------------------------------------------------------------

def _long_changing_labels(n: int) -> Behaviour:
    """250 pass-through series whose label values (10 KB each) are new at every poll."""
    pad = "v" * 10_000
    lines = [SANE_METRICS] + [f'helios:prompt_tokens_total{{rid="{n}-{i}-{pad}"}} 1'
                              for i in range(250)]
    return respond(200, "\n".join(lines) + "\n")


INFINITE_BOUNDS = SANE_METRICS + "\n".join(
    f'helios:e2e_request_latency_seconds_bucket{{le="{bound}",model_name="m"}} 99'
    for bound in ("1e999", "-Inf", "Infinity", "-1e999")) + "\n"


def _plus_inf_is_the_count(fams: dict[str, Any]) -> None:
    name = "helios_engine_native_e2e_request_latency_seconds"
    fam = fams[name]
    buckets = {s.labels["le"]: s.value for s in fam.samples if s.name == name + "_bucket"}
    count = [s.value for s in fam.samples if s.name == name + "_count"]
    assert buckets["+Inf"] == count[0], (buckets, count)
    assert all(le == "+Inf" or abs(float(le)) < float("inf") for le in buckets)


@dataclass(frozen=True)
class Fault:
    case: Case
    source: str  # the source that goes down, with `reason` ("both": the two; "": neither)
    reason: str = ""
    cycles: int = 6
    check: Callable[[dict[str, Any]], None] | None = None


ENGINE_FAULTS = [
    Fault(Case("double_gzip_of_256_mib", snapshot=gzipped(zeros_gzip(256 * MiB, 2), "gzip, gzip")),
          "engine_snapshot", "decode"),
    Fault(Case("double_gzip_of_1_gib", metrics=gzipped(zeros_gzip(1 << 30, 2), "gzip, gzip")),
          "engine_metrics", "decode"),
    Fault(Case("gzip_1mb_of_1gib", snapshot=gzipped(zeros_gzip(1 << 30, 1)),
               metrics=gzipped(zeros_gzip(1 << 30, 1))), "both", "too_large"),
    Fault(Case("deflate", snapshot=gzipped(b"x\x9c\xab\xae\x05\x00\x01u\x00\xf9", "deflate")),
          "engine_snapshot", "decode"),
    Fault(Case("br", snapshot=gzipped(b"\x0b\x01\x80{}\x03", "br")), "engine_snapshot", "decode"),
    Fault(Case("unknown_coding", metrics=gzipped(b"x", "x-squeeze")), "engine_metrics", "decode"),
    Fault(Case("long_changing_label_values", metrics=each_time(_long_changing_labels)), "",
          cycles=40),
    Fault(Case("infinite_bucket_bounds", metrics=respond(200, INFINITE_BOUNDS)), "",
          check=_plus_inf_is_the_count),
]


@pytest.fixture(scope="module")
def engine() -> Iterator[HostileEngine]:
    with running_engine() as eng:
        yield eng


@process_fixture(scope="module")
def sidecar(engine: HostileEngine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sidecar]:
    # --down-grace: a failing snapshot must not open a restore window here.
    yield from running_sidecar(engine, tmp_path_factory.mktemp("bounded"), "--down-grace", "3600")


@pytest.mark.e2e
@pytest.mark.parametrize("fault", ENGINE_FAULTS, ids=lambda f: f.case.name)
def test_engine_fault_keeps_memory_bounded_and_polls_going(fault: Fault, engine: HostileEngine,
                                                          sidecar: Sidecar) -> None:
    engine.case = fault.case
    try:
        status = sidecar.cycles(fault.cycles)
        body = sidecar.scrape()
        promtool_check_metrics(body)
        fams = families(body)
        for source in ("engine_snapshot", "engine_metrics"):
            health = status["sources"][source]
            if fault.source in (source, "both"):
                assert (health["up"], health["last_reason"]) == (False, fault.reason), health
            else:
                assert health["up"] is True, (source, health)
        if fault.check is not None:
            fault.check(fams)
        sidecar.peak_ok()
    finally:
        engine.case = SANE
    status = sidecar.cycles(2)
    assert status["sources"]["engine_snapshot"]["up"] is True
    assert status["freshness"]["stale"] is False


@pytest.mark.e2e
def test_engine_faults_peak(sidecar: Sidecar) -> None:
    peak = sidecar.peak_ok()
    print(f"engine faults: peak RSS {peak:.1f} MiB, slowest /metrics "
          f"{sidecar.slowest_scrape * 1000:.0f} ms, slowest /healthz "
          f"{sidecar.slowest_healthz * 1000:.0f} ms")


# -- the preflight endpoint ----------------------------------------------------------------------

PREFLIGHT_FAULTS = {
    "drip": (drip(head(200, {"Content-Type": "application/json"}, length=1000), b"{", 0.1),
             "timeout"),
    "gzip_1mb_of_1gib": (gzipped(zeros_gzip(1 << 30, 1)), "too_large"),
    "double_gzip": (gzipped(zeros_gzip(1 << 30, 2), "gzip, gzip"), "decode"),
    "deep_nesting": (gzipped(gzip.compress(b"[" * 100_000 + b"]" * 100_000)), "decode"),
}


def _restoring(engine: HostileEngine, sidecar: Sidecar, preflight: Behaviour) -> dict[str, Any]:
    """The engine goes away and comes back as another incarnation: the window verifies, and
    its direct preflight probe meets `preflight`."""
    engine.case = Case("gone", snapshot=hang_up(), metrics=hang_up())
    sidecar.cycles(2, until=lambda s: s["restore"]["phase"] == "down")
    engine.case = Case("restored", snapshot=json_body(sane_snapshot("g-restored-0002")),
                       preflight=preflight)
    return sidecar.cycles(2, until=lambda s: s["restore"]["phase"] == "verifying")


def _preflight_details(log: Path) -> list[str]:
    details = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{") and '"preflight"' in line:
            event = json.loads(line)
            if event.get("event") == "preflight" and "detail" in event:
                details.append(str(event["detail"]))
    return details


@process_fixture(scope="module")
def verifying(engine: HostileEngine, tmp_path_factory: pytest.TempPathFactory
              ) -> Iterator[Sidecar]:
    yield from running_sidecar(
        engine, tmp_path_factory.mktemp("preflight"), "--down-grace", "0.5",
        "--preflight-direct-url", engine.url + "/v1/completions", "--preflight-timeout", "1.0")


@pytest.mark.e2e
def test_hostile_preflight_is_a_failed_check_never_a_stalled_cycle(
        engine: HostileEngine, verifying: Sidecar) -> None:
    engine.case = SANE
    verifying.cycles(2)
    _restoring(engine, verifying, PREFLIGHT_FAULTS["drip"][0])
    for name, (behaviour, reason) in PREFLIGHT_FAULTS.items():
        engine.case = Case(name, snapshot=json_body(sane_snapshot("g-restored-0002")),
                           preflight=behaviour)
        t0 = time.monotonic()
        # The probes run as the restore keeper's own task, beside the cycles: a probe of this
        # case goes out once the one before it has ended (its result is in the log by then),
        # so the first result logged after this case's request arrived is this case's.
        sent = verifying.cycles(1, until=lambda _, n=name: engine.count(n, "/v1/completions") >= 1)
        seen = len(_preflight_details(verifying.proc.log))
        status = verifying.cycles(
            1, until=lambda _, k=seen: len(_preflight_details(verifying.proc.log)) > k)
        details = _preflight_details(verifying.proc.log)
        assert details[seen].startswith(f"{reason}: "), details[seen:]
        assert status["restore"]["phase"] == "verifying", status["restore"]
        assert status["restore"]["window"]["preflight"].get("direct") is False, status["restore"]
        # The cycles went on while the probe ran (it takes at most --preflight-timeout, 1 s,
        # plus the keeper's 2 s grace).
        assert status["poll_cycles"] > sent["poll_cycles"] or reason != "timeout"
        assert time.monotonic() - t0 < 2 * (POLL_INTERVAL + 1.0 + 2.0) + 5
        verifying.peak_ok()
    # A sane answer passes the check and closes the window.
    engine.case = Case("restored_sane", snapshot=json_body(sane_snapshot("g-restored-0002")))
    status = verifying.cycles(2, until=lambda s: s["restore"]["phase"] == "serving")
    assert status["restore"]["checks"]["preflight_direct"] is True
    print(f"preflight faults: peak RSS {vm_hwm_mib(verifying.pid):.1f} MiB, slowest /metrics "
          f"{verifying.slowest_scrape * 1000:.0f} ms, slowest /healthz "
          f"{verifying.slowest_healthz * 1000:.0f} ms")
