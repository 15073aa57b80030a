"""The Helios part of an Alertmanager configuration: routes, inhibitions and receivers, once.

`fragment(config)` is what an Alertmanager that also serves other teams needs from this project:
one route (matching the Helios alerts by name) with the child routes of
deploy/alertmanager/alertmanager.yml, the inhibitions, and the three receivers. It is rendered
into alerts/alertmanager-fragment.yaml (alerts/generate.py) and merged into kube-prometheus-stack's
default configuration in deploy/kube-prometheus-stack/ (deploy/kps.py); the standalone
deploy/alertmanager/alertmanager.yml holds the same child routes and Helios inhibitions (a test
ties them).

Besides the project's own two inhibitions, two silence kube-prometheus-stack's alerts that a
planned restore explains:

- `TargetDown` (kps's general rules: the share of a job's targets down, per cluster, namespace,
  job and service) while a restore window is open on a sidecar of the same cluster, namespace and
  job. It cannot name one target, so one open window silences it for the whole job; a sidecar
  that is down outside its window still raises its own `HeliosExporterDown`.
- `KubePodNotReady` / `KubeContainerWaiting` (kube-state-metrics, per pod) of the pod a window
  is open on, through `HeliosRestoreWindowPodInhibitor` (deploy/kps.py), which carries a `pod`
  label where the sidecar's `instance` is `<namespace>/<pod>`.
"""

from __future__ import annotations

from typing import Any

from alerts.config import Config

# The restore incident: the pages of one target and the notices that say how they resolved,
# one notification group per target.
RESTORE_INCIDENT = (
    "HeliosRequestCutoffBreached",
    "HeliosRestoreBoundBreached",
    "HeliosRestoreCheckFailed",
    "HeliosRestoreWindowClosed",
    "HeliosRestoreWindowForgotten",
)
# Every alert of this project is named Helios...; the route takes them by name, not severity, so
# that no other team's critical alert reaches the Helios pager.
HELIOS_MATCHER = 'alertname=~"Helios.+"'
POD_INHIBITOR = "HeliosRestoreWindowPodInhibitor"
KPS_TARGET_DOWN = "TargetDown"
KPS_POD_ALERTS = ("KubePodNotReady", "KubeContainerWaiting")
# Placeholders, as in deploy/alertmanager/alertmanager.yml: replace with your pager and tickets.
PLACEHOLDER_URL = "http://alert-bridge.example.internal:9095/helios"


def routes(c: Config) -> list[dict[str, Any]]:
    """The child routes of the Helios route, production timers."""
    incident = "|".join(RESTORE_INCIDENT)
    return [
        {
            "matchers": [f'alertname=~"{incident}"'],
            "receiver": "helios-page",
            "group_by": list(c.join_labels),
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "30m",
        },
        {
            "matchers": ['severity="critical"'],
            "receiver": "helios-page",
            "group_wait": "10s",
            "group_interval": "1m",
            "repeat_interval": "30m",
        },
        {"matchers": ['severity="warning"'], "receiver": "helios-ticket", "repeat_interval": "12h"},
        {"matchers": ['severity="info"'], "receiver": "helios-null"},
    ]


def helios_inhibit_rules(c: Config) -> list[dict[str, Any]]:
    """The project's own inhibitions (every Alertmanager that routes Helios alerts)."""
    return [
        {
            "source_matchers": ['alertname="HeliosRestoreBoundBreached"'],
            "target_matchers": ['alertname="HeliosRestoreBoundAtRisk"'],
            "equal": list(c.join_labels),
        },
        {
            "source_matchers": ['alertname="HeliosRestoreWindowOpen"'],
            "target_matchers": ['alertname="HeliosExporterDown"'],
            "equal": list(c.join_labels),
        },
    ]


def kps_inhibit_rules(c: Config) -> list[dict[str, Any]]:
    """kube-prometheus-stack's alerts that an open restore window explains."""
    return [
        {
            "source_matchers": ['alertname="HeliosRestoreWindowOpen"'],
            "target_matchers": [f'alertname="{KPS_TARGET_DOWN}"'],
            "equal": [c.cluster_label, "namespace", "job"],
        },
        {
            "source_matchers": [f'alertname="{POD_INHIBITOR}"'],
            "target_matchers": [f'alertname=~"{"|".join(KPS_POD_ALERTS)}"'],
            "equal": [c.cluster_label, "namespace", "pod"],
        },
    ]


def _text(channel: str, send_resolved: bool) -> dict[str, Any]:
    """The notification as text, rendered by deploy/alertmanager/helios.tmpl (Slack here)."""
    return {
        "api_url": f"https://chat.example.internal/hooks/{channel}",
        "channel": f"#{channel}",
        "send_resolved": send_resolved,
        "title": '{{ template "helios.title" . }}',
        "text": '{{ template "helios.text" . }}',
    }


def receivers() -> list[dict[str, Any]]:
    """Placeholders (example.internal): replace them with your pager and ticket bridges."""
    return [
        {"name": "helios-page",
         "webhook_configs": [{"url": f"{PLACEHOLDER_URL}/page", "send_resolved": True}],
         "slack_configs": [_text("helios-oncall", True)]},
        {"name": "helios-ticket",
         "webhook_configs": [{"url": f"{PLACEHOLDER_URL}/ticket", "send_resolved": False}],
         "slack_configs": [_text("helios-tickets", False)]},
        {"name": "helios-null"},
    ]


def route(c: Config) -> dict[str, Any]:
    """The one route to add to another configuration's top-level `routes`."""
    return {
        "matchers": [HELIOS_MATCHER],
        "receiver": "helios-ticket",
        "group_by": ["alertname", *c.join_labels],
        "group_wait": "30s",
        "group_interval": "5m",
        "repeat_interval": "4h",
        "routes": routes(c),
    }


def fragment(c: Config) -> dict[str, Any]:
    return {
        "route": route(c),
        "inhibit_rules": helios_inhibit_rules(c) + kps_inhibit_rules(c),
        "receivers": receivers(),
    }
