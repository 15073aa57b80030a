"""deploy/kube-prometheus-stack/: the Helios alerting inside a kube-prometheus-stack (kps) install.

Rendered by deploy/generate.py:

- values.yaml: kps's default `alertmanager.config` (tests/fixtures/kube-prometheus-stack/, a
  copy of the chart's values.yaml with its provenance) with the Helios fragment
  (alerts/alertmanager.py) merged in: kps's routes, inhibitions and receivers first and
  unchanged, then Helios's. Helm replaces lists given in values rather than merging them, so the
  file carries kps's defaults in full. helios.tmpl travels as `alertmanager.templateFiles`.
- alertmanagerconfig.yaml: the same fragment as an AlertmanagerConfig (monitoring.coreos.com
  v1alpha1), for an Alertmanager whose configuration the Helios team does not own. The operator
  adds `namespace="<its namespace>"` to its route and inhibitions and `continue: true` to its
  route, and names its receivers `<namespace>/<name>/<receiver>`.
- helios-kps.rules.yaml and prometheusrule-kps.yaml: `HeliosRestoreWindowPodInhibitor`, the
  source of the KubePodNotReady / KubeContainerWaiting inhibition (alerts/alertmanager.py), as a
  rule file and as a PrometheusRule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from alerts import alertmanager
from alerts.config import Config
from alerts.promql import Q
from alerts.render import GROUP_LIMIT
from alerts.runbooks import runbook_url

KPS_DIR = "deploy/kube-prometheus-stack"
VALUES = f"{KPS_DIR}/values.yaml"
AMC = f"{KPS_DIR}/alertmanagerconfig.yaml"
RULES = f"{KPS_DIR}/helios-kps.rules.yaml"
PROMETHEUS_RULE = f"{KPS_DIR}/prometheusrule-kps.yaml"
KPS_DEFAULT = Path("tests/fixtures/kube-prometheus-stack/alertmanager-config.yaml")
TEMPLATE = Path("deploy/alertmanager/helios.tmpl")
GROUP = "helios-kube-prometheus-stack"
LABELS = {"app.kubernetes.io/name": "helios-exporter", "app.kubernetes.io/component": "monitoring"}

VALUES_NOTE = (
    "#\n"
    "# kube-prometheus-stack values: its default Alertmanager configuration (chart 88.5.3) with the\n"
    "# Helios route, inhibitions and receivers added after its own, which are unchanged. Helm\n"
    "# replaces lists rather than merging them: keep your own routes in this copy.\n"
    "#   helm upgrade --install kube-prometheus-stack prometheus-community/kube-prometheus-stack \\\n"
    "#     -n monitoring -f deploy/kube-prometheus-stack/values.yaml\n"
    "# The receivers' URLs (example.internal) are placeholders. README.md beside this file.\n"
)
AMC_NOTE = (
    "#\n"
    "# Instead of values.yaml, not with it (both would page twice): the Helios route for an\n"
    "# Alertmanager configured by the operator from AlertmanagerConfig objects. The receivers'\n"
    "# URLs (example.internal) are placeholders. README.md beside this file.\n"
)
_MATCHER_RE = re.compile(r'^([a-zA-Z_][a-zA-Z0-9_]*)(=~|!~|!=|=)"(.*)"$')
# Alertmanager's snake_case keys and the AlertmanagerConfig CRD's camelCase ones.
_ROUTE_KEYS = {"receiver": "receiver", "group_by": "groupBy", "group_wait": "groupWait",
               "group_interval": "groupInterval", "repeat_interval": "repeatInterval"}


def pod_inhibitor(c: Config) -> dict[str, Any]:
    """Open windows of the sidecars whose instance is `<namespace>/<pod>` (the shipped
    PodMonitor's, for StatefulSet pods), with that pod as label `pod`. A Deployment's instance
    (`<namespace>/<helios-exporter.io/instance label>`) names no pod: it gets no match, and its
    KubePodNotReady notifies as before."""
    q = Q(c)
    window = q.seen("helios_restore_window_open").removesuffix("}") + ', instance=~"[^/]+/.+"}'
    return {
        "alert": alertmanager.POD_INHIBITOR,
        "expr": f'label_replace({window} == 1, "pod", "$1", "instance", "[^/]+/(.+)")',
        "labels": {"severity": "info"},
        "annotations": {
            "summary": "Restore window open on pod {{ $labels.namespace }}/{{ $labels.pod }}",
            "description": (
                "Not routed. The source of the inhibition of kube-prometheus-stack's "
                "KubePodNotReady and KubeContainerWaiting for this pod while its restore window "
                "is open (as last seen)."
            ),
            "runbook_url": runbook_url(c, "HeliosRestoreWindowOpen"),
        },
    }


def rule_file(c: Config) -> dict[str, Any]:
    return {"groups": [{"name": GROUP, "limit": GROUP_LIMIT, "rules": [pod_inhibitor(c)]}]}


def merged_config(kps_default: Mapping[str, Any], c: Config) -> dict[str, Any]:
    """kps's default configuration, unchanged, with the Helios fragment after each of its lists."""
    fragment = alertmanager.fragment(c)
    merged = dict(kps_default)
    merged["inhibit_rules"] = [*kps_default.get("inhibit_rules", []), *fragment["inhibit_rules"]]
    route = dict(kps_default["route"])
    route["routes"] = [*route.get("routes", []), fragment["route"]]
    merged["route"] = route
    merged["receivers"] = [*kps_default.get("receivers", []), *fragment["receivers"]]
    return merged


def values(c: Config, root: Path) -> dict[str, Any]:
    kps_default = yaml.safe_load((root / KPS_DEFAULT).read_text(encoding="utf-8"))
    return {
        "alertmanager": {
            "config": merged_config(kps_default, c),
            # Mounted beside the config; kps's default `templates` glob loads it.
            "templateFiles": {"helios.tmpl": (root / TEMPLATE).read_text(encoding="utf-8")},
        },
    }


def _matcher(text: str) -> dict[str, str]:
    match = _MATCHER_RE.match(text)
    if match is None:
        raise ValueError(f"matcher {text!r} is not name<op>\"value\"")
    name, op, value = match.groups()
    return {"name": name, "value": value, "matchType": op}


def _amc_route(r: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {_ROUTE_KEYS[k]: v for k, v in r.items() if k in _ROUTE_KEYS}
    out["matchers"] = [_matcher(m) for m in r.get("matchers", [])]
    if r.get("routes"):
        out["routes"] = [_amc_route(child) for child in r["routes"]]
    return out


def alertmanager_config(c: Config) -> dict[str, Any]:
    fragment = alertmanager.fragment(c)
    receivers = []
    for r in fragment["receivers"]:
        receiver: dict[str, Any] = {"name": r["name"]}
        if r.get("webhook_configs"):
            receiver["webhookConfigs"] = [
                {"url": w["url"], "sendResolved": w["send_resolved"]} for w in r["webhook_configs"]
            ]
        receivers.append(receiver)
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": "helios-exporter", "labels": dict(LABELS)},
        "spec": {
            "route": _amc_route(fragment["route"]),
            "inhibitRules": [
                {
                    "sourceMatch": [_matcher(m) for m in rule["source_matchers"]],
                    "targetMatch": [_matcher(m) for m in rule["target_matchers"]],
                    "equal": list(rule["equal"]),
                }
                for rule in fragment["inhibit_rules"]
            ],
            "receivers": receivers,
        },
    }


def prometheus_rule(c: Config) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "helios-exporter-kps-rules", "labels": dict(LABELS)},
        "spec": rule_file(c),
    }
