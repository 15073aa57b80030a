"""`helios-exporter demo`: its options, and the run that starts the stack and narrates it."""

from __future__ import annotations

import argparse
import secrets
import shutil
import signal
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from types import FrameType

import httpx

from exporter import defaults
from exporter.options import Option
from lab.demo import engines
from lab.demo.alerts import AlertNarrator
from lab.demo.offload import OffloadNarrator
from lab.demo.stack import Stack, StartFailed, free_port
from lab.demo.story import RestoreNarrator, Stamp
from simulator.corpora import lane
from simulator.outage import OutageOptions
from simulator.runner import DEMO_CYCLE, OUTAGE_DEFAULTS, SCENARIOS
from simulator.scenarios import ReverseReplayScenario, replay_order
from simulator.slabs import DEFAULT_GEOMETRY, GEOMETRIES, geometry_name

REPO = Path(__file__).resolve().parents[2]
TICK_S = 0.5
TIMINGS = ("outage_after", "drain_seconds", "closed_seconds", "down_seconds")
PASS_NAMES = {"prime": "the prime (forward)", "forward": "forward replay",
              "reverse": "reverse replay"}


DESCRIPTION = (
    "The simulated engine, the sidecar and (when installed) Prometheus with the shipped rules "
    "and Alertmanager, on 127.0.0.1; narrates the offload tier, the restore window and the "
    "alerts as they happen. Ctrl-C stops everything and removes the temporary folder.")
PORTS = "ports on 127.0.0.1 (each used when free, else one the system picks)"
SIDECAR = "the sidecar, compressed so the story fits in minutes"
OUTAGE = "the outage timeline (outage and demo scenarios; seconds from the engine's start)"


def _scenario_default(name: str) -> str:
    return ", ".join(f"{getattr(o, name):g} for {k}" for k, o in OUTAGE_DEFAULTS.items())


OPTIONS = (
    Option("--engine", "str", "helios", "the engine the simulator plays: helios (its offload "
           "snapshot), or sglang or vllm (their /metrics only, read by a sidecar of that "
           "--engine-kind; docs/engines.md)", choices=engines.ENGINES),
    Option("--scenario", "str", None, "what the simulated engine plays (docs/simulator.md): "
           "demo replays the probe corpus prime, forward, reverse (row pressure while pages sit "
           "free, hits by order), then an outage and a restore; outage is the restore story with "
           "steady traffic; reverse-replay, steady and idle have no outage; late-reuse stores "
           "without reuse for 30 s, then reuses", choices=SCENARIOS,
           default_text="demo; late-reuse with --engine sglang or vllm"),
    Option("--geometry", geometry_name, DEFAULT_GEOMETRY, "the simulated engine's offload tier "
           "(docs/simulator.md, 'Geometries'): generic (round sizes from no model) or hybrid-tp2 "
           "(the engine team's control runs' tier)", choices=tuple(GEOMETRIES)),
    Option("--seed", "int", None, "the simulated engine's seed, to replay a run exactly",
           default_text="random"),
    Option("--duration", "float", 0.0, "stop after S seconds; 0 runs until Ctrl-C", low=0,
           metavar="S"),
    Option("--no-prometheus", "bool", False,
           "do not start Prometheus and Alertmanager even when installed"),
    Option("--keep", "bool", False, "keep the temporary folder (configs, logs, state) after the "
           "demo; it is always kept when the demo fails"),
    Option("--engine-port", "port", 8000, "the simulated engine", metavar="PORT", group=PORTS),
    Option("--port", "port", defaults.LISTEN_PORT, "the sidecar", metavar="PORT", group=PORTS),
    Option("--prometheus-port", "port", 9090, "Prometheus", metavar="PORT", group=PORTS),
    Option("--alertmanager-port", "port", 9093, "Alertmanager", metavar="PORT", group=PORTS),
    Option("--poll-interval", "float", 1.0, "seconds between the sidecar's polls", above=0,
           metavar="S", group=SIDECAR),
    Option("--request-cutoff", "float", 20.0, "seconds from a window's start to its request "
           "cutoff", above=0, metavar="S", default_text="20; in production 4200", group=SIDECAR),
    Option("--restore-bound", "float", 45.0, "seconds from a window's start to its restore "
           "deadline", above=0, metavar="S", default_text="45; in production 5400",
           group=SIDECAR),
    Option("--down-grace", "float", 3.0, "seconds the engine may be unreachable before a window "
           "opens", above=0, metavar="S", default_text="3; in production 60", group=SIDECAR),
    Option("--outage-after", "float", None, "serve this long, then drain", low=0, metavar="S",
           default_text=_scenario_default("outage_after"), group=OUTAGE),
    Option("--drain-seconds", "float", None, "drain this long, then close admission", low=0,
           metavar="S", default_text=_scenario_default("drain_seconds"), group=OUTAGE),
    Option("--closed-seconds", "float", None, "stay closed this long, then the container stops",
           low=0, metavar="S", default_text=_scenario_default("closed_seconds"), group=OUTAGE),
    Option("--down-seconds", "float", None, "stay down this long, then restore", low=0,
           metavar="S", default_text=_scenario_default("down_seconds"), group=OUTAGE),
    Option("--outage-container", "str", None, "restore into the retained container or a new one "
           "(new: the container check fails and pages)", choices=("same", "new"),
           default_text="same", group=OUTAGE),
    Option("--outage-stuck-requests", "int", None, "keep N requests in flight through the drain "
           "(the cutoff pages)", low=0, metavar="N", default_text="0", group=OUTAGE),
)


def validate(args: argparse.Namespace) -> str | None:
    """What is wrong between options (each one is checked as it is parsed), or None; settles
    the scenario the engine chosen plays."""
    args.scenario = engines.scenario(args.engine, args.scenario)
    if args.request_cutoff > args.restore_bound:
        return (f"--request-cutoff ({args.request_cutoff:g}) must not be later than "
                f"--restore-bound ({args.restore_bound:g})")
    given = [f"--{name.replace('_', '-')}" for name in
             (*TIMINGS, "outage_container", "outage_stuck_requests")
             if getattr(args, name) is not None]
    if given and args.scenario not in OUTAGE_DEFAULTS:
        return (f"{', '.join(given)}: only for the scenarios with an outage "
                f"({', '.join(OUTAGE_DEFAULTS)}), not {args.scenario}")
    return None


def timeline(args: argparse.Namespace) -> OutageOptions | None:
    if args.scenario not in OUTAGE_DEFAULTS:
        return None
    given = {name: getattr(args, name) for name in TIMINGS if getattr(args, name) is not None}
    return replace(OUTAGE_DEFAULTS[args.scenario], **given,
                   container=args.outage_container or "same")


def simulate_command(args: argparse.Namespace, port: int) -> list[str]:
    cmd = [sys.executable, "-m", "commands", "simulate", "--listen", f"127.0.0.1:{port}",
           "--scenario", args.scenario, "--geometry", args.geometry, "--flavor", args.engine]
    if args.seed is not None:
        cmd += ["--seed", str(args.seed)]
    for name in (*TIMINGS, "outage_container", "outage_stuck_requests"):
        if getattr(args, name) is not None:
            cmd += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return cmd


def prometheus_config(sidecar: str, am_port: int | None, rules: list[Path]) -> str:
    alerting = ""
    if am_port is not None:
        alerting = (f"alerting:\n  alertmanagers:\n    - static_configs:\n"
                    f"        - targets: ['127.0.0.1:{am_port}']\n")
    rule_lines = "".join(f"  - {r}\n" for r in rules)
    return (
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        + alerting
        + (f"rule_files:\n{rule_lines}" if rules else "")
        + "scrape_configs:\n  - job_name: helios-exporter\n    static_configs:\n"
        f"      - targets: ['{sidecar}']\n"
    )


# Alertmanager here only holds the alerts for its API and UI: one receiver that sends nothing
# (the shipped routing and templates are in deploy/alertmanager/).
ALERTMANAGER_CONFIG = """route:
  receiver: nobody
  group_wait: 1s
  group_interval: 5s
  repeat_interval: 1h
receivers:
  - name: nobody
"""


class _Stop(Exception):
    """SIGINT, SIGTERM or SIGHUP: stop."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise _Stop(signal.Signals(signum).name)


def run(args: argparse.Namespace) -> int:
    problem = validate(args)
    if problem:
        print(f"helios-exporter demo: error: {problem}", file=sys.stderr)
        return 2
    # SIGINT too: a demo started from a script in the background inherits SIGINT as ignored,
    # and Python then leaves it so (Ctrl-C, `kill -INT` did nothing).
    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.signal(sig, _raise_stop) for sig in handled}
    stack = Stack()
    failed = True
    try:
        failed = _run(args, stack)
    except StartFailed as exc:
        print(f"\ndemo: {exc}", file=sys.stderr)
    except (KeyboardInterrupt, _Stop):
        failed = False
        print("\ndemo: stopping", flush=True)
    finally:
        # A second Ctrl-C must not cut the clean-up short (children left running, the folder).
        for sig in handled:
            signal.signal(sig, signal.SIG_IGN)
        kept = stack.close(keep=args.keep or failed)
        if kept:
            print(f"demo: configs, logs and state kept in {stack.tmp}", file=sys.stderr)
        for sig, handler in before.items():  # as they were, for a caller in the same process
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
    return 1 if failed else 0


def story(args: argparse.Namespace) -> list[str]:
    """What the scenario will show, in seconds from the engine's start."""
    lines = [f"the offload tier of the simulator's {args.geometry} geometry: "
             f"{GEOMETRIES[args.geometry].summary}"]
    replay = args.scenario in ("demo", "reverse-replay")
    if replay:
        prompts = lane(ReverseReplayScenario.corpus).bodies
        order = ", ".join(replay_order(n, DEMO_CYCLE if args.scenario == "demo" else
                                       ("reverse", "forward")) for n in range(3))
        lines.append(f"the {prompts} prompts of the probe corpus, 4 a second, pass after pass "
                     f"({order}, ...): the row slab runs out while most pages sit free, and the "
                     "same prompts hit or miss by the order they come back in")
    elif args.scenario in ("steady", "outage"):
        lines.append("steady traffic, 3 requests a second: hits and misses from the start, the "
                     "row slab full after about two minutes")
    elif args.scenario == "late-reuse":
        lines.append("90 new prompts, 3 requests a second: the host tier stores them and "
                     "restores nothing for 30 s, then the same prompts come back, restored from "
                     "the host tier")
    else:
        lines.append("no traffic (idle): the engine serves only what you send it")
    outage = timeline(args)
    if outage is not None:
        drain, closed, down, restored = outage.boundaries()
        where = "the retained container" if outage.container == "same" else "a new container"
        lines.append(f"at {drain:g}s the engine drains, at {closed:g}s it closes admission, at "
                     f"{down:g}s its container stops, at {restored:g}s it is restored into "
                     f"{where}: the sidecar opens a restore window, counts down its deadlines "
                     "and checks the restored engine")
    return lines


def _get(url: str) -> httpx.Response | None:
    try:
        resp = httpx.get(url, timeout=1.0)
    except httpx.HTTPError:
        return None
    return resp if resp.status_code == 200 else None


def _run(args: argparse.Namespace, stack: Stack) -> bool:
    """Start everything and narrate until the duration ends; whether the demo failed."""
    starting = "the simulated engine and the sidecar"
    if shutil.which("prometheus") and not args.no_prometheus:
        starting = "the simulated engine, the sidecar, Prometheus and Alertmanager (about 10 s)"
    print(f"helios-exporter demo: starting {starting} ...", flush=True)
    engine_port = free_port(args.engine_port)
    stack.start("engine", simulate_command(args, engine_port))
    engine = f"http://127.0.0.1:{engine_port}"
    stack.wait_ready("engine", engine + "/health")
    stamp = Stamp()  # the scenario's clock started with the engine

    port = free_port(args.port)
    sidecar = f"http://127.0.0.1:{port}"
    token = stack.tmp / "events-token"
    token.touch(mode=0o600)
    token.write_text(secrets.token_urlsafe(32) + "\n")
    stack.start("sidecar", [
        sys.executable, "-m", "exporter", "serve", "--engine-url", engine,
        "--listen", f"127.0.0.1:{port}", "--poll-interval", f"{args.poll_interval:g}",
        "--state-dir", str(stack.tmp / "state"), "--request-cutoff", f"{args.request_cutoff:g}",
        "--restore-bound", f"{args.restore_bound:g}", "--down-grace", f"{args.down_grace:g}",
        "--events-token-file", str(token), "--no-nvml", "--log-format", "json",
        "--engine-kind", args.engine])
    stack.wait_ready("sidecar", sidecar + "/readyz")

    prometheus = alertmanager = None
    prom_bin = shutil.which("prometheus")
    am_bin = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    rules = sorted((REPO / "alerts").glob("helios-*.yaml"))
    if prom_bin and not args.no_prometheus:
        am_port = None
        if am_bin:
            am_port = free_port(args.alertmanager_port)
            (stack.tmp / "alertmanager.yml").write_text(ALERTMANAGER_CONFIG)
            stack.start("alertmanager", [
                am_bin, f"--config.file={stack.tmp / 'alertmanager.yml'}",
                f"--storage.path={stack.tmp / 'alertmanager-data'}",
                f"--web.listen-address=127.0.0.1:{am_port}", "--cluster.listen-address="])
            alertmanager = f"http://127.0.0.1:{am_port}"
        prom_port = free_port(args.prometheus_port)
        (stack.tmp / "prometheus.yml").write_text(prometheus_config(f"127.0.0.1:{port}", am_port,
                                                                    rules))
        stack.start("prometheus", [
            prom_bin, f"--config.file={stack.tmp / 'prometheus.yml'}",
            f"--storage.tsdb.path={stack.tmp / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}"])
        prometheus = f"http://127.0.0.1:{prom_port}"
        if alertmanager:
            stack.wait_ready("alertmanager", alertmanager + "/-/ready")
        # Prometheus hands its targets to the scrapers about 5 s after it starts; until the first
        # scrape, absent(up) makes HeliosExporterDown pending. The story starts once it watches.
        stack.wait_ready("prometheus", f"{prometheus}/api/v1/query?query=up",
                         ready=lambda r: r.status_code == 200 and bool(r.json()["data"]["result"]))

    seed = f", seed {args.seed}" if args.seed is not None else ""
    rows = [("status page", f"{sidecar}/", "the restore window at a glance"),
            ("sidecar", f"{sidecar}/metrics", f"and {sidecar}/status (JSON)")]
    if prometheus:
        rows.append(("prometheus alerts", f"{prometheus}/alerts",
                     f"the shipped rules ({len(rules)} files), pending and firing"))
    else:
        rows.append(("prometheus", "not started", "--no-prometheus" if args.no_prometheus
                     else "not installed: scripts/bootstrap installs it"))
    if alertmanager:
        rows.append(("alertmanager", alertmanager, "the alerts below come from its API"))
    rows += [("simulated engine", engine, f"scenario {args.scenario}, geometry {args.geometry}{seed}; "
                                                 "/admin/state"),
             ("events token", str(token), "for POST /restore/events"),
             ("temporary folder", str(stack.tmp),
              "logs and state; " + ("kept on exit" if args.keep else
                                    "removed on exit (--keep keeps it)"))]
    print("\nUp, all on 127.0.0.1:\n", flush=True)
    width = min(40, max(len(url) for _, url, _ in rows))
    for name, url, note in rows:
        print(f"  {name:<18} {url:<{width}}  {note}")
    print("\nWhat happens, in seconds from the engine's start (the [+s] of every line below):")
    engine_lines = engines.story(args.engine, REPO / "alerts" / "helios-alerts.yaml") \
        if args.engine != "helios" else []
    for line in story(args) + engine_lines:
        print(textwrap.fill(line, width=100, initial_indent="  - ", subsequent_indent="    "))
    print("Ctrl-C stops everything." + (f" Stops by itself after {args.duration:g}s."
                                         if args.duration else "") + "\n", flush=True)

    replay = args.scenario in ("demo", "reverse-replay")
    cycle = DEMO_CYCLE if args.scenario == "demo" else ("reverse", "forward")
    narrators_restore = RestoreNarrator(stamp)
    narrators_offload = OffloadNarrator(
        stamp, pass_size=lane(ReverseReplayScenario.corpus).bodies if replay else None,
        pass_name=lambda n: PASS_NAMES[replay_order(n, cycle)])
    narrators_alerts = AlertNarrator(stamp, alertmanager, prometheus) if alertmanager else None
    narrator_engine = engines.EngineNarrator(stamp) if args.engine != "helios" else None
    stop_at = time.monotonic() + args.duration if args.duration else None
    while stop_at is None or time.monotonic() < stop_at:
        why = stack.exited()
        if why:
            print(f"\ndemo: {why}", file=sys.stderr)
            return True
        lines: list[str] = []
        # A pass that ended is older news than a phase that just changed: offload first.
        metrics = _get(sidecar + "/metrics")
        if metrics is not None:
            lines += narrators_offload.lines(metrics.text)
            if narrator_engine is not None:
                lines += narrator_engine.lines(metrics.text)
        status = _get(sidecar + "/status")
        if status is not None:
            lines += narrators_restore.lines(status.json())
        if narrators_alerts is not None:
            lines += narrators_alerts.lines()
        for line in lines:
            print(line, flush=True)
        time.sleep(TICK_S)
    print("\ndemo: the duration is over; stopping", flush=True)
    return False
