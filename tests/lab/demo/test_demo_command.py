"""`helios-exporter demo` as a newcomer meets it: every flag documented, bad options refused
before anything starts, a port kept across re-runs, the temporary folder removed on Ctrl-C and at
the end, kept with --keep or when the demo fails (and the failure shown at once)."""

from __future__ import annotations

import argparse
import signal
import socket
import time
from pathlib import Path

import pytest

from commands import cli
from lab.demo import command
from lab.demo.stack import free_port
from tests.lab.demo.demo_proc import DemoRun
from tools.harness import free_port as any_free_port


def demo_parser() -> argparse.ArgumentParser:
    return cli.command_parser("demo", environ={})


def test_help_documents_every_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert [o.flag for o in command.OPTIONS if not o.help.strip()] == []
    with pytest.raises(SystemExit) as info:
        demo_parser().parse_args(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    flags = [o.flag for o in command.OPTIONS]
    assert len(flags) >= 20 and [f for f in flags if f not in out] == []
    assert [o.env for o in command.OPTIONS if o.env not in out.replace("\n", " ")] == []
    assert "Ctrl-C stops everything" in out and "44 for demo" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--scenario", "nope"], "--scenario / HELIOS_EXPORTER_SCENARIO: expected steady, "
                             "reverse-replay, outage, idle, demo, inert or late-reuse, got 'nope'"),
    (["--port", "70000"], "--port / HELIOS_EXPORTER_PORT: expected a port number 1-65535, got "
                          "'70000'"),
    (["--poll-interval", "0"], "--poll-interval / HELIOS_EXPORTER_POLL_INTERVAL: must be greater "
                               "than 0, got 0.0"),
    (["--duration", "nan"], "--duration / HELIOS_EXPORTER_DURATION: expected a finite number, "
                            "got 'nan'"),
    (["--outage-container", "other"], "expected same or new, got 'other'"),
])
def test_bad_options_are_refused_by_the_parser(argv: list[str], message: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        demo_parser().parse_args(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err


def test_every_bad_option_is_refused_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        demo_parser().parse_args(["--port", "0", "--duration", "-1", "--outage-stuck-requests",
                                  "-2", "--scenario", "nope"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert [line.split(" / ")[0].strip() for line in err.splitlines()[-4:]] == [
        "--scenario", "--duration", "--port", "--outage-stuck-requests"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--request-cutoff", "50", "--restore-bound", "20"],
     "--request-cutoff (50) must not be later than --restore-bound (20)"),
    (["--scenario", "steady", "--outage-after", "5"],
     "--outage-after: only for the scenarios with an outage (outage, demo), not steady"),
])
def test_options_that_disagree_are_refused_before_anything_starts(
        argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert command.run(demo_parser().parse_args(argv)) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no folder, no process


def test_a_port_whose_old_connections_wait_in_time_wait_is_kept() -> None:
    """The server side of a connection it closed first waits in TIME_WAIT for a minute; the
    servers bind with SO_REUSEADDR, so such a port is free to them, and the demo keeps it."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        server, _ = listener.accept()
        server.close()  # the server closes first: its end goes to TIME_WAIT
        client.recv(1)
        client.close()
    # what the old check did (no SO_REUSEADDR): the port looks busy
    with socket.socket() as probe, pytest.raises(OSError):
        probe.bind(("127.0.0.1", port))
    assert free_port(port) == port


def test_a_port_something_listens_on_is_replaced() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        other = free_port(port)
        assert other != port and 0 < other < 65536


@pytest.mark.e2e
@pytest.mark.parametrize("sigint", ["SIG_DFL", "SIG_IGN"], ids=["from_a_terminal", "in_the_background"])
def test_ctrl_c_stops_everything_and_removes_the_folder(tmp_path: Path, sigint: str) -> None:
    """Also when started in the background, where SIGINT is inherited as ignored (a suite run from
    a script once left every demo it started deaf to Ctrl-C)."""
    run = DemoRun(tmp_path, "--scenario", "idle", "--no-prometheus",
                  "--engine-port", str(any_free_port()), "--port", str(any_free_port()),
                  sigint=sigint)
    try:
        run.wait_for("Ctrl-C stops everything")
        folder = run.folder()
        assert folder.is_dir() and (folder / "sidecar.log").exists()
        run.proc.send_signal(signal.SIGINT)
        # Each child has 10 s to stop before it is killed; alone the demo stops in about 2 s.
        assert run.proc.wait(timeout=60) == 0, run.output()
    finally:
        run.stop()
    assert "demo: stopping" in run.output()
    assert not folder.exists() and run.leftovers() == []
    for port in run.ports().values():  # nothing left listening
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))


@pytest.mark.e2e
def test_keep_keeps_the_folder_and_says_where(tmp_path: Path) -> None:
    run = DemoRun(tmp_path, "--scenario", "idle", "--no-prometheus", "--duration", "1", "--keep",
                  "--engine-port", str(any_free_port()), "--port", str(any_free_port()))
    try:
        assert run.proc.wait(timeout=60) == 0, run.output()
    finally:
        run.stop()
    folder = run.folder()
    assert f"kept in {folder}" in run.output()
    assert (folder / "engine.log").exists() and (folder / "state").is_dir()


@pytest.mark.e2e
def test_a_child_that_fails_is_reported_at_once_and_its_logs_kept(tmp_path: Path) -> None:
    """A bad HELIOS_EXPORTER_* variable in the caller's environment stops the sidecar at start:
    the demo says so with the end of its log, without waiting for a timeout, and keeps the logs."""
    run = DemoRun(tmp_path, "--scenario", "idle", "--no-prometheus",
                  "--engine-port", str(any_free_port()), "--port", str(any_free_port()),
                  env={"HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY": "-1"})
    started = time.monotonic()
    try:
        assert run.proc.wait(timeout=60) == 1, run.output()
    finally:
        run.stop()
    out = run.output()
    assert "sidecar exited with code 2 before it was ready" in out
    # its own error, naming the flag and its variable
    assert ("--max-series-per-family / HELIOS_EXPORTER_MAX_SERIES_PER_FAMILY: "
            "must be greater than 0, got -1") in out
    folder = run.folder()
    assert f"kept in {folder}" in out and (folder / "sidecar.log").exists()
    # Far below the 60 s a child is given to answer: the exit was noticed, not waited out.
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("geometry", ["generic", "hybrid-tp2"])
def test_the_demo_says_which_geometry_it_runs(geometry: str) -> None:
    from lab.demo.command import simulate_command, story
    from simulator.slabs import GEOMETRIES

    args = demo_parser().parse_args(["--geometry", geometry])
    cmd = simulate_command(args, 8000)
    assert cmd[cmd.index("--geometry") + 1] == geometry
    first = story(args)[0]
    assert first.startswith(f"the offload tier of the simulator's {geometry} geometry: ")
    assert GEOMETRIES[geometry].summary in first
    assert "production" not in " ".join(story(args))


def test_the_demo_takes_the_former_geometry_name() -> None:
    """`demo --geometry seed-001` (hybrid-tp2's name before) runs the simulator's hybrid-tp2."""
    from lab.demo.command import simulate_command

    cmd = simulate_command(demo_parser().parse_args(["--geometry", "seed-001"]), 8000)
    assert cmd[cmd.index("--geometry") + 1] == "hybrid-tp2"
