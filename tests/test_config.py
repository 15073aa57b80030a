from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from exporter import config as cfg
from tests.conftest import ROOT


def parse(argv: list[str], env: dict[str, str] | None = None) -> cfg.Config:
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, "serve")
    return cfg.load(parser.parse_args(argv), "serve", env or {})


def test_defaults_match_the_contract() -> None:
    c = parse(["--engine-url", "http://127.0.0.1:8000"])
    assert (c.poll_interval, c.request_cutoff, c.restore_bound, c.down_grace) == (
        5.0, 4200.0, 5400.0, 60.0)


def test_environment_is_read_and_flags_win() -> None:
    env = {"HELIOS_EXPORTER_ENGINE_URL": "http://e:1", "HELIOS_EXPORTER_POLL_INTERVAL": "0.5",
           "HELIOS_EXPORTER_NO_NVML": "true", "HELIOS_EXPORTER_LISTEN": "127.0.0.1:9999"}
    c = parse(["--poll-interval", "2"], env)
    assert c.engine_url == "http://e:1" and c.poll_interval == 2.0 and c.no_nvml
    assert (c.listen_host, c.listen_port) == ("127.0.0.1", 9999)


def test_every_error_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(cfg.ConfigError) as info:
        parse(["--engine-url", "ftp://x", "--poll-interval", "zero", "--listen", "nope",
               "--request-cutoff", "600", "--restore-bound", "60",
               "--events-token-file", str(tmp_path / "missing")])
    text = str(info.value)
    for needle in ("--engine-url", "--poll-interval", "--listen", "--request-cutoff",
                   "--events-token-file"):
        assert needle in text
    assert len(info.value.errors) == 5


def test_readme_configuration_table_is_in_sync() -> None:
    readme = (ROOT / "README.md").read_text()
    assert cfg.markdown_table() in readme, (
        "README configuration table drifted: paste `python -m exporter.config` output")
