"""The runbooks' common set-up: how on-call reaches the sidecar, its engine and the Alertmanager
on each shipped deployment (Kubernetes, Compose, plain Prometheus), one block each, all setting
the same shell variables, so that every command of a runbook is the same on all of them. Written
once, into docs/runbooks/README.md between markers, by alerts/generate.py; each runbook's Set up
section is the short paragraph that links to it (between the same markers).
tests/repo/runbooks/test_runbooks.py holds each block against the deployment's manifests.
"""

from __future__ import annotations

import re
from pathlib import Path

from alerts.config import ConfigError
from exporter.defaults import LISTEN_PORT

RUNBOOK_DIR = Path("docs/runbooks")
SETUP_PAGE = RUNBOOK_DIR / "README.md"  # the common set-up every runbook links to
BEGIN = "<!-- BEGIN GENERATED: setup (alerts/runbook_setup.py) -->"
END = "<!-- END GENERATED: setup -->"

# Each runbook's Set up section: a link to the common page.
_LINK = """\
Once per shell, run the block of your deployment from the [runbooks' set-up](README.md#set-up),
with `instance` and `cluster` copied from the page: it sets `INSTANCE`, `CLUSTER`, `SIDECAR`,
`ENGINE`, `AM_URL` and `TOKEN`, which every command below uses, and shows where to see the
sidecar's status. The queries below take the same two values for `<instance>` and `<cluster>`."""

_SECTION = """\
Once per shell, the block of your deployment. Copy `instance` and `cluster` from the page: its
title names the target as `helios-exporter/<instance>`, followed by `in cluster <cluster>` where
there is one (the values below are the shipped examples'; leave `CLUSTER=` empty when the page
names none). A runbook's queries take the same two values for `<instance>` and `<cluster>`.

```sh
# Kubernetes (deploy/kubernetes; the PodMonitor makes instance <namespace>/<name>)
NS=helios NAME=helios-engine-a CLUSTER=      # instance="helios/helios-engine-a"
INSTANCE=$NS/$NAME
POD=$(kubectl -n "$NS" get pods -l helios-exporter.io/instance="$NAME" -o name | head -n 1)
POD=${POD:-pod/$NAME}                        # a StatefulSet's pod: NAME is the pod's name
kubectl -n "$NS" port-forward "$POD" {port}:{port} 18000:8000 >/dev/null &
kubectl -n monitoring port-forward svc/alertmanager-operated 9093:9093 >/dev/null &
SIDECAR=http://127.0.0.1:{port} ENGINE=http://127.0.0.1:18000 AM_URL=http://127.0.0.1:9093
TOKEN=$(kubectl -n "$NS" exec "$POD" -c helios-exporter -- cat /etc/helios-exporter/events/token)
sleep 2; curl -sSf "$SIDECAR/healthz" || echo "SIDECAR UNREACHABLE: $SIDECAR"
```

```sh
# Kubernetes with TLS and basic auth (deploy/kubernetes-tls): the same over HTTPS, with a password
NS=helios NAME=helios-engine-a CLUSTER=      # instance="helios/helios-engine-a"
INSTANCE=$NS/$NAME
POD=$(kubectl -n "$NS" get pods -l helios-exporter.io/instance="$NAME" -o name | head -n 1)
POD=${POD:-pod/$NAME}                        # a StatefulSet's pod: NAME is the pod's name
kubectl -n "$NS" port-forward "$POD" {port}:{port} 18000:8000 >/dev/null &
kubectl -n monitoring port-forward svc/alertmanager-operated 9093:9093 >/dev/null &
SIDECAR=https://127.0.0.1:{port} ENGINE=http://127.0.0.1:18000 AM_URL=http://127.0.0.1:9093
TOKEN=$(kubectl -n "$NS" exec "$POD" -c helios-exporter -- cat /etc/helios-exporter/events/token)
export CURL_HOME=$(mktemp -d); C=$CURL_HOME  # curl reads $C/.curlrc: the CA and the password
kubectl -n "$NS" exec "$POD" -c helios-exporter -- cat /etc/helios-exporter/tls/ca.crt > "$C/ca.crt"
SECRET=secret/helios-exporter-scrape         # the user Prometheus scrapes with
U=$(kubectl -n "$NS" get "$SECRET" -o jsonpath='{.data.username}' | base64 -d)
kubectl -n "$NS" get "$SECRET" -o jsonpath='{.data.password}' | base64 -d > "$C/password"
printf 'cacert = "%s"\\nuser = "%s:%s"\\n' "$C/ca.crt" "$U" "$(cat "$C/password")" > "$C/.curlrc"
export HELIOS_EXPORTER_CA_FILE=$C/ca.crt HELIOS_EXPORTER_USER=$U HELIOS_EXPORTER_PASSWORD_FILE=$C/password
sleep 2; curl -sSf "$SIDECAR/healthz" || echo "SIDECAR UNREACHABLE: $SIDECAR"
```

```sh
# Compose (deploy/compose), from the repository root; instance is exporter:{port}
INSTANCE=exporter:{port} CLUSTER=
SIDECAR=http://127.0.0.1:{port} ENGINE=http://127.0.0.1:8000 AM_URL=http://127.0.0.1:9093
TOKEN=$(docker compose -f deploy/compose/docker-compose.yaml exec -T exporter cat /run/secrets/events-token)
curl -sSf "$SIDECAR/healthz" || echo "SIDECAR UNREACHABLE: $SIDECAR"
```

```sh
# Plain Prometheus (deploy/prometheus/prometheus-static.yml); instance is <host>:{port}
HOST=gpu-node-01.example.internal CLUSTER=   # instance="gpu-node-01.example.internal:{port}"
INSTANCE=$HOST:{port} SIDECAR=http://$HOST:{port} ENGINE=http://$HOST:8000
AM_URL=http://alertmanager.example.internal:9093   # alerting.alertmanagers of your prometheus.yml
TOKEN_FILE=/run/secrets/helios-events-token  # yours: the file given to the sidecar's --events-token-file
TOKEN=$(cat "$TOKEN_FILE")                   # on the sidecar's host, or where you keep a copy
curl -sSf "$SIDECAR/healthz" || echo "SIDECAR UNREACHABLE: $SIDECAR"
```

On Kubernetes, `kubectl port-forward` goes through the API server, so the example's
NetworkPolicy (it admits only Prometheus and the restore tooling to port {port}) does not stop
it; 18000 is the engine's port 8000 (`engine_url` in `/status`), and `alertmanager-operated` is
the Service the Prometheus Operator gives every Alertmanager (use yours if it differs). A
forward ends with its pod: after the pod was replaced, run the block again. With TLS and basic
auth (the sidecar's `--web-config-file`), every later `curl` reads the CA and the user from
`$CURL_HOME/.curlrc` and `helios-exporter status` its `--ca-file`, `--user` and
`--password-file` from the `HELIOS_EXPORTER_*` variables, so a runbook's commands stay the same;
the events API keeps its bearer token. The block uses Prometheus's scrape user (a password with
`"` or `\\` needs them escaped with `\\` in `.curlrc`); a user of your own in the web
configuration works the same way. A plain deployment with TLS: put the same two
lines in a `.curlrc` and export the same variables. `SIDECAR
UNREACHABLE` means nothing answered: the sidecar, its pod or its host is down (then go by what
Prometheus last saw, and see [HeliosExporterDown](HeliosExporterDown.md)), or the forward
ended.

**See it:** the [status page](../status-page.md) (the window, its deadlines and time left, the
checks and why they failed, each source's health) at `$SIDECAR/` in a browser
(`http://127.0.0.1:{port}/` after the Kubernetes or Compose block), or the same in a terminal:

```sh
helios-exporter status --sidecar "$SIDECAR" --watch
```

```sh
# Kubernetes without TLS, with nothing installed here: the sidecar's image has the command
kubectl -n "$NS" exec -it "$POD" -c helios-exporter -- \\
  helios-exporter status --sidecar http://127.0.0.1:{port} --watch
```"""


def setup_section() -> str:
    """The common page's section: every deployment's block."""
    return _SECTION.replace("{port}", str(LISTEN_PORT))


def _splice(rel: Path, current: str, body: str) -> str:
    """`current` with the lines between the setup markers replaced by `body`."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.DOTALL)
    if not pattern.search(current):
        raise ConfigError(f"{rel}: marker {BEGIN!r} ... {END!r} not found")
    replacement = f"{BEGIN}\n{body}\n{END}"
    return pattern.sub(lambda _match: replacement, current)


def render_runbook(name: str, current: str) -> str:
    """`current` with its Set up section (the link to the common page) between the markers."""
    return _splice(RUNBOOK_DIR / f"{name}.md", current, _LINK)


def runbook_outputs(names: list[str], root: Path) -> dict[Path, str]:
    """The common set-up page and every runbook of `names`, their Set up sections current."""
    if not (root / SETUP_PAGE).exists():
        raise ConfigError(f"{SETUP_PAGE}: missing (the set-up every runbook links to)")
    out = {SETUP_PAGE: _splice(SETUP_PAGE, (root / SETUP_PAGE).read_text(encoding="utf-8"),
                               setup_section())}
    for name in names:
        path = RUNBOOK_DIR / f"{name}.md"
        if not (root / path).exists():
            raise ConfigError(f"{path}: missing (every alert has a runbook)")
        out[path] = render_runbook(name, (root / path).read_text(encoding="utf-8"))
    return out
