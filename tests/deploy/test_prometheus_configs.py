"""Prometheus and Alertmanager configs under deploy/: promtool / amtool accept them, their rule
globs load exactly the rule files of alerts/, and the scrape jobs give job="helios-exporter"."""

from __future__ import annotations

import fnmatch
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import COMPOSE, DEPLOY, ROOT, alert_job, missing

CONFIGS = [*sorted((DEPLOY / "prometheus").glob("*.yml")), COMPOSE / "prometheus.yml"]
NO_KUBERNETES_SD = "field kubernetes_sd_configs not found"


def _rule_files() -> list[str]:
    """Names of the Prometheus rule files in alerts/ (top-level `groups`)."""
    names = []
    for path in sorted((ROOT / "alerts").glob("*.yaml")):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and "groups" in doc:
            names.append(path.name)
    return names


def _stage(config: Path, tmp_path: Path, doc: dict[str, Any] | None = None) -> Path:
    """The config in a scratch dir with alerts/ beside it, as every config here expects
    (compose mounts it at /etc/prometheus/alerts; the examples say to copy it there)."""
    shutil.copytree(ROOT / "alerts", tmp_path / "alerts", ignore=shutil.ignore_patterns("tests"))
    target = tmp_path / config.name
    if doc is None:
        shutil.copy(config, target)
    else:
        target.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return target


def _check_config(promtool: str, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_promtool_check_config(config: Path, promtool: str, tmp_path: Path) -> None:
    result = _check_config(promtool, _stage(config, tmp_path))
    output = result.stdout + result.stderr
    if result.returncode != 0 and NO_KUBERNETES_SD in output:
        # Debian builds Prometheus without Kubernetes discovery. Check everything else with the
        # discovery swapped for a static target; the relabeling is exercised in the next test.
        doc = yaml.safe_load(config.read_text(encoding="utf-8"))
        for job in doc["scrape_configs"]:
            if job.pop("kubernetes_sd_configs", None) is not None:
                job["static_configs"] = [{"targets": ["10.0.0.1:19400"]}]
        shutil.rmtree(tmp_path / "alerts")
        result = _check_config(promtool, _stage(config, tmp_path, doc))
        output = result.stdout + result.stderr
    assert result.returncode == 0, output
    # The glob really loaded the rule files (a glob matching nothing is not an error).
    assert f"SUCCESS: {len(_rule_files())} rule files found" in output, output
    for name in _rule_files():
        assert f"alerts/{name}" in output


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_rule_globs_load_exactly_the_rule_files(config: Path) -> None:
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    patterns = doc["rule_files"]
    candidates = [f"alerts/{p.name}" for p in (ROOT / "alerts").glob("*.yaml")]
    matched = {c for c in candidates for pattern in patterns if fnmatch.fnmatch(c, pattern)}
    assert matched == {f"alerts/{n}" for n in _rule_files()}, "alerts/config.yaml is not a rule file"
    assert doc["alerting"]["alertmanagers"], "alerts need somewhere to go"


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_scrape_job_is_the_rules_job(config: Path) -> None:
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    jobs = [j for j in doc["scrape_configs"] if j["job_name"] == alert_job()]
    assert len(jobs) == 1
    assert jobs[0].get("metrics_path", "/metrics") == "/metrics"


def _sd_labels(promtool: str, tmp_path: Path, targets: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Final target labels of prometheus-kubernetes.yml's job for these pod-discovery targets,
    relabeled by the real Prometheus code (`promtool check service-discovery`)."""
    doc = yaml.safe_load((DEPLOY / "prometheus" / "prometheus-kubernetes.yml").read_text(encoding="utf-8"))
    (job,) = [j for j in doc["scrape_configs"] if j["job_name"] == alert_job()]
    assert job.pop("kubernetes_sd_configs") == [{"role": "pod"}]
    (tmp_path / "targets.json").write_text(json.dumps(targets), encoding="utf-8")
    job["file_sd_configs"] = [{"files": [str(tmp_path / "targets.json")]}]
    doc.pop("rule_files")
    (tmp_path / "p.yml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    result = subprocess.run([promtool, "check", "service-discovery", "--timeout=2s",
                             str(tmp_path / "p.yml"), job["job_name"]],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return [t["labels"] for t in json.loads(result.stdout)]


def _pod_port(pod: str, ip: str, port: int, name: str, **meta: str) -> dict[str, Any]:
    labels = {
        "__meta_kubernetes_namespace": "inference",
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_pod_ip": ip,
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_ready": "false",  # engine down: the sidecar is still scraped
        "__meta_kubernetes_pod_label_helios_exporter_io_injected": "true",
        "__meta_kubernetes_pod_container_port_name": name,
        "__meta_kubernetes_pod_container_port_number": str(port),
    }
    return {"targets": [f"{ip}:{port}"], "labels": labels | meta}


def test_kubernetes_pod_discovery_relabeling(promtool: str, tmp_path: Path) -> None:
    injected = "__meta_kubernetes_pod_label_helios_exporter_io_injected"
    instance = "__meta_kubernetes_pod_label_helios_exporter_io_instance"
    targets = [
        # a StatefulSet pod: engine ports `http` and `metrics`, the sidecar's helios-metrics
        _pod_port("qwen-0", "10.0.0.5", 30000, "http"),
        _pod_port("qwen-0", "10.0.0.5", 30001, "metrics"),
        _pod_port("qwen-0", "10.0.0.5", 19400, "helios-metrics"),
        # the same pod rescheduled: new IP, same name
        _pod_port("qwen-0", "10.0.9.9", 19400, "helios-metrics"),
        # a one-replica Deployment's pod, before and after a reschedule (new name and IP)
        _pod_port("chat-7d9f-x1", "10.0.0.6", 19400, "helios-metrics", **{instance: "chat"}),
        _pod_port("chat-7d9f-z9", "10.0.0.7", 19400, "helios-metrics", **{instance: "chat"}),
        # not injected, or not to be scraped
        _pod_port("router-1", "10.0.0.8", 19400, "metrics", **{injected: ""}),
        _pod_port("qwen-1", "10.0.0.10", 19400, "helios-metrics",
                  __meta_kubernetes_pod_phase="Succeeded"),
    ]
    labels = _sd_labels(promtool, tmp_path, targets)
    kept = [lbl for lbl in labels if lbl]
    summary = sorted((lbl["__address__"], lbl["instance"], lbl["job"]) for lbl in kept)
    assert summary == [
        ("10.0.0.5:19400", "inference/qwen-0", alert_job()),
        ("10.0.0.6:19400", "inference/chat", alert_job()),
        ("10.0.0.7:19400", "inference/chat", alert_job()),
        ("10.0.9.9:19400", "inference/qwen-0", alert_job()),
    ]
    assert all("pod" not in lbl and lbl["namespace"] == "inference" for lbl in kept)


@pytest.mark.e2e
def test_amtool_check_config() -> None:
    config = DEPLOY / "alertmanager" / "alertmanager.yml"
    assert config.is_file(), "deploy/alertmanager/alertmanager.yml is missing"
    amtool = shutil.which("amtool")
    if amtool is None:
        missing("amtool not installed (Debian package prometheus-alertmanager)")
    result = subprocess.run([amtool, "check-config", str(config)], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
