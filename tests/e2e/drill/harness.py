"""What the drill's incidents share: one real Prometheus running the SHIPPED rule files, one real
Alertmanager with the shipped routing, inhibitions and templates (deploy/alertmanager/
alertmanager-test.yml: 1 s timers, every receiver posting to a local webhook, the page and ticket
receivers also as Slack text rendered by helios.tmpl), and per incident a simulated engine and a
sidecar scraped as their own target.

Every incident is its own target `cluster/instance`, with realistic names (`h1:19400`); pairs of
incidents share an instance name in different clusters, so the rules and the routing must keep
them apart (their joins are `on (cluster, job, instance)`, Alertmanager groups by them).
Prometheus evaluates every 1 s; the sidecars poll every 0.5 s.
"""

from __future__ import annotations

import json
import math
import re
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.procs import ROOT, Proc, Stack, free_port, query, wait_for
from tools.webhook import Delivery, Post, WebhookReceiver

JOB = "helios-exporter"
RULE_FILES = [ROOT / "alerts" / "helios-alerts.yaml", ROOT / "alerts" / "helios-recording.yaml"]
AM_DIR = ROOT / "deploy" / "alertmanager"
TOKEN = "drill-events-token-0123456789abcdef"
POLL = ("--poll-interval", "0.5", "--down-grace", "1")
# Generous: the drill shares two loaded cores with other suites; a wait returns as soon as its
# condition holds, so these only bound a failure.
PAGE_TIMEOUT = 30.0  # scrape (1 s) + evaluation (1 s) + group_wait (1 s) + delivery, loaded
STATUS_TIMEOUT = 30.0
# deploy/alertmanager: one group per target for the restore pages and their notices; else
# by severity.
RESTORE_GROUP = ("HeliosRequestCutoffBreached", "HeliosRestoreBoundBreached",
                 "HeliosRestoreCheckFailed", "HeliosRestoreWindowClosed",
                 "HeliosRestoreWindowForgotten")
RECEIVERS = {"critical": "helios-page", "warning": "helios-ticket", "info": "helios-null"}
QUIET = 6.0  # seconds after an event by which anything it causes has reached the webhook


@dataclass(frozen=True)
class Target:
    """Where an incident's sidecar is scraped, and the name every alert and text gives it."""

    key: str  # the incident
    cluster: str
    instance: str  # the `instance` label (set in the scrape config), not the address
    port: int  # where its sidecar listens

    @property
    def name(self) -> str:
        """The target as the annotations and helios.tmpl name it."""
        return f"{JOB}/{self.instance} in cluster {self.cluster}"

    @property
    def selector(self) -> str:
        return f'cluster="{self.cluster}",job="{JOB}",instance="{self.instance}"'


@dataclass(frozen=True)
class Text:
    """A Slack notification rendered by helios.tmpl (title and text), as it arrived."""

    receiver: str
    title: str
    text: str
    received_at: float

    def blocks(self) -> list[str]:
        """The text's blocks (FIRING / RESOLVED / NOTICE / ENDED), in order."""
        return [b.strip("\n") for b in re.split(r"\n(?=FIRING since|RESOLVED at|NOTICE: |ENDED: )",
                                                "\n" + self.text) if b.strip()]


TIME = r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(\.\d+)? \+0000 UTC"  # humanizeTimestamp


def parse_utc(text: str) -> float:
    """The first humanizeTimestamp time in `text`, as unix seconds."""
    m = re.search(TIME, text)
    assert m, f"no time in {text!r}"
    whole = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
    return whole + float(m.group(2) or 0)


def utc(ts: float) -> str:
    """The first 19 characters of a time as Prometheus's humanizeTimestamp and helios.tmpl render
    it (both go on with fractions or a zone): `2026-01-02 03:04:05`."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S")


def at(ts: float) -> str:
    """A regex for `ts` as humanizeTimestamp renders it (`2026-01-02 03:04:05.25 +0000 UTC`)."""
    return re.escape(utc(ts)) + r"(\.\d+)? \+0000 UTC"


def assert_truthful_resolves(text: Text) -> None:
    """What the on-call drill holds resolves to: they never say the window is still open, that requests
    will be cut, or a negative time left; and never repeat a firing description."""
    for block in text.blocks():
        if block.startswith("RESOLVED at"):
            assert "still open" not in block and "will be cut" not in block, block
            assert not re.search(r"(^|\s)-\d", block), f"a negative number: {block}"
            assert "As of " not in block, f"a firing description in a resolve: {block}"


def assert_time_left_never_negative(text: Text) -> None:
    for left in re.findall(r": (\S+) left \(at-risk margin", text.text):
        assert not left.startswith("-"), text.text


class Drill:
    """The shared Prometheus, Alertmanager and webhook, and the targets of the incidents."""

    def __init__(self, workdir: Path, targets: list[Target]) -> None:
        self.workdir = workdir
        self.stack = Stack(workdir / "shared")
        self.targets = {t.key: t for t in targets}
        self.hook = WebhookReceiver()
        self.prometheus = ""
        self.alertmanager = ""

    def start(self) -> None:
        self.hook.start()
        _, self.alertmanager = self.stack.alertmanager(
            (AM_DIR / "alertmanager-test.yml").read_text()
            .replace("__WEBHOOK_PORT__", str(self.hook.port))
            .replace("__TEMPLATE_DIR__", str(AM_DIR)))
        # One static config per target: its cluster, and its instance name (not the address).
        static = "".join(
            f"      - targets: ['127.0.0.1:{t.port}']\n"
            f"        labels: {json.dumps({'cluster': t.cluster, 'instance': t.instance})}\n"
            for t in self.targets.values())
        _, self.prometheus = self.stack.prometheus(
            [], rule_files=RULE_FILES, alertmanager=self.alertmanager.removeprefix("http://"),
            scrape_configs=f"scrape_configs:\n  - job_name: {JOB}\n    static_configs:\n{static}")

    def stop(self) -> None:
        self.stack.stop_all()
        self.hook.stop()
        # Every POST, for a post-mortem next to the process logs.
        (self.workdir / "webhook.jsonl").write_text("".join(
            json.dumps({"path": p.path, "received_at": p.received_at, "body": p.body}) + "\n"
            for p in self.hook.posts()))

    # -- reading what arrived ------------------------------------------------------------------
    def deliveries(self, target: Target, alertname: str | None = None,
                   status: str | None = None) -> list[Delivery]:
        """Webhook alerts of `target` (any receiver), in arrival order."""
        return [d for d in self.hook.deliveries(alertname, status=status)
                if d.labels.get("cluster") == target.cluster
                and d.labels.get("instance") == target.instance]

    def texts(self, target: Target) -> list[Text]:
        """Rendered notifications of `target` on the text receivers, in arrival order."""
        out = []
        for post in self.hook.posts():
            if not post.path.endswith("/text"):
                continue
            (attachment,) = post.body["attachments"]
            if f"Helios {target.name}:" in attachment["title"]:
                out.append(Text(post.path.strip("/").removesuffix("/text"), attachment["title"],
                                attachment["text"], post.received_at))
        return out

    def wait_delivery(self, target: Target, alertname: str, status: str,
                      timeout: float = PAGE_TIMEOUT) -> Delivery:
        found: list[Delivery] = wait_for(
            lambda: self.deliveries(target, alertname, status), timeout,
            f"{alertname} {status} for {target.name}; received: {self.hook.summary()}",
            interval=0.1)
        return found[0]

    def wait_text(self, target: Target, title: str, timeout: float = PAGE_TIMEOUT) -> Text:
        """The first rendered notification of `target` whose title starts with `title`."""
        found: list[Text] = wait_for(
            lambda: [t for t in self.texts(target) if t.title.startswith(title)], timeout,
            f"a notification titled {title!r}", interval=0.1)
        return found[0]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return query(self.prometheus, expr)

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def firing(self, target: Target, alertname: str) -> list[dict[str, Any]]:
        """Prometheus's own view (/api/v1/alerts): the alert firing now, with the annotations of
        its latest evaluation."""
        alerts = httpx.get(f"{self.prometheus}/api/v1/alerts", timeout=5).json()["data"]["alerts"]
        return [a for a in alerts if a["labels"].get("alertname") == alertname
                and a["labels"].get("cluster") == target.cluster
                and a["labels"].get("instance") == target.instance and a["state"] == "firing"]


def stretched(bounds: tuple[str, ...], seconds: float) -> tuple[str, ...]:
    """`bounds` with `--restore-bound` longer by `seconds` (whole seconds, rounded up)."""
    out = list(bounds)
    if seconds > 0 and "--restore-bound" in out:
        i = out.index("--restore-bound") + 1
        out[i] = str(int(out[i]) + math.ceil(seconds))
    return tuple(out)


@dataclass
class Incident:
    """One incident's engine and sidecar(s), driven the way an operator and the engine would."""

    drill: Drill
    target: Target
    bounds: tuple[str, ...]  # --request-cutoff / --restore-bound of this incident's sidecar
    seed: int
    stretch: int = 0  # --restore-bound plus this many times the engine's start (Plan.stretch)
    stack: Stack = field(init=False)
    engine: str = ""
    sidecar: Proc | None = None
    url: str = ""
    started: float = field(default_factory=time.time)
    ready: float = 0.0  # engine and sidecar up, scraped
    done: float = 0.0
    restarts: int = 0
    _ids: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.stack = Stack(self.drill.workdir / self.target.key)
        self.token_file = self.stack.tmp / "events-token"
        self.token_file.write_text(TOKEN + "\n")

    # -- processes -----------------------------------------------------------------------------
    def start(self) -> None:
        """The engine (steady traffic, 1 request/s) and the sidecar; returns once Prometheus has
        scraped the sidecar with no window open."""
        t0 = time.monotonic()
        _, self.engine = self.stack.simulator("steady", "--rate", "1", "--seed", str(self.seed),
                                              name="engine")
        self.bounds = stretched(self.bounds, self.stretch * (time.monotonic() - t0))
        self.start_sidecar()
        self.wait_prom(f"helios_restore_window_open{{{self.target.selector}}} == 0",
                       "Prometheus scraped the sidecar, no window open")

    def start_sidecar(self) -> None:
        name = "sidecar" if self.restarts == 0 else f"sidecar-{self.restarts}"
        self.restarts += 1
        self.sidecar, self.url = self.stack.sidecar(
            self.engine, *POLL, *self.bounds, "--events-token-file", str(self.token_file),
            port=self.target.port, state_dir=self.stack.tmp / "state", name=name)

    def kill_sidecar(self) -> None:
        """SIGKILL: no shutdown code runs (the state file is whatever the last poll wrote)."""
        assert self.sidecar is not None
        self.sidecar.stop(signal.SIGKILL)

    def stop(self) -> None:
        self.stack.stop_all()

    # -- the engine's side ---------------------------------------------------------------------
    def admin(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        resp = httpx.post(f"{self.engine}/admin/{path}", json=body or {}, timeout=5)
        resp.raise_for_status()
        data: dict[str, Any] = resp.json()
        return data

    def engine_state(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.engine}/admin/state", timeout=5).json()
        return data

    # -- the operator's side -------------------------------------------------------------------
    def event(self, kind: str, event_id: str | None = None) -> httpx.Response:
        """POST /restore/events as the runbooks send it (bearer token, a unique id)."""
        if event_id is None:
            with self._lock:
                self._ids += 1
                event_id = f"{self.target.key}-{kind}-{self._ids}"
        return httpx.post(f"{self.url}/restore/events", json={"id": event_id, "event": kind},
                          headers={"Authorization": f"Bearer {TOKEN}"}, timeout=5)

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.url}/status", timeout=3).json()
        return data

    def restore(self) -> dict[str, Any]:
        data: dict[str, Any] = self.status()["restore"]
        return data

    def metrics(self) -> str:
        return httpx.get(f"{self.url}/metrics", timeout=3).text

    def wait_restore(self, check: Callable[[dict[str, Any]], Any], what: str,
                     timeout: float = STATUS_TIMEOUT) -> dict[str, Any]:
        """/status `restore` once `check` holds for it."""
        found: dict[str, Any] = wait_for(lambda: r if check(r := self.restore()) else None,
                                         timeout, f"{self.target.key}: {what}", self.sidecar,
                                         interval=0.1)
        return found

    def wait_phase(self, phase: str) -> dict[str, Any]:
        return self.wait_restore(lambda r: r["phase"] == phase, f"phase {phase}")

    def wait_prom(self, expr: str, what: str, timeout: float = PAGE_TIMEOUT) -> list[Any]:
        found: list[Any] = wait_for(lambda: self.drill.query(expr), timeout,
                                    f"{self.target.key}: {what} ({expr})", interval=0.2)
        return found

    def wait_prom_alert(self, alertname: str, check: Callable[[dict[str, Any]], bool],
                        what: str) -> dict[str, Any]:
        """The alert as Prometheus evaluates it now (/api/v1/alerts), once `check` holds."""
        found: list[dict[str, Any]] = wait_for(
            lambda: [a for a in self.drill.firing(self.target, alertname) if check(a)],
            PAGE_TIMEOUT, f"{self.target.key}: {what}", interval=0.2)
        return found[0]

    # -- what reached people -------------------------------------------------------------------
    def deliveries(self, alertname: str | None = None, status: str | None = None) -> list[Delivery]:
        return self.drill.deliveries(self.target, alertname, status)

    def wait_delivery(self, alertname: str, status: str, due: float | None = None) -> Delivery:
        """The first delivery of `alertname` in `status`; an alert `due` at a deadline (epoch
        seconds) is waited for until then and PAGE_TIMEOUT more, however loaded the machine."""
        timeout = PAGE_TIMEOUT + max(0.0, (due or 0.0) - time.time())
        return self.drill.wait_delivery(self.target, alertname, status, timeout)

    def texts(self) -> list[Text]:
        return self.drill.texts(self.target)

    def wait_text(self, title: str) -> Text:
        return self.drill.wait_text(self.target, title)

    def posts(self) -> list[Post]:
        """Webhook POSTs carrying an alert of this target."""
        seen: list[Post] = []
        for d in self.deliveries():
            if not any(p is d.post for p in seen):
                seen.append(d.post)
        return seen

    def assert_payloads(self) -> None:
        """Every webhook POST of this target: routed by severity (the restore pages and their
        notices together on helios-page), grouped per target, nothing of another target in it,
        every alert with its runbook."""
        t = self.target
        for post in self.posts():
            body = post.body
            assert body["version"] == "4" and body["receiver"] == post.receiver, body
            names = {a["labels"]["alertname"] for a in post.alerts}
            if post.receiver == "helios-page" and names & set(RESTORE_GROUP):
                assert names <= set(RESTORE_GROUP), names
                assert body["groupLabels"] == {"cluster": t.cluster, "job": JOB,
                                               "instance": t.instance}, body["groupLabels"]
            for a in post.alerts:
                labels = a["labels"]
                assert (labels["cluster"], labels["job"], labels["instance"]) == (
                    t.cluster, JOB, t.instance), labels
                want = ("helios-page" if labels["alertname"] in RESTORE_GROUP
                        else RECEIVERS[labels["severity"]])
                assert post.receiver == want, (post.receiver, labels)
                assert a["annotations"]["runbook_url"].endswith(f"/{labels['alertname']}.md")
                assert a["annotations"]["summary"] and a["annotations"]["description"]

    def quiet_until(self, moment: float) -> None:
        """Wait until `moment` plus what a notification caused then would need to arrive
        (scrape, evaluation, group wait, delivery, with margin): an absence is only proved after
        the time it would have taken."""
        time.sleep(max(0.0, moment + QUIET - time.time()))


def free_ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)
