from __future__ import annotations

import argparse
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from simulator import cli
from simulator.corpora import LANES
from simulator.runner import SCENARIOS
from tools.harness import free_port

ROOT = Path(__file__).resolve().parents[2]


def parse(*argv: str) -> argparse.Namespace:
    return cli.parser(environ={}).parse_args(list(argv))


def test_defaults() -> None:
    args = parse("--listen", "127.0.0.1:8000")
    assert args.scenario == "steady"
    assert args.geometry == "generic"
    tier = cli._engine_config(args).geometry
    assert tier.budget_bytes == 34359738368 and tier.row_fraction == 0.25
    assert (tier.row_record_bytes, tier.page_record_bytes) == (16 << 20, 1 << 20)
    timeline = ("outage_after", "drain_seconds", "closed_seconds", "down_seconds")
    assert [getattr(cli.outage_options(args), name) for name in timeline] == [20.0, 10.0, 5.0, 20.0]
    demo = parse("--listen", "127.0.0.1:8000", "--scenario", "demo", "--down-seconds", "4")
    assert [getattr(cli.outage_options(demo), name) for name in timeline] == [44.0, 3.0, 2.0, 4.0]
    assert args.outage_container == "same" and args.outage_stuck_requests == 0
    assert (args.time_scale, args.latency_noise) == (1.0, 0.03)
    with pytest.raises(SystemExit):
        parse()  # --listen is required
    with pytest.raises(SystemExit):
        parse("--listen", "x:1", "--scenario", "chaos")


def test_help_documents_every_option(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--help")
    text = capsys.readouterr().out
    for option in ("--listen", "--scenario", "--seed", "--rate", "--budget-bytes",
                   "--stores-per-request", "--outage-after", "--drain-seconds", "--down-seconds",
                   "--outage-container", "--outage-keep-generation", "--outage-stuck-requests",
                   "--time-scale", "--latency-noise", "idle"):
        assert option in text


def test_create_app_applies_scenario_defaults_and_options() -> None:
    app = cli.create_app(parse("--listen", "127.0.0.1:1", "--scenario", "reverse-replay",
                               "--seed", "3", "--budget-bytes", str(8 << 30)))
    assert app.title == "Helios engine simulator"
    config = cli._engine_config(parse("--listen", "h:1", "--scenario", "reverse-replay"))
    assert config.stores_per_request == 12
    config = cli._engine_config(parse("--listen", "h:1", "--stores-per-request", "5"))
    assert config.stores_per_request == 5
    with pytest.raises(ValueError, match="the row slab holds no row"):
        cli._engine_config(parse("--listen", "h:1", "--budget-bytes", "1000"))


@pytest.mark.parametrize("argv", [
    ["--listen", "h:1", "--scenario", "idle", "--rate", "3"],
    ["--listen", "h:1", "--budget-bytes", "1000"],
])
def test_options_that_disagree_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse(*argv)) == 2
    assert capsys.readouterr().err.startswith("simulate: ")


def test_every_bad_option_is_refused_by_the_parser_at_once(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        parse("--listen", "h:1", "--time-scale", "0", "--latency-noise", "-0.1",
              "--stores-per-request", "0", "--row-fraction", "1.5", "--trace-cost", "11",
              "--early-stop", "-1")
    assert info.value.code == 2
    assert capsys.readouterr().err.splitlines()[-6:] == [
        "  --row-fraction / HELIOS_EXPORTER_ROW_FRACTION: must be in (0, 1), got 1.5",
        "  --stores-per-request / HELIOS_EXPORTER_STORES_PER_REQUEST: must be 1 or more, got 0",
        "  --time-scale / HELIOS_EXPORTER_TIME_SCALE: must be greater than 0, got 0.0",
        "  --latency-noise / HELIOS_EXPORTER_LATENCY_NOISE: must be 0 to 1, got -0.1",
        "  --trace-cost / HELIOS_EXPORTER_TRACE_COST: must be 0 to 10, got 11.0",
        "  --early-stop / HELIOS_EXPORTER_EARLY_STOP: must be 0 or more, got -1",
    ]


def test_idle_engine_options() -> None:
    config = cli._engine_config(parse("--listen", "h:1", "--scenario", "idle", "--time-scale", "50",
                                      "--latency-noise", "0", "--row-fraction", "0.3125"))
    assert config.stores_per_request == 12 and config.time_scale == 50
    assert config.latency.noise == 0 and config.geometry.row_capacity == 640


@pytest.mark.parametrize("listen", ["8000", ":8000", "host:", "host:99999", "host:x"])
def test_bad_listen_exits_2(listen: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.run(parse("--listen", listen)) == 2
    assert "--listen" in capsys.readouterr().err


def test_parse_listen() -> None:
    assert cli.parse_listen("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert cli.parse_listen("[::1]:9") == ("::1", 9)


@pytest.mark.e2e
def test_python_m_simulator_serves_and_stops_on_sigterm() -> None:
    port = free_port()
    with subprocess.Popen(
        [sys.executable, "-m", "simulator", "--listen", f"127.0.0.1:{port}", "--seed", "1"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    ) as proc:
        try:
            deadline = time.monotonic() + 15
            snapshot = None
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    url = f"http://127.0.0.1:{port}/debug/offload/snapshot"
                    with urllib.request.urlopen(url, timeout=1) as response:
                        snapshot = json.load(response)
                    break
                except OSError:
                    time.sleep(0.1)
            assert snapshot is not None and snapshot["schema_version"] == 3  # the default
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 0
        finally:
            if proc.poll() is None:
                proc.kill()


def test_address_in_use_exits_1() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert cli.run(parse("--listen", f"127.0.0.1:{port}", "--seed", "1")) == 1


def test_every_option_and_scenario_is_documented() -> None:
    doc = (ROOT / "docs" / "simulator.md").read_text()
    missing = [o.flag for o in cli.OPTIONS if f"`{o.flag}" not in doc]
    assert missing == []
    assert [s for s in SCENARIOS if f"**{s}**" not in doc] == []
    assert [c for c in LANES if f"| `{c}` |" not in doc] == []
