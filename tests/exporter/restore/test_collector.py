"""RestoreCollector: the exact series exported for open, closed and aborted windows."""

from __future__ import annotations

from collections import Counter

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics

from exporter.collectors.restore import RestoreCollector
from exporter.restore.keeper import RestoreView
from exporter.restore.window import CHECKS, PHASES, Bounds, RestoreState
from tests.exporter.restore.restore_helpers import event, fail, final, poll, restart
from tools.harness import families

BOUNDS = Bounds(request_cutoff=4200.0, restore_bound=5400.0, down_grace=60.0)
T0 = 1764389520.125


def registry_for(status: RestoreView) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(RestoreCollector(lambda: status, BOUNDS))
    return reg


def series(reg: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in reg.collect() for s in fam.samples}


def names(reg: CollectorRegistry) -> set[str]:
    return {name for name, _ in series(reg)}


def phase_of(reg: CollectorRegistry) -> str:
    hot = [p for p in PHASES if reg.get_sample_value("helios_restore_phase", {"phase": p}) == 1]
    cold = [p for p in PHASES if reg.get_sample_value("helios_restore_phase", {"phase": p}) == 0]
    assert len(hot) == 1 and len(cold) == len(PHASES) - 1
    return hot[0]


def opened() -> RestoreState:
    return final([poll(T0 - 30, inflight=3), poll(T0, admission="draining", inflight=2)], BOUNDS)


def closed(**kw: object) -> RestoreState:
    return final([poll(T0 - 30, inflight=3), poll(T0, admission="closed", inflight=0),
                  fail(T0 + 100), poll(T0 + 600, generation="g2", **kw)], BOUNDS)  # type: ignore[arg-type]


def test_a_held_state_file_reports_the_window_unknown_never_closed() -> None:
    """While the file on disk cannot be read, what it holds is unknown: the window series are
    absent (Prometheus's memory keeps the last window seen and its deadline pages), never 0."""
    seen = RestoreView(state=closed(), state_unknown=True, read_errors=1)
    reg = registry_for(seen)
    assert reg.get_sample_value("helios_restore_window_unknown") == 1
    assert names(reg) == {"helios_restore_window_unknown",
                          "helios_restore_state_write_errors_total",
                          "helios_restore_state_corrupt_total",
                          "helios_restore_state_read_errors_total", "helios_restore_events_total"}
    known = registry_for(RestoreView(state=opened()))
    assert known.get_sample_value("helios_restore_window_unknown") == 0
    assert known.get_sample_value("helios_restore_window_open") == 1


def test_initial_state() -> None:
    reg = registry_for(RestoreView())
    assert reg.get_sample_value("helios_restore_window_open") == 0
    assert phase_of(reg) == "serving"
    assert reg.get_sample_value("helios_restore_window_unknown") == 0
    assert names(reg) == {"helios_restore_window_open", "helios_restore_window_unknown",
                          "helios_restore_phase",
                          "helios_engine_unplanned_restarts_total",
                          "helios_restore_state_write_errors_total",
                          "helios_restore_state_corrupt_total",
                          "helios_restore_state_read_errors_total", "helios_restore_events_total"}
    assert reg.get_sample_value("helios_restore_state_write_errors_total") == 0
    assert reg.get_sample_value("helios_engine_unplanned_restarts_total") == 0
    # every event x result at 0 from the start, so that increase() sees the first one
    events = {dict(k[1])["event"] + "/" + dict(k[1])["result"]: v for k, v in series(reg).items()
              if k[0] == "helios_restore_events_total"}
    assert events == {f"{e}/{r}": 0.0 for e in ("drain_started", "restore_started",
                                                "window_closed", "abort")
                      for r in ("accepted", "duplicate", "refused", "unavailable")}


def test_open_window_exports_start_and_deadlines() -> None:
    reg = registry_for(RestoreView(state=opened()))
    get = reg.get_sample_value
    assert get("helios_restore_window_open") == 1
    assert get("helios_restore_window_start_timestamp_seconds") == T0
    assert get("helios_restore_deadline_timestamp_seconds", {"bound": "request_cutoff"}) == T0 + 4200
    assert get("helios_restore_deadline_timestamp_seconds", {"bound": "restore"}) == T0 + 5400
    assert get("helios_restore_window_cause", {"cause": "drain"}) == 1
    assert get("helios_restore_window_cause", {"cause": "event"}) == 0
    assert phase_of(reg) == "draining"
    assert not any(n.startswith("helios_restore_check_ok") for n in names(reg))
    assert not any(n.startswith("helios_restore_last_window") for n in names(reg))
    deadlines = {k for k in series(reg) if k[0] == "helios_restore_deadline_timestamp_seconds"}
    assert len(deadlines) == 2


def test_closed_window_exports_checks_not_deadlines() -> None:
    state = closed()
    reg = registry_for(RestoreView(state=state))
    get = reg.get_sample_value
    assert get("helios_restore_window_open") == 0
    assert get("helios_restore_window_start_timestamp_seconds") is None
    for bound in ("request_cutoff", "restore"):
        assert get("helios_restore_deadline_timestamp_seconds", {"bound": bound}) is None
    checks = {dict(k[1])["check"]: v for k, v in series(reg).items()
              if k[0] == "helios_restore_check_ok"}
    assert checks == {"image": 1.0, "container": 1.0, "fresh_generation": 1.0,
                      "drained_admission": 1.0}
    assert get("helios_restore_last_window_duration_seconds") == 600
    assert get("helios_restore_last_window_outcome", {"outcome": "in_time"}) == 1
    assert get("helios_restore_last_window_outcome", {"outcome": "late"}) == 0
    assert get("helios_restore_last_window_outcome", {"outcome": "aborted"}) == 0
    assert get("helios_restore_last_window_outcome", {"outcome": "unobserved"}) == 0
    assert get("helios_restore_last_window_start_timestamp_seconds") == T0
    assert get("helios_restore_last_window_end_timestamp_seconds") == T0 + 600
    assert get("helios_restore_last_window_lost_requests") == 0
    assert get("helios_restore_incumbent_inflight_requests") is None  # only while open
    assert phase_of(reg) == "serving"


def test_failed_and_unknown_checks() -> None:
    reg = registry_for(RestoreView(state=closed(container="c2", image=None)))
    get = reg.get_sample_value
    assert get("helios_restore_check_ok", {"check": "container"}) == 0
    assert get("helios_restore_check_ok", {"check": "image"}) is None  # unknown: absent, not 0
    for check in ("preflight_direct", "preflight_routed"):
        assert get("helios_restore_check_ok", {"check": check}) is None


def test_checks_stay_while_the_next_window_is_open_and_after_an_abort() -> None:
    first = closed(container="c2")
    second = final([poll(T0 + 9000, generation="g2", admission="draining", inflight=1,
                         container="c2")], BOUNDS, state=first)
    reg = registry_for(RestoreView(state=second))
    get = reg.get_sample_value
    assert get("helios_restore_window_open") == 1
    assert get("helios_restore_check_ok", {"check": "container"}) == 0  # still paging
    # the previous window is still the last one that ended
    assert get("helios_restore_last_window_duration_seconds") == 600
    aborted = final([event(T0 + 9100, "abort")], BOUNDS, state=second)
    reg = registry_for(RestoreView(state=aborted))
    assert reg.get_sample_value("helios_restore_check_ok", {"check": "container"}) == 0
    assert reg.get_sample_value("helios_restore_last_window_outcome",
                                {"outcome": "aborted"}) == 1


def test_checks_replaced_when_the_next_window_closes() -> None:
    first = closed(container="c2")
    redo = final([poll(T0 + 9000, generation="g2", admission="closed", inflight=0,
                       container="c2"), fail(T0 + 9010), poll(T0 + 9100, generation="g3")],
                 BOUNDS, state=first)
    reg = registry_for(RestoreView(state=redo))
    assert reg.get_sample_value("helios_restore_check_ok", {"check": "container"}) == 1


def test_incumbent_inflight_while_open_and_zero_once_gone() -> None:
    reg = registry_for(RestoreView(state=opened()))
    assert reg.get_sample_value("helios_restore_incumbent_inflight_requests") == 2
    blip = final([fail(T0 + 10)], BOUNDS, state=opened())  # within the down grace (60 s)
    reg = registry_for(RestoreView(state=blip))
    assert reg.get_sample_value("helios_restore_incumbent_inflight_requests") == 2
    gone = final([fail(T0 + 10), fail(T0 + 71)], BOUNDS, state=opened())
    back = final([poll(T0 + 80, generation="g2", admission="closed", inflight=5)], BOUNDS,
                 state=gone)
    replaced = final([poll(T0 + 20, generation="g2", admission="closed", inflight=5)], BOUNDS,
                     state=blip)
    for state in (gone, back, replaced):
        reg = registry_for(RestoreView(state=state))
        assert reg.get_sample_value("helios_restore_incumbent_inflight_requests") == 0
    unknown = final([poll(T0, admission="draining", inflight=None)], BOUNDS)
    reg = registry_for(RestoreView(state=unknown))
    assert reg.get_sample_value("helios_restore_window_open") == 1
    assert reg.get_sample_value("helios_restore_incumbent_inflight_requests") is None


def test_restore_nobody_watched() -> None:
    state = final([poll(T0 + 5000, generation="g2", container="c2", started_at=T0 + 4000)],
                  BOUNDS, state=restart(final([poll(T0)], BOUNDS)))
    reg = registry_for(RestoreView(state=state))
    get = reg.get_sample_value
    assert get("helios_restore_last_window_outcome", {"outcome": "unobserved"}) == 1
    assert get("helios_restore_last_window_end_timestamp_seconds") == T0 + 5000
    for absent in ("helios_restore_last_window_start_timestamp_seconds",
                   "helios_restore_last_window_duration_seconds",
                   "helios_restore_last_window_lost_requests"):
        assert get(absent) is None, absent
    assert get("helios_restore_check_ok", {"check": "container"}) == 0
    assert get("helios_restore_check_ok", {"check": "drained_admission"}) is None


def test_unplanned_restarts_counter() -> None:
    state = final([poll(T0), poll(T0 + 5, generation="g2"), poll(T0 + 10, generation="g3")],
                  BOUNDS)
    reg = registry_for(RestoreView(state=state))
    assert reg.get_sample_value("helios_engine_unplanned_restarts_total") == 2


def test_aborted_window_exports_no_checks_of_its_own() -> None:
    state = final([event(T0 + 1, "abort")], BOUNDS, state=opened())
    reg = registry_for(RestoreView(state=state))
    assert reg.get_sample_value("helios_restore_window_open") == 0
    assert not any(n.startswith("helios_restore_check_ok") for n in names(reg))
    assert reg.get_sample_value("helios_restore_last_window_outcome", {"outcome": "aborted"}) == 1
    assert reg.get_sample_value("helios_restore_last_window_duration_seconds") == 1


def test_checks_with_unknown_names_are_not_exported() -> None:
    state = RestoreState(checks={"image": False, "bogus": True})
    reg = registry_for(RestoreView(state=state))
    checks = {k for k in series(reg) if k[0] == "helios_restore_check_ok"}
    assert checks == {("helios_restore_check_ok", (("check", "image"),))}
    assert set(CHECKS) >= {"image", "container", "fresh_generation", "drained_admission",
                           "preflight_direct", "preflight_routed"}


def test_counters() -> None:
    status = RestoreView(state=opened(), write_errors=3, corrupt_files=1,
                           events=Counter({("drain_started", "accepted"): 2,
                                           ("abort", "duplicate"): 1}))
    reg = registry_for(status)
    get = reg.get_sample_value
    assert get("helios_restore_state_write_errors_total") == 3
    assert get("helios_restore_state_corrupt_total") == 1
    assert get("helios_restore_events_total", {"event": "drain_started", "result": "accepted"}) == 2
    assert get("helios_restore_events_total", {"event": "abort", "result": "duplicate"}) == 1


def test_phases_one_hot() -> None:
    for state, phase in [
        (opened(), "draining"),
        (final([poll(T0, admission="closed", inflight=0)], BOUNDS), "drained"),
        (final([poll(T0 - 120), fail(T0), fail(T0 + 61)], BOUNDS), "down"),
        (final([poll(T0 - 120), fail(T0), fail(T0 + 61), event(T0 + 62, "restore_started")],
               BOUNDS), "restoring"),
    ]:
        assert phase_of(registry_for(RestoreView(state=state))) == phase


def test_text_and_openmetrics_exposition_parse() -> None:
    reg = registry_for(RestoreView(state=closed(), events=Counter({("abort", "accepted"): 1})))
    text = generate_latest(reg).decode()
    fams = families(text)
    assert fams["helios_restore_check_ok"].type == "gauge"
    assert fams["helios_restore_events"].type == "counter"
    om = openmetrics.generate_latest(reg).decode()  # type: ignore[no-untyped-call]
    assert om.endswith("# EOF\n")
    assert 'helios_restore_events_total{event="abort",result="accepted"} 1.0' in om
    open_text = generate_latest(registry_for(RestoreView(state=opened()))).decode()
    parsed = {s.name: s.value for f in families(open_text).values() for s in f.samples
              if not s.labels}
    assert parsed["helios_restore_window_start_timestamp_seconds"] == T0  # no precision lost


def test_inflight_survives_a_restart_mid_window_before_the_engine_answers() -> None:
    from exporter.collectors.offload import OffloadCollector
    from exporter.cycle.derive import EnginePicture
    from exporter.restore.window import Engine, Window

    window = Window(start=100.0, cause="drain", incumbent=Engine("g-old", "sha256:a", "c1"),
                    last_inflight=3, seen_not_open=True)
    state = RestoreState(phase="down", window=window)
    reg = CollectorRegistry()
    reg.register(OffloadCollector(EnginePicture, lambda: state))
    assert reg.get_sample_value("helios_engine_inflight_requests", {"generation": "g-old"}) == 3
    assert reg.get_sample_value("helios_engine_up") is None  # not polled yet: unknown
    reg = CollectorRegistry()
    reg.register(OffloadCollector(lambda: EnginePicture(polled=True), lambda: state))
    assert reg.get_sample_value("helios_engine_inflight_requests", {"generation": "g-old"}) == 3
    assert reg.get_sample_value("helios_engine_up") == 0


@pytest.mark.e2e
def test_promtool_accepts_every_restore_series() -> None:
    from tests.helpers import promtool_check_metrics

    # a closed window with a failed check, a later window open with the incumbent's in-flight
    state = final([poll(T0 + 9000, generation="g2", admission="draining", inflight=1,
                        container="c2")], BOUNDS, state=closed(container="c2"))
    reg = registry_for(RestoreView(state=state, events=Counter({("abort", "refused"): 1})))
    text = generate_latest(reg)
    for name in ("helios_restore_incumbent_inflight_requests",
                 "helios_restore_last_window_end_timestamp_seconds",
                 "helios_restore_last_window_lost_requests", "helios_restore_check_ok"):
        assert name.encode() in text
    promtool_check_metrics(text)


def test_last_window_restored_says_whether_the_checks_were_judged() -> None:
    judged = closed(container="c2")
    nothing = final([fail(T0 + 1000), fail(T0 + 1061), poll(T0 + 1100, generation="g2",
                                                            container="c2")], BOUNDS, state=judged)
    aborted = final([poll(T0 + 1200, generation="g2", container="c2", admission="draining",
                          inflight=0), event(T0 + 1210, "abort")], BOUNDS, state=judged)
    for state, restored in ((judged, 1), (nothing, 0), (aborted, 0)):
        reg = registry_for(RestoreView(state=state))
        assert reg.get_sample_value("helios_restore_last_window_restored") == restored
        # The failed check of the judged restore stays exported (and paging) throughout.
        assert reg.get_sample_value("helios_restore_check_ok", {"check": "container"}) == 0
    assert registry_for(RestoreView()).get_sample_value(
        "helios_restore_last_window_restored") is None
