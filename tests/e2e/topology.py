"""What the topology tests share (tests/e2e/test_ha_e2e.py, tests/e2e/test_sharded_e2e.py): the
shipped files of deploy/ha/ read as they are, with only the host names, paths and the 15 s
intervals replaced (`shipped`: every replacement must match, so a changed file fails loudly);
a two-node Alertmanager cluster (deploy/ha/alertmanager.flags) loading the production
deploy/alertmanager/alertmanager.yml, its receivers at a local webhook and every timer divided by
AM_SCALE; restore incidents played on simulated engines and real sidecars; and the count of every
notification that reached the webhook.
"""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.procs import ROOT, Proc, Stack, free_port, http_ok, need, wait_for
from tools.webhook import Post, WebhookReceiver

JOB = "helios-exporter"
HA = ROOT / "deploy" / "ha"
AM_DIR = ROOT / "deploy" / "alertmanager"
RULE_FILES = ("helios-alerts.yaml", "helios-recording.yaml")
# The only timing the tests change in the shipped files: 15 s scrapes and evaluations become 1 s,
# as in every e2e test here, and the sidecars' bounds are seconds (Incident.bound). The
# Alertmanagers run the production deploy/alertmanager/alertmanager.yml (not the test copy with
# 1 s timers): its receivers' URLs point at the local webhook and every timer of it and of
# alertmanager.flags (group_wait, group_interval, repeat_interval, resolve_timeout, the peer
# timeout) is divided by AM_SCALE, so that the peer timeout stays below the group interval as
# shipped (deploy/ha/alertmanager.flags says why it must; with 1 s group intervals and a 15 s peer
# timeout, a resolved page arrived again as firing).
AM_SCALE = 12
_AM_TIMER = re.compile(r"((?:group_wait|group_interval|repeat_interval|resolve_timeout): |"
                       r"--cluster\.peer-timeout=)(\d+)([smh])\b")
# The page a late window raises and resolves, and the notice that comes with its resolve.
PAGE = "HeliosRestoreBoundBreached"
NOTICE = "HeliosRestoreWindowClosed"
TIMEOUT = 40.0  # scrape, evaluation, group wait, a peer timeout (15 s) and delivery, loaded


def shipped(name: str, replace: dict[str, str]) -> str:
    """deploy/ha/`name` with each key of `replace` replaced (each must occur in the file)."""
    text = (HA / name).read_text(encoding="utf-8")
    for old, new in replace.items():
        assert old in text, f"deploy/ha/{name} no longer contains {old!r}"
        text = text.replace(old, new)
    return text


def flags(name: str, replace: dict[str, str]) -> list[str]:
    """The flags of deploy/ha/`name` (one per line, `#` comments), replaced as `shipped` does."""
    return [line.strip() for line in shipped(name, replace).splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def rules_dir(tmp: Path) -> Path:
    """A directory holding the shipped rule files, as /etc/.../helios/ does in deploy/ha."""
    d = tmp / "helios"
    d.mkdir(parents=True, exist_ok=True)
    for name in RULE_FILES:
        link = d / name
        if not link.exists():
            link.symlink_to(ROOT / "alerts" / name)
    return d


def write_targets(path: Path, ports: list[int]) -> None:
    """A file_sd file with one sidecar target per port (written whole, as Prometheus expects)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps([{"targets": [f"127.0.0.1:{p}" for p in ports]}]))
    tmp.rename(path)


# -- Alertmanager cluster ----------------------------------------------------------------------
PAGE_PATH = "/helios/page"  # alertmanager.yml's helios-page webhook, here at the local webhook
TICKET_PATH = "/helios/ticket"
PAGE_TEXT_PATH = "/hooks/helios-oncall"  # the same page as Slack text, rendered by helios.tmpl


def shipped_am(hook: WebhookReceiver) -> str:
    """deploy/alertmanager/alertmanager.yml with its receivers at `hook` and its template path
    absolute: the webhooks post to /helios/page and /helios/ticket, the Slack texts to
    /hooks/helios-oncall and /hooks/helios-tickets."""
    text = (AM_DIR / "alertmanager.yml").read_text(encoding="utf-8")
    for old, new in {"http://alert-bridge.example.internal:9095": hook.url,
                     "https://chat.example.internal": hook.url,
                     "  - helios.tmpl": f"  - {AM_DIR / 'helios.tmpl'}"}.items():
        assert old in text, f"alertmanager.yml no longer contains {old!r}"
        text = text.replace(old, new)
    return text


def scaled(text: str) -> str:
    """Every Alertmanager timer in `text` divided by AM_SCALE (in milliseconds)."""
    unit = {"s": 1000, "m": 60_000, "h": 3_600_000}
    return _AM_TIMER.sub(lambda m: f"{m[1]}{int(m[2]) * unit[m[3]] // AM_SCALE}ms", text)


@dataclass
class AmNode:
    name: str
    port: int
    cluster_port: int
    args: list[str]
    proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


class AlertmanagerCluster:
    """Two Alertmanagers with deploy/ha/alertmanager.flags, clustered on 127.0.0.1."""

    def __init__(self, stack: Stack, hook: WebhookReceiver) -> None:
        self.stack = stack
        config = stack.tmp / "alertmanager.yml"
        config.write_text(scaled(shipped_am(hook)))
        ports = [(free_port(), free_port()) for _ in range(2)]
        peers = {f"alertmanager-{i}:9094": f"127.0.0.1:{c}" for i, (_, c) in enumerate(ports)}
        self.nodes = []
        for i, (port, cport) in enumerate(ports):
            args = [scaled(a) for a in flags("alertmanager.flags", {
                "/etc/alertmanager/alertmanager.yml": str(config),
                "0.0.0.0:9094": f"127.0.0.1:{cport}", **peers})]
            self.nodes.append(AmNode(f"alertmanager-{i}", port, cport, [
                need("prometheus-alertmanager"), *args,
                f"--storage.path={stack.tmp / f'am-{i}'}",
                f"--web.listen-address=127.0.0.1:{port}"]))

    @property
    def hosts(self) -> dict[str, str]:
        """deploy/ha's Alertmanager addresses -> these."""
        return {f"alertmanager-{i}:9093": f"127.0.0.1:{n.port}" for i, n in enumerate(self.nodes)}

    def start(self, node: AmNode) -> None:
        node.proc = self.stack.start(node.name, node.args)
        wait_for(lambda: http_ok(node.url + "/-/ready"), 60, f"{node.name} ready", node.proc)

    def start_all(self) -> None:
        for node in self.nodes:
            self.start(node)
        wait_for(lambda: all(len(self.peers(n)) == 2 for n in self.nodes), 60,
                 "the Alertmanagers see each other")

    def peers(self, node: AmNode) -> list[dict[str, Any]]:
        peers: list[dict[str, Any]] = httpx.get(node.url + "/api/v2/status", timeout=3).json()[
            "cluster"]["peers"]
        return peers

    def first(self) -> AmNode:
        """The node that notifies first: position 0 of the sorted peer names (the other waits
        its position times --cluster.peer-timeout)."""
        names = {n.name: httpx.get(n.url + "/api/v2/status", timeout=3).json()["cluster"]["name"]
                 for n in self.nodes}
        first = min(names.values())
        return next(n for n in self.nodes if names[n.name] == first)

    def kill(self, node: AmNode) -> None:
        assert node.proc is not None
        node.proc.stop(signal.SIGKILL)

    def alerts(self, node: AmNode, alertname: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = httpx.get(
            node.url + "/api/v2/alerts", params={"filter": f'alertname="{alertname}"'},
            timeout=2).json()
        return found


# -- incidents ---------------------------------------------------------------------------------
@dataclass
class Incident:
    """A simulated engine and its sidecar (bounds in seconds), driven through a window that
    closes in time and then one that closes late, as the drill's engine team would."""

    stack: Stack
    key: str
    port: int = field(default_factory=free_port)
    engine: str = ""
    url: str = ""
    sidecar: Proc | None = None
    # Request cutoff 4 s, restore bound 10 s: a window closed within a few seconds is in time.
    bound: int = 10

    @property
    def instance(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> Incident:
        _, self.engine = self.stack.simulator("steady", "--rate", "1", "--seed", "5",
                                              name=f"engine-{self.key}")
        self.sidecar, self.url = self.stack.sidecar(
            self.engine, "--poll-interval", "0.5", "--down-grace", "1",
            "--request-cutoff", str(self.bound - 6), "--restore-bound", str(self.bound),
            port=self.port, name=f"sidecar-{self.key}", state_dir=self.stack.tmp / f"state-{self.key}")
        return self

    def admin(self, path: str, body: dict[str, Any] | None = None) -> None:
        httpx.post(f"{self.engine}/admin/{path}", json=body or {}, timeout=5).raise_for_status()

    def restore(self) -> dict[str, Any]:
        data: dict[str, Any] = httpx.get(f"{self.url}/status", timeout=3).json()["restore"]
        return data

    def wait(self, check: Callable[[dict[str, Any]], Any], what: str) -> dict[str, Any]:
        found: dict[str, Any] = wait_for(lambda: r if check(r := self.restore()) else None,
                                         TIMEOUT, f"{self.key}: {what}", self.sidecar, 0.1)
        return found

    def open_window(self, seen_drained: Callable[[], Any] | None = None) -> float:
        """Drain and stop the engine: the window opens; returns its start. Drained before it
        stops (no request lost, no check fails), and with `seen_drained`, stopped only once the
        rule engine has seen it drained too."""
        self.admin("admission", {"state": "draining"})
        start = float(self.wait(lambda r: r["window"], "window open")["window"]["start"])
        self.wait(lambda r: r["phase"] == "drained", "drained")
        if seen_drained is not None:
            wait_for(seen_drained, TIMEOUT, f"{self.key}: the rule engine sees it drained")
        self.admin("crash")
        return start

    def close_window(self, outcome: str) -> dict[str, Any]:
        before = self.restore()["last_window"]
        self.admin("restart", {"container": "same"})
        r = self.wait(lambda r: r["last_window"] and r["last_window"] != before, "window closed")
        last: dict[str, Any] = r["last_window"]
        assert last["outcome"] == outcome, last
        return last

    def in_time_window(self, seen_drained: Callable[[], Any]) -> dict[str, Any]:
        """A window that closes in time, once the rule engine has seen it open and drained."""
        self.open_window(seen_drained)
        return self.close_window("in_time")


# -- what reached the webhook ------------------------------------------------------------------
@dataclass
class Episode:
    """One alert (its labels) from a firing notification with a new startsAt to its resolve."""

    key: str
    starts_at: str
    firing: list[Post] = field(default_factory=list)
    resolved: list[Post] = field(default_factory=list)  # the resolve: one notification
    repeats: list[Post] = field(default_factory=list)  # the resolved page again, as context


def episodes(hook: WebhookReceiver, instance: str) -> dict[str, list[Episode]]:
    """The pages of `instance` that reached the webhook, as episodes per `alertname{labels}`, and
    the checks that hold in every topology. On every receiver (pages, tickets): no notification
    arrived twice (the same group with the same alerts in the same states: both Alertmanagers
    sent it). On the page receiver (send_resolved): no page was re-sent as new while it fired (a
    second startsAt), none fired again after its resolve, every resolve arrived in one
    notification (later ones of its group may repeat it beside what changed: Episode.repeats)."""
    out: dict[str, list[Episode]] = {}
    seen_posts: set[str] = set()
    for post in hook.posts():
        if post.path not in (PAGE_PATH, TICKET_PATH):
            continue  # the Slack texts: the same notifications, rendered
        mine = [a for a in post.alerts if a["labels"].get("instance") == instance]
        if not mine:
            continue
        sig = json.dumps([post.path, post.body.get("groupKey"),
                          sorted((a["fingerprint"], a["status"], a["startsAt"]) for a in post.alerts)])
        assert sig not in seen_posts, f"a notification arrived twice: {sig}"
        seen_posts.add(sig)
        if post.path != PAGE_PATH:
            continue
        for a in mine:
            labels = a["labels"]
            key = labels["alertname"] + json.dumps(
                {k: v for k, v in sorted(labels.items()) if k != "alertname"})
            eps = out.setdefault(key, [])
            current = eps[-1] if eps else None
            if a["status"] == "firing":
                if current is None or current.starts_at != a["startsAt"]:
                    assert current is None or current.resolved, (
                        f"{key} re-sent as new while it fired: {current.starts_at} then "
                        f"{a['startsAt']}")
                    eps.append(Episode(key, a["startsAt"], [post]))
                else:
                    assert not current.resolved, f"{key} fired again after its resolve"
                    current.firing.append(post)
            else:
                assert current is not None and current.starts_at == a["startsAt"], (
                    f"{key} resolved without having fired: {a}")
                if current.resolved:
                    # Context, not a second resolve: the group's next notification (another
                    # alert of it changed) carries the page as resolved again when the rule
                    # engine re-sent it since (vmalert every evaluation, Prometheus every
                    # minute, for 15 minutes). Never a notification of its own: a notification
                    # that arrived twice fails above.
                    current.repeats.append(post)
                else:
                    current.resolved.append(post)
    return out


def named(eps: dict[str, list[Episode]], alertname: str) -> list[Episode]:
    return [e for key, es in eps.items() if key.startswith(alertname + "{") for e in es]


def assert_late_window_paged_once(hook: WebhookReceiver, inc: Incident, *,
                                  resolved: bool = True) -> dict[str, list[Episode]]:
    """A late window's story at the webhook: the bound breach paged once (grouped per target,
    with the engine's instance) and resolved once, in a notification with the late notice; the
    notice fired once; nothing else paged (the in-time window before it pages nothing: its
    notice would be `outcome="in_time"`)."""
    eps = episodes(hook, inc.instance)
    pages = sorted(eps)
    assert sorted(k.split("{")[0] for k in pages) == [PAGE, NOTICE], pages
    (page,) = named(eps, PAGE)
    assert page.firing[0].body["groupLabels"] == {"job": JOB, "instance": inc.instance}
    (notice,) = named(eps, NOTICE)
    assert json.loads(notice.key.removeprefix(NOTICE))["outcome"] == "late"
    if resolved:
        (resolve,) = page.resolved
        assert any(a["labels"]["alertname"] == NOTICE and a["status"] == "firing"
                   for a in resolve.alerts), "the resolve came without its notice"
    # helios.tmpl names the engine from the labels every topology keeps (no replica, no shard).
    titles = [p.body["attachments"][0]["title"] for p in hook.posts() if p.path == PAGE_TEXT_PATH]
    want = f"[FIRING] Helios {JOB}/{inc.instance}: {PAGE}"
    assert want in titles, titles
    return eps


def wait_delivery(hook: WebhookReceiver, inc: Incident, alertname: str, status: str,
                  timeout: float = TIMEOUT) -> float:
    """When `alertname` of `inc` first reached the page receiver in `status`."""
    found = hook.wait_for(
        lambda: [d for d in hook.deliveries(alertname, status=status, instance=inc.instance)
                 if d.post.path == PAGE_PATH], timeout, f"{alertname} {status} for {inc.key}")
    return found[0].received_at


def quiet(seconds: float = 6.0) -> None:
    """An absence is only proved after the time a notification would take to arrive."""
    time.sleep(seconds)


def dump(hook: WebhookReceiver, path: Path) -> None:
    """Every POST, for a post-mortem next to the process logs."""
    path.write_text("".join(json.dumps({"path": p.path, "received_at": p.received_at,
                                        "body": p.body}) + "\n" for p in hook.posts()))
