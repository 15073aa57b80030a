"""The pinned Prometheus Operator CRDs (tests/fixtures/prometheus-operator) are the upstream files
unchanged, and their schemas catch what the API server would reject. The shipped objects are
validated against them wherever the deployment tests validate core objects
(sidecar_checks.validate_all) and in test_kube_prometheus_stack.py."""

from __future__ import annotations

import copy
import hashlib
import re
from typing import Any

import pytest

from tests.process_guard import process_fixture

from . import crd_schemas
from .conftest import DEPLOY, find, kustomize, load_docs


def test_pinned_copies_are_the_upstream_blobs() -> None:
    readme = (crd_schemas.FIXTURES / "README.md").read_text(encoding="utf-8")
    table = dict(re.findall(r"^\| `([^`]+)` \| ([0-9a-f]{40}) \|", readme, re.MULTILINE))
    assert set(table) == set(crd_schemas.CRDS.values())
    for name, blob in table.items():
        data = (crd_schemas.FIXTURES / name).read_bytes()
        got = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's blob id
        assert got == blob, name


@process_fixture(scope="module")  # kubectl kustomize
def monitor() -> dict[str, Any]:
    return find(kustomize(DEPLOY / "kubernetes"), "PodMonitor")


@pytest.mark.e2e  # kubectl kustomize
def test_shipped_objects_validate(monitor: dict[str, Any]) -> None:
    rendered = kustomize(DEPLOY / "kubernetes-tls") + kustomize(DEPLOY / "kube-prometheus-stack")
    objects = [o for o in rendered if o["kind"] in crd_schemas.KINDS]
    objects += load_docs(DEPLOY / "kube-prometheus-stack" / "alertmanagerconfig.yaml")
    assert {o["kind"] for o in objects} == crd_schemas.KINDS
    for obj in objects:
        assert crd_schemas.validate(obj) == [], obj["metadata"]["name"]


def test_a_misspelt_field_is_rejected(monitor: dict[str, Any]) -> None:
    bad = copy.deepcopy(monitor)
    bad["spec"]["podMetricsEndpoints"][0]["scrapeIntervall"] = "15s"
    (error,) = crd_schemas.validate(bad)
    assert "podMetricsEndpoints.0" in error and "scrapeIntervall" in error, error


def test_a_wrong_value_is_rejected(monitor: dict[str, Any]) -> None:
    bad = copy.deepcopy(monitor)
    bad["spec"]["podMetricsEndpoints"][0]["relabelings"][0]["action"] = "rewrite"
    errors = crd_schemas.validate(bad)
    assert errors and all("relabelings.0.action" in e for e in errors), errors
    rule = load_docs(DEPLOY / "kube-prometheus-stack" / "prometheusrule-kps.yaml")[0]
    rule = copy.deepcopy(rule)
    del rule["spec"]["groups"][0]["name"]
    assert any("'name' is a required property" in e for e in crd_schemas.validate(rule))


def test_an_alertmanagerconfig_matcher_type_is_checked() -> None:
    (amc,) = load_docs(DEPLOY / "kube-prometheus-stack" / "alertmanagerconfig.yaml")
    bad = copy.deepcopy(amc)
    bad["spec"]["route"]["matchers"][0]["matchType"] = "~="
    errors = crd_schemas.validate(bad)
    assert errors and "route.matchers.0.matchType" in errors[0], errors
