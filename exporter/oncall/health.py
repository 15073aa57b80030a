"""The sidecar's own health on the report: collectors of /metrics that fail (and what is missing
from /metrics meanwhile) and the certificates of the web configuration in force (and when they
expire). Read from `/status` `collectors` and `web` (v3), defensively: a sidecar that does not
report them shows them as unknown."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from exporter.defaults import CERT_EXPIRY_PAGE, CERT_EXPIRY_TICKET
from exporter.oncall.model import FAILED, OK, UNKNOWN, At, Cell, Code, Table, Tone, Until, Word
from exporter.oncall.read import code, mapping, number, text

CERTIFICATES = {"server": "server certificate", "client_ca": "client CA"}


@dataclass(frozen=True, slots=True)
class Failing:
    name: str
    cause: Any
    missing: Any


def failing_collectors(status: Mapping[str, Any]) -> list[Failing] | None:
    """The collectors that failed at the latest rendering; None when /status does not say."""
    collectors = status.get("collectors")
    if not isinstance(collectors, list):
        return None
    return [Failing(str(c.get("collector")), c.get("cause"), c.get("missing"))
            for c in collectors if isinstance(c, Mapping) and c.get("ok") is False]


def collectors_cell(status: Mapping[str, Any]) -> Cell:
    collectors = status.get("collectors")
    failing = failing_collectors(status)
    if failing is None or not isinstance(collectors, list):
        return (UNKNOWN, "(this sidecar's /status does not report them)")
    if not failing:
        return (OK, f"all {len(collectors)} render")
    return (FAILED, f"{len(failing)} of {len(collectors)} fail:",
            *(Code(f.name) for f in failing), "(below)")


def collectors_table(failing: list[Failing]) -> Table:
    return Table("Collectors failing: their series are missing from /metrics",
                 ("collector", "raised", "missing from /metrics"),
                 tuple(((Code(f.name),), (code(f.cause),), (text(f.missing),)) for f in failing),
                 empty="none")


@dataclass(frozen=True, slots=True)
class Certificate:
    kind: str  # server, client_ca
    not_after: float | None
    subject: Any
    where: Any

    @property
    def label(self) -> str:
        return CERTIFICATES.get(self.kind, self.kind)

    def left(self, now: float) -> float | None:
        return None if self.not_after is None else self.not_after - now

    def tone(self, now: float) -> Tone:
        left = self.left(now)
        if left is None:
            return "neutral"
        return "bad" if left < CERT_EXPIRY_PAGE else "warn" if left < CERT_EXPIRY_TICKET else "good"

    def word(self, now: float) -> Word:
        left = self.left(now)
        if left is None:
            return UNKNOWN
        if left < 0:
            return Word("EXPIRED", "bad")
        tone = self.tone(now)
        return OK if tone == "good" else Word("expires soon", tone)

    def when(self, now: float) -> Cell:
        """`2026-12-02 00:53:20 UTC, in 2 d 0 h (CN=... from tls_server_config.cert_file ...)`"""
        left = self.left(now)
        if self.not_after is None or left is None:
            return (UNKNOWN,)
        return (At(self.not_after), ",", Until(left), "(", code(self.subject), "from",
                code(self.where), ")")

    def cell(self, now: float) -> Cell:
        word = self.word(now)
        return (word, "until", *self.when(now)) if word is OK else (word, *self.when(now))


def certificates(status: Mapping[str, Any]) -> list[Certificate]:
    web = mapping(status.get("web"))
    found = web.get("certificates")
    return [Certificate(str(c.get("certificate")), number(c.get("not_after")), c.get("subject"),
                        c.get("where"))
            for c in (found if isinstance(found, list) else []) if isinstance(c, Mapping)]


def web_rows(status: Mapping[str, Any], now: float) -> list[tuple[str, Cell]]:
    """The web configuration's rows of the Sidecar section (none without one)."""
    web = status.get("web")
    if not isinstance(web, Mapping):
        return []
    rows: list[tuple[str, Cell]] = [("web configuration", (
        code(web.get("file")), "; TLS", text(web.get("tls")), "; basic-auth users",
        text(web.get("basic_auth_users"))))]
    if web.get("last_reload_ok") is False:
        rows.append(("last change", (FAILED, "did not load: the configuration that loaded at",
                                     *_at(web.get("last_reload_success")), "is in force")))
    refused = web.get("refused_users")
    if isinstance(refused, list) and refused:
        rows.append(("refused users", (FAILED, *(Code(str(u)) for u in refused),
                                       "(the deployment example's hash)")))
    for cert in certificates(status):
        rows.append((cert.label, cert.cell(now)))
    return rows


def _at(value: Any) -> Cell:
    at = number(value)
    return (UNKNOWN,) if at is None else (At(at),)
