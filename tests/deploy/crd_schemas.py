"""Validation of Prometheus Operator objects against the operator's own CRD schemas.

The schemas are the `openAPIV3Schema` of the CRDs pinned in tests/fixtures/prometheus-operator
(README.md there: repository, tag, commit, licence). They are checked as the API server's strict
field validation (`kubectl apply --server-side`, the default `--validate=strict`) would: a field
the schema does not declare is an error, unless the schema preserves unknown fields there.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import jsonschema
import yaml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prometheus-operator"
CRDS = {
    ("monitoring.coreos.com/v1", "PodMonitor"): "monitoring.coreos.com_podmonitors.yaml",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "monitoring.coreos.com_prometheusrules.yaml",
    ("monitoring.coreos.com/v1alpha1", "AlertmanagerConfig"):
        "monitoring.coreos.com_alertmanagerconfigs.yaml",
}
KINDS = {kind for _, kind in CRDS}


class _Loader(yaml.SafeLoader):
    """PyYAML reads a plain `=` as YAML 1.1's value key (tag:yaml.org,2002:value); the
    AlertmanagerConfig CRD lists it as a matcher operator, a string."""


_Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: loader.construct_scalar(node))


def _strict(schema: Any) -> Any:
    """The schema with `additionalProperties: false` wherever it lists properties and neither
    allows other keys nor preserves unknown fields (what strict field validation rejects)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@functools.cache
def schema(api_version: str, kind: str) -> dict[str, Any]:
    crd = yaml.load((FIXTURES / CRDS[(api_version, kind)]).read_text(encoding="utf-8"),
                    Loader=_Loader)  # a SafeLoader with one constructor more
    version = api_version.rpartition("/")[2]
    (entry,) = [v for v in crd["spec"]["versions"] if v["name"] == version and v["served"]]
    root: dict[str, Any] = entry["schema"]["openAPIV3Schema"]
    strict: dict[str, Any] = _strict(root)
    # ObjectMeta is not in the CRD (`metadata: {type: object}`): the API server checks it.
    strict["properties"]["metadata"] = {"type": "object"}
    return strict


def validate(obj: dict[str, Any]) -> list[str]:
    """'Kind/name: path: message' for every schema error of `obj` (a kind of CRDS)."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in CRDS:
        return [f"{key[1]}: apiVersion {key[0]!r} is not one of the pinned CRDs"]
    validator = jsonschema.Draft4Validator(schema(*key))
    name = obj.get("metadata", {}).get("name", "?")
    return [
        f"{key[1]}/{name}: {'.'.join(str(p) for p in error.absolute_path) or '.'}: {error.message}"
        for error in sorted(validator.iter_errors(obj), key=lambda e: list(map(str, e.path)))
    ]
