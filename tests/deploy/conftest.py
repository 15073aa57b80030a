"""Shared fixtures for the deployment tests: paths, manifests, the sidecar's real flags."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import missing

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUBE = DEPLOY / "kubernetes"
COMPOSE = DEPLOY / "compose"
ENV_PREFIX = "HELIOS_EXPORTER_"


def load_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def kustomization() -> dict[str, Any]:
    doc = yaml.safe_load((KUBE / "kustomization.yaml").read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def kube_objects() -> list[dict[str, Any]]:
    """Every object of every resource file listed in kustomization.yaml, in order."""
    objects: list[dict[str, Any]] = []
    for rel in kustomization()["resources"]:
        objects.extend(load_docs(KUBE / rel))
    return objects


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, f"expected one {kind} {name or ''}, found {len(hits)}"
    return hits[0]


def help_flags(*command: str) -> set[str]:
    """The long flags `python -m exporter <command> --help` prints."""
    result = subprocess.run([sys.executable, "-m", "exporter", *command, "--help"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", result.stdout))
    flags.discard("--help")
    assert flags, result.stdout
    return flags


def env_name(flag: str) -> str:
    return ENV_PREFIX + flag.removeprefix("--").replace("-", "_").upper()


@pytest.fixture(scope="session")
def serve_flags() -> set[str]:
    return help_flags("serve")


@pytest.fixture(scope="session")
def simulate_flags() -> set[str]:
    return help_flags("simulate")


@pytest.fixture(scope="session")
def objects() -> list[dict[str, Any]]:
    return kube_objects()


@pytest.fixture(scope="session")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        missing("promtool not installed (Debian package prometheus)")
    return path


def alert_job() -> str:
    """The job the rules select, from alerts/config.yaml `selector: 'job="..."'`."""
    config = yaml.safe_load((ROOT / "alerts" / "config.yaml").read_text(encoding="utf-8"))
    match = re.search(r'\bjob="([^"]+)"', config["selector"])
    assert match, config["selector"]
    return match.group(1)


def check_serve_config(args: list[str], env: dict[str, str], serve_flags: set[str],
                       scratch: Path) -> None:
    """`args` + `env` is a sidecar command line the exporter accepts: the command is `serve`,
    every flag and every HELIOS_EXPORTER_* variable names a real `serve` flag, and the values
    pass the exporter's own configuration loader. Files (`*_FILE`), which exist only inside the
    container, are replaced by a readable file in `scratch` for the loader."""
    from exporter import config as cfg

    assert args[:1] == ["serve"], args
    flags = {a.split("=", 1)[0] for a in args[1:] if a.startswith("--")}
    assert flags <= serve_flags, f"unknown serve flags: {sorted(flags - serve_flags)}"
    known_env = {env_name(f) for f in serve_flags}
    ours = {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}
    assert set(ours) <= known_env, f"unknown variables: {sorted(set(ours) - known_env)}"
    stand_in = scratch / "stand-in-file"
    stand_in.write_text("stand-in\n")
    ours = {k: str(stand_in) if k.endswith("_FILE") else v for k, v in ours.items()}
    parser = argparse.ArgumentParser()
    cfg.add_arguments(parser, "serve")
    try:
        cfg.load(parser.parse_args(args[1:]), "serve", ours)
    except cfg.ConfigError as exc:
        pytest.fail(f"the exporter rejects this configuration: {exc.errors}")
