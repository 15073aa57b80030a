"""The sidecar itself: scraped at all, reading valid engine snapshots, rendering every
collector of /metrics, running the web configuration last written to its file, and a TLS
certificate in force that has time left."""

from __future__ import annotations

import re

from alerts.config import Config
from alerts.promql import Q, join
from alerts.rules import FOR, Alert, Promise
from alerts.templates import T
from exporter.labels import COLLECTOR_MISSING, COLLECTOR_SERIES

GROUP = "helios-exporter"

def _missing_series(c: Config) -> str:
    """Go template: what the failing collector ($labels.collector) leaves out of /metrics."""
    branches = "{{ else if".join(
        f' eq $labels.collector "{name}" }}}}{series.replace("{memory}", str(c.window_memory))}'
        for name, series in COLLECTOR_SERIES.items()
    )
    return "{{ if" + branches + "{{ else }}its series{{ end }}"


def collector_table(c: Config) -> str:
    """The runbook's table of what each failing collector leaves out and what goes blind."""
    rows = ["| collector | its series | blind meanwhile |", "| --- | --- | --- |"]
    for name, m in COLLECTOR_MISSING.items():
        names = ", ".join(f"`{s}`" for s in m.series)
        note = f" ({m.note})" if m.note else ""
        series = f"{m.what}: {names}{note}" if m.what else names
        blind = re.sub(r"\b(Helios[A-Za-z]+)", r"`\1`", m.blind.replace("{memory}", str(c.window_memory)))
        rows.append(f"| `{name}` | {series} | {blind} |")
    return "\n".join(rows) + "\n"


def _certificate_alerts(c: Config, q: Q, t: T) -> list[Alert]:
    """A ticket when the certificate in force (or the client CA) expires within
    certificate_expiry_ticket, a page within certificate_expiry_page. They read the last value
    seen within the window memory: a certificate that expired stops the scrapes of every client
    that verifies it, and the alert keeps firing then, beside HeliosExporterDown."""
    left = f"({q.last('helios_exporter_tls_certificate_expiry_timestamp_seconds')} - time())"
    ticket, page = c.certificate_ticket.seconds, c.certificate_page.seconds
    expires = t.value(
        "last_over_time(helios_exporter_tls_certificate_expiry_timestamp_seconds{{TARGET},"
        f"certificate=%q}}[{c.window_memory}])", "humanizeTimestamp",
        extra_args="$labels.certificate")
    what = ("{{ if eq $labels.certificate \"client_ca\" }}client CA (the CA that clients' "
            "certificates must chain to){{ else }}server certificate{{ end }}")
    consequence = (
        "Once it has expired, every client that verifies it (Prometheus, with tls_config as "
        "shipped) refuses the connection: the sidecar cannot be scraped, HeliosExporterDown fires, and "
        f"the restore alerts go on from the last values seen for {c.window_memory}. Renew it "
        "where it comes from (a cert-manager Certificate, the file given in the web "
        "configuration); the sidecar serves a renewed file from the next connection, without a "
        "restart.")
    return [
        Alert(
            name="HeliosExporterCertificateExpiring",
            group=GROUP,
            severity="warning",
            # The expiry is a fixed time: a few evaluations confirm it is the certificate in force.
            for_="10m",
            promised=Promise(
                "the sidecar's TLS certificate in force, or its client CA (label "
                f"`certificate`), expires in less than {c.certificate_ticket} but "
                f"{c.certificate_page} or more",
                since=3,
            ),
            expr=f"{left} < {ticket} and {left} >= {page}",
            summary=f"The Helios sidecar {t.target} serves a certificate that expires within "
                    f"{c.certificate_ticket}",
            description=(
                f"The {what} of the web configuration in force on the sidecar {t.target} expires "
                "at " + expires + " (in {{ $value | humanizeDuration }}), within "
                f"{c.certificate_ticket}. " + consequence + " It pages "
                f"(HeliosExporterCertificateExpiryImminent) from {c.certificate_page} before."
            ),
            meaning=(
                "`helios_exporter_tls_certificate_expiry_timestamp_seconds{certificate}` (its last "
                f"value within {c.window_memory}) less than {c.certificate_ticket} and at least "
                f"{c.certificate_page} ahead: the server certificate in force, or the client CA, "
                "needs renewing"
            ),
        ),
        Alert(
            name="HeliosExporterCertificateExpiryImminent",
            group=GROUP,
            severity="critical",
            # The expiry is a fixed time: a few evaluations confirm it is the certificate in force.
            for_="5m",
            promised=Promise(
                f"it expires in less than {c.certificate_page}, or has expired (from the last "
                "value seen within the window memory, so also once the expired certificate "
                "stops the scrapes)",
                since=3,
            ),
            expr=f"{left} < {page}",
            summary=f"The certificate of the Helios sidecar {t.target} expires within "
                    f"{c.certificate_page}, or has expired",
            description=(
                f"The {what} of the web configuration in force on the sidecar {t.target} "
                "{{ if lt $value 0.0 }}expired at " + expires + " (as last seen){{ else }}"
                "expires at " + expires + " (in {{ $value | humanizeDuration }}){{ end }}. "
                + consequence
            ),
            meaning=(
                "`helios_exporter_tls_certificate_expiry_timestamp_seconds{certificate}` (its last "
                f"value within {c.window_memory}) less than {c.certificate_page} ahead, or past: "
                "the sidecar is about to be, or already is, refused by the clients that verify it"
            ),
        ),
    ]


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    # No target at all, on a rule engine that scraped a sidecar of the job within the window
    # memory (it remembers one): a Prometheus replica or shard that scrapes no sidecar (another
    # job's, an empty hashmod shard) stays silent. Reads one remembered sample per
    # sidecar, not `up`'s 3 hours. Both absent() carry the selector's equality matchers as labels,
    # so `unless` matches them without an `on` (which would drop the cluster label).
    no_target = (
        f"\nor\n(\n  absent({q.sel('up')})\n  unless\n"
        f"  absent({q.seen('helios_restore_window_open')})\n)"
        if c.alert_when_no_target else ""
    )
    # absent() has no instance label: name the job alone then.
    sidecar = "{{ $labels.job }}{{ with $labels.instance }}/{{ . }}{{ end }}" + t.cluster
    return [
        Alert(
            name="HeliosExporterDown",
            group=GROUP,
            severity="warning",
            for_="5m",
            promised=Promise("Prometheus cannot scrape the sidecar"),
            expr=f"{q.sel('up')} == 0{no_target}",
            summary=f"Prometheus cannot scrape the Helios sidecar {sidecar}",
            description=(
                f"Prometheus has not scraped the Helios sidecar {sidecar} for "
                f"{FOR}"
                "{{ if not $labels.instance }} (no target of the job at all){{ end }}. "
                "Engine, offload and GPU metrics are missing; restore alerts continue from the "
                f"last values seen for {c.window_memory}. Inhibited while a restore window is "
                "open (as last seen): a planned outage, covered by the restore alerts."
            ),
            meaning="`up == 0`"
            + (" or no `up` series of the job (`absent`) where a sidecar of the job was scraped "
               f"within the window memory ({c.window_memory}): a replica or shard that scrapes "
               "none stays silent" if c.alert_when_no_target else ""),
        ),
        Alert(
            name="HeliosEngineSnapshotFailing",
            group=GROUP,
            severity="warning",
            # Below exporter.down_grace (the sidecar's --down-grace, default 60s) by at least one
            # scrape plus one evaluation interval (15s each as shipped): after the grace an
            # unreachable engine opens a restore window and the alert, which requires no open
            # window, can no longer fire (an engine that answers with an invalid snapshot opens
            # none: it fires on).
            for_="30s",
            promised=Promise("the snapshot source is failing while no window is open"),
            expr=join(
                f"{q.sel('helios_exporter_source_up', source='engine_snapshot')} == 0",
                f"{q.sel('helios_restore_window_open')} == 0",
                op=f"and {q.on}",
            ),
            summary=f"Engine snapshot source failing on {t.target} outside a restore window",
            description=(
                f"The sidecar on {t.target} cannot read a valid /debug/offload/snapshot and no "
                "restore window is open. Last good snapshot: "
                + t.value(
                    "helios_exporter_source_last_success_timestamp_seconds"
                    '{{TARGET},source="engine_snapshot"}',
                    "humanizeTimestamp",
                    "never",
                )
                + ". Offload metrics are missing; see /status for the error. If it keeps "
                f"failing for longer than the sidecar's --down-grace ({c.down_grace}), a "
                "restore window opens (cause unreachable) and this alert resolves, unless an "
                "abort discarded the window of this outage (/status outage_aborted): then it "
                "fires until the engine answers."
            ),
            meaning=(
                '`helios_exporter_source_up{source="engine_snapshot"} == 0` while '
                "`helios_restore_window_open == 0`; `for:` stays below the sidecar's "
                f"`--down-grace` ({c.down_grace}), after which a restore window opens "
                "(cause unreachable) and the alert resolves; after an `abort` of the outage's "
                "window it fires until the engine answers"
            ),
        ),
        Alert(
            name="HeliosExporterCollectorFailing",
            group=GROUP,
            severity="warning",
            # /metrics is rendered once per poll cycle (5s by default): a collector that fails on
            # one cycle's input and recovers on the next opens no ticket; one that keeps raising does.
            for_="5m",
            promised=Promise(
                "a collector of `/metrics` keeps failing (label `collector`): its series are "
                "missing, the rest of `/metrics` is valid",
                since=2,
            ),
            expr=f"{q.sel('helios_exporter_collector_success')} == 0",
            summary=(
                "Collector {{ $labels.collector }} of the Helios sidecar "
                f"{t.target} is failing"
            ),
            description=(
                "The {{ $labels.collector }} collector of the sidecar on "
                f"{t.target} has raised on every rendering of /metrics for "
                f"{FOR}: its series are left out, the rest "
                "of /metrics stays valid and is scraped. Missing: "
                + _missing_series(c)
                + ". The sidecar logged the error with its traceback (event collector_failed, "
                "collector={{ $labels.collector }}) once per cause; report it to the sidecar "
                "owners with that traceback."
            ),
            meaning=(
                "`helios_exporter_collector_success{collector} == 0`: a collector of /metrics "
                "raised and its series are missing from every scrape, while the rest of "
                "/metrics stays valid"
            ),
        ),
        Alert(
            name="HeliosExporterWebConfigReloadFailed",
            group=GROUP,
            severity="warning",
            # The file is re-read at most once a second when it changes: a certificate and key
            # written one after the other fail for a moment and load on the next check; a file that
            # stays broken for minutes keeps the old certificate and users in force.
            for_="5m",
            promised=Promise(
                "a change of `--web-config-file` (or a file it names) does not load: the last "
                "configuration that loaded stays in force",
                since=2,
            ),
            expr=f"{q.sel('helios_exporter_web_config_last_reload_successful')} == 0",
            summary=f"The Helios sidecar {t.target} keeps an old web configuration",
            description=(
                f"The sidecar on {t.target} has failed for "
                f"{FOR} to load the latest change of "
                "its --web-config-file (or of a file it names: certificate, key, client CA) and "
                "keeps the configuration that loaded at "
                + t.value(
                    "helios_exporter_web_config_last_reload_success_timestamp_seconds{{TARGET}}",
                    "humanizeTimestamp",
                )
                + ": the change did not apply. A rotated certificate is not served (the old "
                "one is, also once it has expired and clients refuse it) and a new or changed "
                "basic-auth user is refused (the old credentials still work). The sidecar logged "
                "the errors (event web_config_reload_failed). Fix the file: it is re-read when "
                "it changes; turning TLS on or off needs a restart of the sidecar."
            ),
            meaning=(
                "`helios_exporter_web_config_last_reload_successful == 0`: the latest change of "
                "`--web-config-file` (or a file it names) did not load, and the configuration "
                "that last loaded (TLS certificate, basic-auth users) stays in force"
            ),
        ),
        *_certificate_alerts(c, q, t),
    ]
