"""deploy/compose: the services wire up (engine -> sidecar -> Prometheus -> Alertmanager,
Grafana), mounts point at real files, and the sidecar's configuration is one the exporter takes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from .conftest import COMPOSE, ROOT, alert_job, check_serve_config

COMPOSE_FILE = COMPOSE / "docker-compose.yaml"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def _service(compose: dict[str, Any], name: str) -> dict[str, Any]:
    svc: dict[str, Any] = compose["services"][name]
    return svc


def _binds(svc: dict[str, Any]) -> dict[str, Path]:
    """container path -> host path of the service's bind mounts (relative to the compose dir)."""
    binds = {}
    for volume in svc.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            binds[target] = (COMPOSE / source).resolve()
    return binds


def test_services(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"engine", "exporter", "prometheus", "alertmanager", "grafana"}
    for name in ("engine", "exporter"):
        svc = _service(compose, name)
        assert Path(COMPOSE / svc["build"]["context"]).resolve() == ROOT
        assert (ROOT / svc["build"]["dockerfile"]).is_file()
    assert _service(compose, "engine")["image"] == _service(compose, "exporter")["image"]


def test_third_party_images_are_pinned(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        if "build" in svc:
            continue
        assert re.fullmatch(r"[\w./-]+:v?\d+\.\d+\.\d+", svc["image"]), f"{name}: pin a version tag"


def test_bind_mounts_exist(compose: dict[str, Any]) -> None:
    for name, svc in compose["services"].items():
        for target, source in _binds(svc).items():
            rel = source.relative_to(ROOT).as_posix()
            assert source.exists(), f"{name}: {rel} -> {target}"
    for secret in compose.get("secrets", {}).values():
        assert (COMPOSE / secret["file"]).is_file()


def test_engine_runs_the_simulator(compose: dict[str, Any], simulate_flags: set[str]) -> None:
    command = _service(compose, "engine")["command"]
    assert command[0] == "simulate"
    flags = {a for a in command[1:] if a.startswith("--")}
    assert flags <= simulate_flags
    assert command[command.index("--scenario") + 1] == "outage"


def test_sidecar_configuration(compose: dict[str, Any], serve_flags: set[str], tmp_path: Path) -> None:
    svc = _service(compose, "exporter")
    env = {k: str(v) for k, v in svc["environment"].items()}
    check_serve_config(list(svc["command"]), env, serve_flags, tmp_path)
    # It reaches the engine at the simulator's listen port, by service name.
    engine = _service(compose, "engine")["command"]
    engine_port = int(engine[engine.index("--listen") + 1].rpartition(":")[2])
    url = urlsplit(env["HELIOS_EXPORTER_ENGINE_URL"])
    assert (url.hostname, url.port) == ("engine", engine_port)
    # State on a named volume (survives restarts), token from the compose secret.
    volumes = {target: source for source, target in (v.split(":")[:2] for v in svc["volumes"])}
    assert volumes[env["HELIOS_EXPORTER_STATE_DIR"]] in compose["volumes"]
    assert env["HELIOS_EXPORTER_EVENTS_TOKEN_FILE"] == f"/run/secrets/{svc['secrets'][0]}"
    assert env["HELIOS_EXPORTER_NO_NVML"] == "true"
    assert svc["read_only"] is True and svc["cap_drop"] == ["ALL"]


def test_prometheus_scrapes_the_sidecar_and_sends_to_alertmanager(compose: dict[str, Any]) -> None:
    prom = _service(compose, "prometheus")
    binds = _binds(prom)
    assert binds["/etc/prometheus/prometheus.yml"] == COMPOSE / "prometheus.yml"
    # prometheus.yml's relative rule_files resolve against /etc/prometheus.
    assert binds["/etc/prometheus/alerts"] == ROOT / "alerts"
    config = yaml.safe_load((COMPOSE / "prometheus.yml").read_text(encoding="utf-8"))
    assert all(p.startswith("alerts/") for p in config["rule_files"])
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == alert_job()]
    listen = _service(compose, "exporter")["environment"]["HELIOS_EXPORTER_LISTEN"]
    assert job["static_configs"][0]["targets"] == [f"exporter:{listen.rpartition(':')[2]}"]
    (am,) = config["alerting"]["alertmanagers"]
    assert am["static_configs"][0]["targets"] == ["alertmanager:9093"]
    am_binds = _binds(_service(compose, "alertmanager"))
    assert am_binds["/etc/alertmanager/alertmanager.yml"] == ROOT / "deploy/alertmanager/alertmanager.yml"


def test_grafana_provisioning_matches_the_mounts(compose: dict[str, Any]) -> None:
    grafana = _service(compose, "grafana")
    binds = _binds(grafana)
    assert binds["/etc/grafana/provisioning"] == ROOT / "deploy/grafana/provisioning"
    provisioning = ROOT / "deploy/grafana/provisioning"
    assert provisioning.is_dir(), "deploy/grafana/provisioning is missing"
    dashboards_mount = next(t for t, s in binds.items() if s == ROOT / "dashboards")
    for path in sorted((provisioning / "dashboards").glob("*.y*ml")):
        for provider in yaml.safe_load(path.read_text(encoding="utf-8"))["providers"]:
            assert provider["options"]["path"] == dashboards_mount, path.name
    for path in sorted((provisioning / "datasources").glob("*.y*ml")):
        for source in yaml.safe_load(path.read_text(encoding="utf-8"))["datasources"]:
            url = re.sub(r"\$\{(\w+)\}", lambda m: str(grafana["environment"][m.group(1)]), source["url"])
            assert urlsplit(url).hostname == "prometheus", url


def test_docker_compose_config(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI: `docker compose config` not run")
    if subprocess.run([docker, "compose", "version"], capture_output=True, timeout=60,
                      check=False).returncode != 0:
        pytest.skip("docker CLI without the compose plugin: `docker compose config` not run")
    result = subprocess.run([docker, "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
                            capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
