"""deploy/kubernetes/components/sidecar on workloads it has never seen: the overlay of
tests/fixtures/kubernetes/injection (third-party StatefulSets and Deployments with their own
containers, volumes, claim templates and security contexts) rendered with `kubectl kustomize`.

The engine's containers come out byte for byte as they went in, the pod changes only by the
documented additions, unlabelled workloads are untouched, the result passes strict schema
validation, and the PodMonitor scrapes exactly the injected sidecars with a stable instance."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.process_guard import process_fixture

from .conftest import INJECTION, alert_job, find, kustomize, load_docs, pod_target, podmonitor_targets
from .sidecar_checks import (
    INJECT_LABEL,
    INJECTED_LABEL,
    KUBE_VERSIONS,
    METRICS_PORT,
    SIDECAR,
    STATE_VOLUME,
    check_sidecar,
    default_port,
    pod_spec,
    state_claim,
    validate_all,
)

WORKLOAD_KINDS = ("Deployment", "StatefulSet")
NAMESPACE = "inference"
# Pod volumes the component adds (the state volume may be replaced by the overlay).
ADDED_VOLUMES = {STATE_VOLUME, "helios-exporter-events-token", "helios-exporter-tmp"}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


@process_fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return kustomize(INJECTION)


def inputs() -> dict[str, dict[str, Any]]:
    """The workloads as their team wrote them, by name."""
    overlay = yaml.safe_load((INJECTION / "kustomization.yaml").read_text(encoding="utf-8"))
    found = {}
    for rel in overlay["resources"]:
        for doc in load_docs(INJECTION / rel):
            if doc["kind"] in WORKLOAD_KINDS:
                found[doc["metadata"]["name"]] = doc
    return found


def labelled(workload: dict[str, Any]) -> bool:
    return workload["metadata"].get("labels", {}).get(INJECT_LABEL) == "true"


def workload(rendered: list[dict[str, Any]], name: str) -> dict[str, Any]:
    hits = [o for o in rendered if o["kind"] in WORKLOAD_KINDS and o["metadata"]["name"] == name]
    assert len(hits) == 1, name
    return hits[0]


INJECTED = sorted(n for n, w in inputs().items() if labelled(w))
UNTOUCHED = sorted(n for n, w in inputs().items() if not labelled(w))


def test_the_fixtures_cover_both_kinds_and_an_unlabelled_workload() -> None:
    kinds = {inputs()[n]["kind"] for n in INJECTED}
    assert kinds == set(WORKLOAD_KINDS) and UNTOUCHED


@pytest.mark.parametrize("name", INJECTED)
def test_engine_containers_are_byte_identical(rendered: list[dict[str, Any]], name: str) -> None:
    before, after = pod_spec(inputs()[name]), pod_spec(workload(rendered, name))
    assert [c["name"] for c in after["containers"]] == [
        *(c["name"] for c in before["containers"]), SIDECAR]
    for original, result in zip(before["containers"], after["containers"], strict=False):
        assert _canonical(result) == _canonical(original), original["name"]
    assert _canonical(after.get("initContainers")) == _canonical(before.get("initContainers"))


@pytest.mark.parametrize("name", INJECTED)
def test_the_pod_changes_only_by_the_documented_additions(rendered: list[dict[str, Any]],
                                                          name: str) -> None:
    source, result = copy.deepcopy(inputs()[name]), copy.deepcopy(workload(rendered, name))
    # Workload level: the overlay's namespace, and claim templates only for the opted-in state.
    assert result["metadata"].pop("namespace") == NAMESPACE
    assert result["metadata"] == source["metadata"]
    result_templates = result["spec"].pop("volumeClaimTemplates", [])
    source_templates = source["spec"].pop("volumeClaimTemplates", [])
    assert result_templates[:len(source_templates)] == source_templates
    assert [t["metadata"]["name"] for t in result_templates[len(source_templates):]] in (
        [], [STATE_VOLUME])
    template, source_template = result["spec"].pop("template"), source["spec"].pop("template")
    assert result["spec"] == source["spec"]
    # Pod metadata: the injected label (and the stable-instance label the overlay adds).
    labels = template["metadata"]["labels"]
    assert labels.pop(INJECTED_LABEL) == "true"
    labels.pop("helios-exporter.io/instance", None)
    assert template["metadata"] == source_template["metadata"], "labels and annotations kept"
    # Pod spec: the sidecar, its volumes, the shared PID namespace, and fsGroup only where a
    # claim needs it (the pod's own fsGroup, if it has one, stays).
    pod, source_pod = template["spec"], source_template["spec"]
    assert pod.pop("containers")[-1]["name"] == SIDECAR
    source_pod.pop("containers")
    assert pod.pop("shareProcessNamespace") is True
    added = [v for v in pod["volumes"] if v["name"] in ADDED_VOLUMES]
    assert sorted(v["name"] for v in added) == sorted(ADDED_VOLUMES)
    pod["volumes"] = [v for v in pod["volumes"] if v["name"] not in ADDED_VOLUMES]
    assert sorted(pod.pop("volumes"), key=_canonical) == sorted(source_pod.pop("volumes", []),
                                                                   key=_canonical)
    security, source_security = pod.pop("securityContext", {}), source_pod.pop("securityContext", {})
    if "fsGroup" in source_security:
        assert security == source_security
    else:
        if security.get("fsGroup") is not None:
            assert security.pop("fsGroup") == 10001
            assert security.pop("fsGroupChangePolicy") == "OnRootMismatch"
        assert security == source_security
    assert pod == source_pod


@pytest.mark.parametrize("name", UNTOUCHED)
def test_unlabelled_workloads_are_untouched(rendered: list[dict[str, Any]], name: str) -> None:
    result = copy.deepcopy(workload(rendered, name))
    assert result["metadata"].pop("namespace") == NAMESPACE
    assert _canonical(result) == _canonical(inputs()[name])


@pytest.mark.parametrize("version", KUBE_VERSIONS)
def test_rendered_objects_validate(rendered: list[dict[str, Any]], version: str) -> None:
    assert validate_all(rendered, version) == []
    assert {o["kind"] for o in rendered} >= {"StatefulSet", "Deployment", "PodMonitor", "ConfigMap"}


@pytest.mark.parametrize("name", INJECTED)
def test_each_sidecar_is_complete(rendered: list[dict[str, Any]], name: str, serve_flags: set[str],
                                  tmp_path: Path) -> None:
    env = check_sidecar(rendered, workload(rendered, name), serve_flags, tmp_path)
    # The overlay's settings reached every sidecar (a patch of the component's ConfigMap).
    assert env["HELIOS_EXPORTER_ENGINE_URL"] == "http://127.0.0.1:30000"
    assert env["HELIOS_EXPORTER_ENGINE_PROCESS_NAME"] == "python3"
    image = pod_spec(workload(rendered, name))["containers"][-1]["image"]
    assert image == "registry.example.com/platform/helios-exporter:0.2.0"


def test_state_claims(rendered: list[dict[str, Any]]) -> None:
    # StatefulSet that had claim templates: ours appended, theirs kept, one claim per replica.
    engines = workload(rendered, "qwen-tp2")
    claim = state_claim(engines)
    assert claim is not None and claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert [t["metadata"]["name"] for t in engines["spec"]["volumeClaimTemplates"]] == [
        "model-cache", STATE_VOLUME]
    assert pod_spec(engines)["securityContext"]["fsGroup"] == 10001
    # StatefulSet that had none: the list is created.
    small = workload(rendered, "embedder")
    assert state_claim(small) is not None
    assert [t["metadata"]["name"] for t in small["spec"]["volumeClaimTemplates"]] == [STATE_VOLUME]
    # Deployment: the overlay's claim; its own fsGroup stays (the sidecar writes through it).
    chat = workload(rendered, "sglang-chat")
    volume = state_claim(chat)
    assert volume is not None
    find(rendered, "PersistentVolumeClaim", volume["persistentVolumeClaim"]["claimName"])
    assert pod_spec(chat)["securityContext"]["fsGroup"] == 2000
    assert chat["spec"]["replicas"] == 1 and chat["spec"]["strategy"]["type"] == "Recreate"


@pytest.mark.e2e
def test_without_the_annotation_the_state_is_an_emptydir(tmp_path: Path) -> None:
    """The default the docs warn about: kept across sidecar restarts, lost with the pod."""
    source = copy.deepcopy(inputs()["qwen-tp2"])
    del source["metadata"]["annotations"]["helios-exporter.io/state-claim"]
    (tmp_path / "sts.yaml").write_text(yaml.safe_dump(source), encoding="utf-8")
    component = Path(INJECTION / "../../../../deploy/kubernetes/components/sidecar").resolve()
    relative = Path(*[".."] * len(tmp_path.parts[1:])) / component.relative_to("/")
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(
        {"resources": ["sts.yaml"], "components": [str(relative)]}), encoding="utf-8")
    result = workload(kustomize(tmp_path), "qwen-tp2")
    assert state_claim(result) is None
    assert result["spec"]["volumeClaimTemplates"] == source["spec"]["volumeClaimTemplates"]
    assert "fsGroup" not in pod_spec(result)["securityContext"]


def test_podmonitor_scrapes_exactly_the_injected_sidecars(rendered: list[dict[str, Any]],
                                                          promtool: str, tmp_path: Path) -> None:
    monitor = find(rendered, "PodMonitor")
    assert monitor["metadata"]["namespace"] == NAMESPACE
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"  # the overlay's
    pods: list[dict[str, Any]] = []
    ips = iter(f"10.0.{i}.{j}" for i in range(1, 9) for j in range(1, 9))
    # Two replicas of the StatefulSet, each before and after a reschedule (same name, new IP);
    # the Deployment's pod before and after one (new name, new IP); the unlabelled router.
    for pod_name in ("qwen-tp2-0", "qwen-tp2-1", "qwen-tp2-0", "qwen-tp2-1"):
        pods += pod_target(workload(rendered, "qwen-tp2")["spec"]["template"], pod_name, next(ips),
                           NAMESPACE)
    pods += pod_target(workload(rendered, "embedder")["spec"]["template"], "embedder-0", next(ips),
                       NAMESPACE)
    for pod_name in ("sglang-chat-5c8d-aaaaa", "sglang-chat-7f9e-bbbbb"):
        pods += pod_target(workload(rendered, "sglang-chat")["spec"]["template"], pod_name,
                           next(ips), NAMESPACE)
    for pod_name in ("router-1", "router-2"):
        pods += pod_target(workload(rendered, "router")["spec"]["template"], pod_name, next(ips),
                           NAMESPACE)
    targets = podmonitor_targets(promtool, monitor, pods, tmp_path)
    port = f":{default_port()}"
    assert all(t["__address__"].endswith(port) for t in targets), "only the sidecar's port"
    assert all(t["endpoint"] == METRICS_PORT and t["container"] == SIDECAR for t in targets)
    assert {t["job"] for t in targets} == {alert_job()}
    assert all("pod" not in t for t in targets)
    instances = sorted(t["instance"] for t in targets)
    assert instances == [f"{NAMESPACE}/{i}" for i in (
        "embedder-0", "qwen-tp2-0", "qwen-tp2-0", "qwen-tp2-1", "qwen-tp2-1", "sglang-chat",
        "sglang-chat")]
    # One series per engine whatever the reschedules: same labels before and after.
    assert len({_canonical({k: v for k, v in t.items() if k != "__address__"}) for t in targets}) == 4
