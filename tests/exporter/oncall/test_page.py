"""The on-call page (`GET /`) as a pure function of the /status dict: what it shows, how, and that
it can neither break nor load anything."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.oncall import html, report
from exporter.oncall.model import Code, duration, since, until, utc
from lab.status import text
from tests.conftest import ROOT
from tests.exporter.oncall import samples
from tests.exporter.oncall.samples import INCUMBENT, NOW, RESTORED

BLOCKS = {"p", "li", "td", "th", "tr", "caption", "h1", "h2", "title", "section", "header"}


class Page(HTMLParser):
    """The parsed page: visible text, tags in order, attributes, script and style bodies."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.chunks: list[str] = []
        self.raw: dict[str, list[str]] = {"script": [], "style": []}
        self._in: str | None = None
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in self.raw:
            self._in = tag
        if tag in BLOCKS:
            self.chunks.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None
        if tag in BLOCKS:
            self.chunks.append(" ")

    def handle_data(self, data: str) -> None:
        if self._in:
            self.raw[self._in].append(data)
        else:
            self.chunks.append(data)

    @property
    def text(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.chunks))

    def named(self, tag: str) -> list[dict[str, str | None]]:
        return [attrs for t, attrs in self.tags if t == tag]


def page(status: dict[str, Any], now: float = NOW) -> Page:
    return Page(html.page(status, now))


# -- what it shows ------------------------------------------------------------------------------
def test_open_window_shows_both_deadlines_in_utc_with_the_time_left() -> None:
    status = samples.open_window(started_ago=180)
    window = status["restore"]["window"]
    shown = page(status).text
    cutoff, restore = utc(window["request_cutoff_deadline"]), utc(window["restore_deadline"])
    assert cutoff.endswith(" UTC") and cutoff in shown and restore in shown
    assert f"request cutoff {cutoff}, in 1 h 7 min 0 s" in shown
    assert f"restore deadline {restore}, in 1 h 27 min 0 s" in shown
    assert f"start {utc(window['start'])} (3 min 0 s ago)" in shown
    assert "RESTORE WINDOW OPEN phase down" in shown
    assert "docs/runbooks/HeliosRestoreWindowOpen.md" in shown


def test_a_passed_deadline_says_passed_and_how_long_ago() -> None:
    status = samples.open_window(started_ago=4200 + 185)
    status["restore"]["window"].update(incumbent_inflight_requests=2, last_inflight=2,
                                       incumbent_gone=False, lost_requests=2)
    shown = page(status).text
    assert "PASSED request cutoff" in shown and "passed 3 min 5 s ago" in shown
    assert "restore deadline" in shown and "in 16 min 55 s" in shown
    assert "Summary: FAILED" in shown
    assert "docs/runbooks/HeliosRequestCutoffBreached.md" in shown


def test_a_passed_cutoff_with_the_incumbent_drained_is_no_failure() -> None:
    # As HeliosRequestCutoffBreached: silent when the incumbent has nothing in flight (it
    # drained, or went away and its requests are counted lost).
    status = samples.open_window(started_ago=4200 + 185)
    shown = page(status).text
    assert "PASSED" not in shown and "Summary: FAILED" not in shown
    cutoff = utc(status["restore"]["window"]["request_cutoff_deadline"])
    assert (f"request cutoff {cutoff}, passed 3 min 5 s ago; the incumbent has no request in "
            "flight") in shown
    assert "HeliosRequestCutoffBreached" not in shown
    status["restore"]["window"]["seconds_to_restore_deadline"] = -5
    assert "Summary: FAILED" in page(status).text  # the restore deadline still is one


def test_a_recent_unplanned_restart_is_said_with_its_runbook() -> None:
    status = samples.base()
    status["restore"].update(unplanned_restarts=2, last_unplanned_restart=NOW - 125)
    shown = page(status).text
    assert (f"restarted the engine came back as a new incarnation outside a restore window at "
            f"{utc(NOW - 125)} (2 min 5 s ago)") in shown
    assert (f"unplanned restarts 2; the last at {utc(NOW - 125)} (2 min 5 s ago) (new "
            "incarnations no restore window saw coming)") in shown
    assert "docs/runbooks/HeliosEngineRestartedOutsideWindow.md" in shown
    assert "Summary: WARNING" in shown and "WINDOW OPEN" not in shown
    # An hour later it is history: shown under Engine, no longer a summary line or a step.
    status["restore"]["last_unplanned_restart"] = NOW - 3601
    shown = page(status).text
    assert "unplanned restarts 2; the last at" in shown and "restarted the engine" not in shown
    assert "HeliosEngineRestartedOutsideWindow" not in shown


def test_an_aborted_outage_is_said() -> None:
    status = samples.base()
    status["restore"]["outage_aborted"] = True
    status["engine_up"] = False
    shown = page(status).text
    assert ("aborted the window of this outage was aborted: none opens until the engine answers "
            "again") in shown
    assert "outage aborted yes (an abort discarded this outage's window" in shown
    status["restore"]["outage_aborted"] = False
    assert "outage aborted no" in page(status).text


def test_a_window_that_restored_nothing_says_no_check_was_judged() -> None:
    status = samples.wrong_container()
    last = status["restore"]["last_window"]
    last.update(restored=None, nothing_restored=True, lost_requests=0, incumbent=dict(RESTORED),
                reference=dict(INCUMBENT),
                reason="nothing restored: the incumbent's own incarnation (generation "
                       f"{RESTORED['generation']}) admitted again, so it never restarted; no "
                       "check was judged and the checks of an earlier window stand")
    shown = page(status).text
    assert (f"checks not judged nothing restored: the incumbent's own incarnation (generation "
            f"{RESTORED['generation']}) admitted again") in shown


def test_failed_container_check_shows_expected_and_found() -> None:
    shown = page(samples.wrong_container()).text
    assert (f"container FAILED {INCUMBENT['container_id']} {RESTORED['container_id']}"
            in shown)
    assert (f"FAILED post-restore check container expected {INCUMBENT['container_id']} found "
            f"{RESTORED['container_id']}") in shown
    assert "image ok" in shown and "Summary: FAILED" in shown
    end = samples.wrong_container()["restore"]["last_window"]["end"]
    assert f"restore completed {utc(end)} (seen by the sidecar)" in shown
    # The engines side by side: the changed container id is marked, the new generation is not.
    assert (f"container id {INCUMBENT['container_id']} {RESTORED['container_id']} differs"
            in shown)
    assert f"generation {INCUMBENT['generation']} {RESTORED['generation']} " in shown
    assert "docs/runbooks/HeliosRestoreCheckFailed.md" in shown


def test_sources_show_state_and_age_of_last_success() -> None:
    status = samples.base()
    status["sources"]["nvml"] = {"enabled": True, "up": False, "last_success": NOW - 125.5,
                                 "last_duration_seconds": 2.0, "last_reason": "hung",
                                 "last_error": "NVML call did not return within 2 s",
                                 "errors": {"hung": 3}}
    shown = page(status).text
    assert (f"nvml FAILED {utc(NOW - 125.5)} 2 min 5 s ago 2.000 s 3 hung NVML call did not "
            "return within 2 s") in shown
    assert "FAILED source nvml" in shown and "docs/runbooks/HeliosGpuLost.md" in shown
    assert f"host ok {utc(NOW - 1)} 1 s ago" in shown


def test_identity_and_generation() -> None:
    shown = page(samples.base()).text
    for key, value in INCUMBENT.items():
        assert f"{value}" in shown, key
    assert "Summary: ok" in shown and "Nothing to do" in shown


def test_pins_and_geometry_when_status_reports_them() -> None:
    status = samples.base()
    status["pins"] = [{"pin": "checkpoint", "expected": "qwen3-next-w4a16-r3",
                       "found": "qwen3-next-w4a16-r2", "ok": False},
                      {"pin": "ranks", "expected": 2, "found": 2, "ok": True},
                      {"pin": "power_limit", "expected": 300.0, "ok": None,
                       "found": {"GPU-7d2c": 300.0, "GPU-91aa": None}}]
    status["offload_geometry"] = {"consistent": False, "failed": ["resident_within_budget"],
                                  "rules": [
        {"rule": "resident_within_budget", "ok": False, "value": 9, "limit": 8,
         "detail": "resident.bytes 9 > budget_bytes 8"}]}
    shown = page(status).text
    assert "checkpoint FAILED qwen3-next-w4a16-r3 qwen3-next-w4a16-r2" in shown
    assert "ranks ok 2 2" in shown
    assert "power_limit unknown 300 GPU-7d2c: 300, GPU-91aa: unknown" in shown
    status["offload_geometry"] = None
    assert "offload geometry: the snapshot carries no offload figures" in page(status).text
    assert "resident_within_budget FAILED resident.bytes 9 > budget_bytes 8" in shown
    assert "FAILED pin checkpoint expected qwen3-next-w4a16-r3 found qwen3-next-w4a16-r2" in shown


@pytest.mark.parametrize("status", [{}, {"restore": None, "sources": None},
                                    {"restore": {"window": {}}, "sources": {"x": 1}},
                                    {"restore": {"window": {"start": "yesterday"}}}])
def test_missing_or_odd_sections_read_unknown(status: dict[str, Any]) -> None:
    shown = page(status).text
    assert "unknown" in shown
    assert "Helios restore status" in shown


# -- how: headings, tables, words, refresh ------------------------------------------------------
def test_structure_for_people_and_screen_readers() -> None:
    parsed = page(samples.wrong_container())
    tags = [t for t, _ in parsed.tags]
    assert tags.count("h1") == 1 and tags.count("h2") >= 8
    assert parsed.named("html")[0]["lang"] == "en"
    meta = {a.get("name") or a.get("http-equiv"): a.get("content") for a in parsed.named("meta")}
    assert meta["viewport"] == "width=device-width, initial-scale=1"
    assert meta["refresh"] == str(html.REFRESH_SECONDS)
    assert all(a.get("scope") in ("col", "row") for a in parsed.named("th"))
    assert tags.count("th") > tags.count("table")
    # Status words are text, not colour: each coloured element says its word.
    source = html.page(samples.wrong_container(), NOW)
    assert re.findall(r'class="w w-bad">([^<]*)<', source) == ["FAILED"] * 3


def test_times_are_machine_readable_too() -> None:
    times = page(samples.open_window()).named("time")
    assert times and all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", t["datetime"] or "")
                         for t in times)


# -- it loads nothing and escapes everything ----------------------------------------------------
def test_the_page_refers_to_nothing_outside_the_sidecar() -> None:
    source = html.page(samples.wrong_container(), NOW)
    parsed = Page(source)
    for tag, attrs in parsed.tags:
        for name, value in attrs.items():
            assert name not in ("src", "srcset", "action", "formaction", "poster"), tag
            if name == "href":
                assert value is not None
                assert value.startswith("#") or value == "status" or (
                    tag == "link" and value == "data:,"), value
    assert [t for t, _ in parsed.tags if t in ("img", "iframe", "object", "embed", "form")] == []
    assert "url(" not in source and "@import" not in source
    assert re.search(r"fetch\(|XMLHttpRequest|WebSocket|EventSource|import\(", source) is None
    assert parsed.raw["script"] == [html.SCRIPT] and parsed.raw["style"] == [html.STYLE]


def test_csp_allows_only_the_inline_style_and_script() -> None:
    assert "default-src 'none'" in html.CSP
    hashes = re.findall(r"'sha256-[A-Za-z0-9+/=]+'", html.CSP)
    assert len(hashes) == 2 and "unsafe-inline" not in html.CSP and "http" not in html.CSP


HOSTILE = '<script>alert(1)</script><img src=x onerror=alert(2)>"\'&'


def test_every_value_from_the_engine_is_escaped() -> None:
    status = samples.wrong_container()
    status["identity"]["package"] = HOSTILE
    status["engine_url"] = HOSTILE
    status["generation"] = HOSTILE
    status["sources"][HOSTILE] = {"enabled": True, "up": False, "last_error": HOSTILE}
    status["restore"]["failed_checks"][0]["found"] = HOSTILE
    status["restore"]["checks"][HOSTILE] = False
    status["restore"]["phase"] = HOSTILE
    source = html.page(status, NOW)
    parsed = Page(source)
    assert parsed.raw["script"] == [html.SCRIPT]
    assert parsed.named("img") == []
    assert HOSTILE in parsed.text  # shown as text, verbatim
    assert "<script>alert" not in source


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=12)
KEYS = ("generation", "identity", "engine_up", "restore", "sources", "pins", "offload_geometry",
        "bounds", "engine_url", "snapshot_dropped_fields", "poll_cycles")
RESTORE_KEYS = ("phase", "window", "checks", "failed_checks", "checks_window", "last_window",
                "admission", "state_write_errors", "last_verified_engine")


@settings(max_examples=150, deadline=None)
@given(top=st.dictionaries(st.sampled_from(KEYS), JSON),
       restore=st.dictionaries(st.sampled_from(RESTORE_KEYS), JSON),
       window=st.dictionaries(st.sampled_from(("start", "request_cutoff_deadline",
                                               "seconds_to_request_cutoff", "restore_deadline",
                                               "incumbent", "preflight", "start_exact")), JSON),
       now=st.floats(min_value=-1e12, max_value=1e12))
def test_any_status_renders_on_the_page_and_in_the_terminal(
        top: dict[str, Any], restore: dict[str, Any], window: dict[str, Any], now: float) -> None:
    status = {**top, "restore": {**restore, "window": window}}
    source = html.page(status, now)
    assert source.startswith("<!doctype html>") and Page(source).named("h1")
    assert text.render(report.build(status, now)).startswith("Helios restore status")


# -- the words ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("seconds", "said"), [
    (0, "0 s"), (59.9, "59 s"), (60, "1 min 0 s"), (723.4, "12 min 3 s"), (3600, "1 h 0 min 0 s"),
    (4199, "1 h 9 min 59 s"), (86400 * 2 + 3700, "2 d 1 h"), (-185, "3 min 5 s"),
    (float("nan"), "unknown")])
def test_durations(seconds: float, said: str) -> None:
    assert duration(seconds) == said


def test_until_since_utc() -> None:
    assert until(723.4) == "in 12 min 3 s"
    assert until(-180) == "passed 3 min 0 s ago"
    assert since(-3) == "0 s ago"
    assert utc(NOW) == "2026-11-30 00:53:20 UTC"
    assert utc(1e300) == "unknown"


def test_the_script_formats_time_like_the_server() -> None:
    # The countdown script repeats model.duration in JavaScript: same units, same words.
    for word in ('" d "', '" h "', '" min "', '" s"', '"in "', '"passed "', '" ago"'):
        assert word in html.SCRIPT, word


def test_every_runbook_the_view_names_exists() -> None:
    statuses = [samples.base(), samples.open_window(), samples.open_window(4200 + 5400 + 60),
                samples.wrong_container()]
    statuses[0]["pins"] = [{"pin": "ranks", "expected": 2, "found": 1, "ok": False}]
    statuses[0]["offload_geometry"] = {"rules": [{"rule": "lookups_accounted", "ok": False}]}
    statuses.append({**samples.base(), "engine_up": False})
    statuses[2]["restore"]["window"]["incumbent_inflight_requests"] = 2
    statuses[2]["sources"]["nvml"].update(enabled=True, up=False)
    named = set()
    for status in statuses:
        for section in report.build(status, NOW).sections:
            for block in section.blocks:
                for item in getattr(block, "items", ()):
                    named |= {p.text for p in item if isinstance(p, Code)
                              and p.text.startswith("docs/runbooks/")}
    assert len(named) == 8
    for path in named:
        assert path.endswith("/") or (ROOT / path).is_file(), path
    assert Path(ROOT / "docs/runbooks").is_dir()


def test_a_late_last_window_is_in_the_summary() -> None:
    status = samples.wrong_container()
    status["restore"]["last_window"]["outcome"] = "late"
    end = status["restore"]["last_window"]["end"]
    status["restore"]["last_window"]["evidence"]["not_before"] = end - 600
    shown = page(status).text
    assert f"restore completed after {utc(end - 600)} and by {utc(end)}" in shown
    assert (f"late the last restore window ended after its restore deadline, at {utc(end)}"
            in shown)


def test_deadlines_without_seconds_left_are_counted_from_now() -> None:
    # An older /status may give the deadlines only: the time left is counted from `now`.
    status = samples.open_window(started_ago=5400 + 60)
    for key in ("seconds_to_request_cutoff", "seconds_to_restore_deadline"):
        del status["restore"]["window"][key]
    shown = page(status).text
    assert "PASSED restore deadline" in shown and "passed 1 min 0 s ago" in shown
    assert "docs/runbooks/HeliosRestoreBoundBreached.md" in shown


def test_a_draining_window_says_what_is_in_flight_and_nothing_lost_yet() -> None:
    status = samples.open_window()
    status["restore"]["phase"] = "draining"
    status["restore"]["window"].update(incumbent_inflight_requests=3, incumbent_gone=False)
    shown = page(status).text
    assert "RESTORE WINDOW OPEN phase draining since" in shown
    assert "ago); 3 requests in flight" in shown
    assert "incumbent in-flight requests 3" in shown and "lost requests none so far" in shown
