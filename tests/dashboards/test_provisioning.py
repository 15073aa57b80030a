"""deploy/grafana/provisioning: a Prometheus data source and a file provider for dashboards/."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from tests.dashboards.promql import DASHBOARD_FILES, ROOT, panels

PROVISIONING = ROOT / "deploy" / "grafana" / "provisioning"
COMPOSE = ROOT / "deploy" / "compose" / "docker-compose.yaml"


def read(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def test_datasource_is_a_default_prometheus() -> None:
    config = read(PROVISIONING / "datasources" / "prometheus.yaml")
    assert config["apiVersion"] == 1
    (source,) = config["datasources"]
    assert source["type"] == "prometheus"
    assert source["access"] == "proxy"
    assert source["isDefault"] is True
    assert source["url"] == "${PROMETHEUS_URL}"
    # $__rate_interval is derived from it: a Prometheus duration
    assert re.fullmatch(r"\d+[smh]", source["jsonData"]["timeInterval"])


def test_dashboard_provider_reads_the_generated_files() -> None:
    config = read(PROVISIONING / "dashboards" / "helios.yaml")
    assert config["apiVersion"] == 1
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert provider["folder"] == "Helios"
    assert provider["allowUiUpdates"] is False  # generated files: change the generator instead
    assert PurePosixPath(provider["options"]["path"]).is_absolute()


def test_compose_mounts_what_the_provisioning_files_expect() -> None:
    if not COMPOSE.is_file():
        pytest.skip("deploy/compose/docker-compose.yaml not present")
    services = read(COMPOSE)["services"]
    if "grafana" not in services:
        pytest.skip("the compose file runs no Grafana")
    grafana = services["grafana"]
    mounts = {}
    for volume in grafana["volumes"]:
        source, target = volume.split(":")[:2]
        mounts[target] = (COMPOSE.parent / source).resolve()
    provider = read(PROVISIONING / "dashboards" / "helios.yaml")["providers"][0]
    assert mounts["/etc/grafana/provisioning"] == PROVISIONING.resolve()
    dashboards_dir = mounts[provider["options"]["path"]]
    assert dashboards_dir == (ROOT / "dashboards").resolve()
    assert all((dashboards_dir / name).is_file() for name in DASHBOARD_FILES)
    assert "PROMETHEUS_URL" in grafana["environment"]


def test_docs_describe_every_dashboard_and_the_provisioning(dashboards: dict[str, Any]) -> None:
    docs = (ROOT / "docs" / "dashboards.md").read_text(encoding="utf-8")
    for name in DASHBOARD_FILES:
        assert name in docs
        assert dashboards[name]["uid"] in docs
        missing = [p["title"] for p in panels(dashboards[name]) if p["title"] not in docs]
        assert missing == [], f"{name}: panels not described in docs/dashboards.md"
    assert "scripts/generate dashboards" in docs
    assert "deploy/grafana/provisioning" in docs
