"""Breach-to-webhook latency of HeliosRestoreBoundBreached, end to end on 127.0.0.1.

    .venv/bin/python bench/alert_latency.py                      # 3 repetitions, markdown table
    .venv/bin/python bench/alert_latency.py --reps 5 --json out.json

The setup of tests/e2e/test_alerts_e2e.py: the simulated engine's `outage` scenario, the sidecar
with a compressed restore bound (shorter than the outage), a real Prometheus loading the shipped
rule files (alerts/helios-alerts.yaml, alerts/helios-recording.yaml) with 1 s scrape and
evaluation, and a real Alertmanager with deploy/alertmanager/alertmanager-test.yml posting to a
webhook receiver in this process. Prometheus, Alertmanager and the webhook are shared; every
repetition gets a fresh engine + sidecar (a new `instance`, so a new Alertmanager group).

Measured per repetition:

- deadline: the sidecar's `helios_restore_deadline_timestamp_seconds{bound="restore"}` (wall
  clock; the value the rule compares with `time()`);
- breach -> webhook: arrival of the firing HeliosRestoreBoundBreached POST minus the deadline;
  split into deadline -> rule active (the alert's `startsAt`, the evaluation that first saw it)
  and rule active -> webhook (Prometheus notifier, Alertmanager group_wait, the POST);
- close -> resolved: the window's close (sidecar `/status` last_window.end) to the resolved POST.

The floor printed beside it is what any Prometheus + Alertmanager setup adds at most before the
first notification: evaluation interval + the alert's `for:` + the route's `group_wait`, read from
the Prometheus config written here, the rule file and the Alertmanager config actually used.
Every process started is stopped at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from exporter import durations  # noqa: E402
from tools.harness import Stack, free_port, need, query  # noqa: E402
from tools.harness import wait_until as wait_for  # noqa: E402
from tools.webhook import WebhookReceiver  # noqa: E402

ALERT = "HeliosRestoreBoundBreached"
JOB = "helios-exporter"
RULE_FILES = [ROOT / "alerts" / "helios-alerts.yaml", ROOT / "alerts" / "helios-recording.yaml"]
AM_TEMPLATE = ROOT / "deploy" / "alertmanager" / "alertmanager-test.yml"
EVAL_INTERVAL = "1s"

def parse_duration(text: str | None) -> float:
    """A rule's or Alertmanager's duration in seconds; None (no `for:`) is 0."""
    return 0.0 if text is None else durations.seconds(str(text).strip())


def rule_of(alert: str) -> dict[str, Any]:
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                if rule.get("alert") == alert:
                    return dict(rule)
    raise SystemExit(f"{alert} not in {[str(p) for p in RULE_FILES]}")


def _matches(matcher: str, labels: dict[str, str]) -> bool:
    m = re.fullmatch(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"?(.*?)"?\s*', matcher)
    if m is None:
        raise ValueError(f"cannot read matcher {matcher!r}")
    name, op, value = m.groups()
    have = labels.get(name, "")
    return {"=": have == value, "!=": have != value,
            "=~": re.fullmatch(value, have) is not None,
            "!~": re.fullmatch(value, have) is None}[op]


def _route_matches(route: dict[str, Any], labels: dict[str, str]) -> bool:
    matchers = list(route.get("matchers", []))
    matchers += [f'{k}="{v}"' for k, v in route.get("match", {}).items()]
    matchers += [f'{k}=~"{v}"' for k, v in route.get("match_re", {}).items()]
    return all(_matches(m, labels) for m in matchers)


def route_timers(config: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """Receiver and timers of the route an alert with these labels takes (first match, depth
    first, `continue` ignored: the first match is the one that notifies first); children
    inherit unset timers from their parent, the root from Alertmanager's defaults."""
    node = config["route"]
    out = {"receiver": node.get("receiver"), "group_wait": node.get("group_wait", "30s"),
           "group_interval": node.get("group_interval", "5m"),
           "repeat_interval": node.get("repeat_interval", "4h")}
    while True:
        for child in node.get("routes", []):
            if _route_matches(child, labels):
                node = child
                out = {key: child.get(key, value) for key, value in out.items()}
                break
        else:
            return out


def version(binary: str) -> str:
    done = subprocess.run([need(binary), "--version"], capture_output=True, text=True,
                          check=False)
    text = (done.stdout or done.stderr).strip()
    return text.splitlines()[0] if text else "?"


def sidecar_metric(url: str, prefix: str) -> float | None:
    for line in httpx.get(url + "/metrics", timeout=3).text.splitlines():
        if line.startswith(prefix + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def iso_to_unix(text: str) -> float:
    # Alertmanager writes RFC 3339 with up to nanoseconds; datetime reads microseconds.
    m = re.fullmatch(r"(.*?T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", text)
    if m is None:
        raise ValueError(f"not a timestamp: {text!r}")
    base, frac, tz = m.groups()
    tz = "+00:00" if tz == "Z" else tz
    return datetime.fromisoformat(base + tz).timestamp() + float("0." + (frac or "0"))


def one_rep(stack: Stack, hook: WebhookReceiver, prom: str, port: int, rep: int,
            args: argparse.Namespace) -> dict[str, Any]:
    timeline = ("--outage-after", str(args.serve_seconds), "--drain-seconds", "1",
                "--closed-seconds", "1", "--down-seconds", str(args.down_seconds),
                "--rate", "2", "--seed", str(100 + rep))
    engine, engine_url = stack.simulator("outage", *timeline)
    sidecar, url = stack.sidecar(engine_url, "--poll-interval", "0.3", "--down-grace", "1",
                                 "--request-cutoff", str(args.restore_bound),
                                 "--restore-bound", str(args.restore_bound), port=port,
                                 state_dir=stack.tmp / f"state-{rep}", name=f"sidecar-{rep}")
    instance = f"127.0.0.1:{port}"
    try:
        window = wait_for(lambda: httpx.get(url + "/status", timeout=3).json()["restore"]["window"],
                          args.serve_seconds + 30, "window open", sidecar, interval=0.1)
        deadline = sidecar_metric(url, 'helios_restore_deadline_timestamp_seconds{bound="restore"}')
        assert deadline is not None
        assert abs(deadline - window["restore_deadline"]) < 1e-3
        # The value Prometheus compares with time() is the same number.
        prom_deadline = wait_for(lambda: query(prom, "last_over_time(helios_restore_deadline_"
                                               f'timestamp_seconds{{bound="restore",instance='
                                               f'"{instance}"}}[1h])'), 10, "deadline scraped")
        assert abs(float(prom_deadline[0]["value"][1]) - deadline) < 1e-3

        firing = hook.wait_for(lambda: hook.deliveries(ALERT, status="firing", instance=instance),
                               args.restore_bound + args.down_seconds + 30, f"{ALERT} firing")[0]
        starts_at = iso_to_unix(firing.alert["startsAt"])
        closed = wait_for(lambda: httpx.get(url + "/status", timeout=3).json()["restore"]
                          ["last_window"], args.down_seconds + 30, "window closed", sidecar,
                          interval=0.1)
        resolved = hook.wait_for(
            lambda: hook.deliveries(ALERT, status="resolved", instance=instance), 30,
            f"{ALERT} resolved")[0]
    finally:
        sidecar.stop()
        engine.stop()
    return {
        "rep": rep, "instance": instance, "receiver": firing.post.receiver,
        "window_start": window["start"], "restore_deadline": deadline,
        "rule_active_at": starts_at, "webhook_firing_at": firing.received_at,
        "window_closed_at": closed["end"], "webhook_resolved_at": resolved.received_at,
        "deadline_to_active_s": starts_at - deadline,
        "active_to_webhook_s": firing.received_at - starts_at,
        "breach_to_webhook_s": firing.received_at - deadline,
        "close_to_resolved_s": resolved.received_at - closed["end"],
    }


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    rule = rule_of(ALERT)
    am_text = AM_TEMPLATE.read_text()
    labels = {"alertname": ALERT, "job": JOB, "instance": "127.0.0.1:0", **rule.get("labels", {})}
    stack = Stack(tmp)
    hook = WebhookReceiver().start()
    runs: list[dict[str, Any]] = []
    try:
        am_config = am_text.replace("__WEBHOOK_PORT__", str(hook.port)).replace(
            "__TEMPLATE_DIR__", str(AM_TEMPLATE.parent))
        timers = route_timers(yaml.safe_load(am_config), labels)
        _, am = stack.alertmanager(am_config)
        ports = [free_port() for _ in range(args.reps)]
        _, prom = stack.prometheus([f"127.0.0.1:{p}" for p in ports], rule_files=RULE_FILES,
                                   alertmanager=am.removeprefix("http://"), interval=EVAL_INTERVAL)
        for rep, port in enumerate(ports, 1):
            result = one_rep(stack, hook, prom, port, rep, args)
            print(f"rep {rep}: breach -> webhook {result['breach_to_webhook_s']:.3f} s",
                  file=sys.stderr)
            runs.append(result)
    finally:
        stack.stop_all()
        hook.stop()
    floor = {"evaluation_interval_s": parse_duration(EVAL_INTERVAL),
             "for_s": parse_duration(rule.get("for")),
             "group_wait_s": parse_duration(timers["group_wait"])}
    floor["total_s"] = sum(floor.values())
    lat = [r["breach_to_webhook_s"] for r in runs]
    return {
        "benchmark": "alert_latency", "alert": ALERT,
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"nproc": os.cpu_count(), "loadavg": os.getloadavg(),
                    "python": sys.version.split()[0]},
        "setup": {"prometheus": version("prometheus"),
                  "alertmanager": version("prometheus-alertmanager"),
                  "scrape_interval": EVAL_INTERVAL, "evaluation_interval": EVAL_INTERVAL,
                  "rule_for": rule.get("for", "0s"), "route": timers,
                  "am_config": str(AM_TEMPLATE.relative_to(ROOT)),
                  "rule_files": [str(p.relative_to(ROOT)) for p in RULE_FILES],
                  "restore_bound_s": args.restore_bound, "down_seconds": args.down_seconds},
        "floor": floor,
        "runs": runs,
        "summary": {"reps": len(runs), "min_s": min(lat), "median_s": statistics.median(lat),
                    "max_s": max(lat),
                    "median_close_to_resolved_s": statistics.median(
                        r["close_to_resolved_s"] for r in runs)},
    }


def markdown(result: dict[str, Any]) -> str:
    f = result["floor"]
    floor = (f"{f['total_s']:.1f} s (evaluation {f['evaluation_interval_s']:g} s + for "
             f"{f['for_s']:g} s + group_wait {f['group_wait_s']:g} s)")
    lines = [f"`{result['alert']}`: restore deadline -> firing POST at the webhook "
             f"({result['setup']['prometheus']}; {result['setup']['alertmanager']})", "",
             "| rep | deadline -> rule active | rule active -> webhook | breach -> webhook "
             "| floor | window close -> resolved POST |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in result["runs"]:
        lines.append(f"| {r['rep']} | {r['deadline_to_active_s']:.3f} s "
                     f"| {r['active_to_webhook_s']:.3f} s | **{r['breach_to_webhook_s']:.3f} s** "
                     f"| {f['total_s']:.1f} s | {r['close_to_resolved_s']:.3f} s |")
    s = result["summary"]
    lines += ["", f"breach -> webhook: min {s['min_s']:.3f} s, median {s['median_s']:.3f} s, "
              f"max {s['max_s']:.3f} s; floor {floor}. The evaluation phase adds 0 to one "
              "interval (uniform), so a run lands between for + group_wait and the floor, "
              "plus the POST itself."]
    return "\n".join(lines)


def _stop_on_sigterm(signum: int, _frame: Any) -> None:
    # An exception in the main thread, so that every `finally` stops the processes it started
    # (a runner that stops an overrunning benchmark sends SIGTERM).
    raise SystemExit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write the results here")
    parser.add_argument("--restore-bound", type=float, default=3.0,
                        help="sidecar --restore-bound in seconds (default 3)")
    parser.add_argument("--down-seconds", type=float, default=8.0,
                        help="simulated engine down time (default 8; the window stays open "
                             "about 2 s longer)")
    parser.add_argument("--serve-seconds", type=float, default=6.0,
                        help="engine serves this long before draining (default 6)")
    parser.add_argument("--workdir", type=Path,
                        help="keep process logs and configs here (default: a temporary dir)")
    args = parser.parse_args()
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    if args.down_seconds + 2 < args.restore_bound + 4:  # window: drain 1 s + closed 1 s + down
        parser.error("the outage must outlast the restore bound by 4 s or more")
    try:
        if args.workdir:
            args.workdir.mkdir(parents=True, exist_ok=True)
            result = run(args, args.workdir)
        else:
            with tempfile.TemporaryDirectory(prefix="alert-latency-") as tmp:
                result = run(args, Path(tmp))
    except Exception as exc:
        print(f"alert_latency failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(markdown(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
        print(f"\nwrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
