"""The sidecar's own health on the on-call view: a collector that raised (with what is missing
from /metrics) and the certificates of the web configuration (with when they expire), on the
page and in the terminal, from `/status` as the sidecar answers it."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography import x509

from exporter.config import Config
from exporter.oncall import report
from exporter.oncall.html import page
from exporter.sidecar import build
from lab.status import text
from tests.exporter.oncall import samples
from tests.exporter.oncall.samples import NOW
from tests.helpers import StubEngine
from tools.harness import families, sample
from tools.pki import CA, write_web_config

DAY = 86400.0


def summary(status: dict[str, Any]) -> list[str]:
    return [text.cell(line)[0] for line in report.build(status, NOW).summary]


def terminal(status: dict[str, Any]) -> str:
    """The terminal view with runs of blanks (column alignment, wrapping) as one space."""
    return re.sub(r"\s+", " ", text.render(report.build(status, NOW), width=100))


def test_a_failing_collector_is_named_with_what_is_missing() -> None:
    status = samples.failing_collector("gpu")
    rep = report.build(status, NOW)
    assert rep.tone == "bad"
    lines = summary(status)
    assert ("FAILED collector gpu raised KeyError at gpu.py:88; missing from /metrics: the GPU "
            "series (helios_gpu_*); HeliosGpuLost and HeliosGpuPowerAtLimit cannot fire") in lines
    view = terminal(status)
    assert "collectors FAILED 1 of 12 fail: gpu (below)" in view
    assert ("Collectors failing: their series are missing from /metrics: collector raised "
            "missing from /metrics gpu KeyError at gpu.py:88 the GPU series") in view
    assert "docs/runbooks/HeliosExporterCollectorFailing.md" in view
    html = page(status, NOW)
    assert "KeyError at gpu.py:88" in html and "HeliosExporterCollectorFailing" in html


def test_every_collector_rendering_says_so_and_an_old_sidecar_says_nothing() -> None:
    assert "collectors ok all 12 render" in terminal(samples.base())
    old = samples.base()
    del old["collectors"]
    assert "collectors unknown (this sidecar's /status does not report them)" in terminal(old)


@pytest.mark.parametrize(("left", "tone", "word", "runbook"), [
    (30 * DAY, "good", None, None),
    (10 * DAY, "warn", "expires soon", "HeliosExporterCertificateExpiring"),
    (2 * DAY, "bad", "expires soon", "HeliosExporterCertificateExpiryImminent"),
    (-1 * DAY, "bad", "EXPIRED", "HeliosExporterCertificateExpiryImminent"),
])
def test_the_certificate_in_force_and_when_it_expires(left: float, tone: str, word: str | None,
                                                      runbook: str | None) -> None:
    status = samples.with_tls(left, client_ca_left=60 * DAY)
    rep = report.build(status, NOW)
    assert rep.tone == tone
    lines = [line for line in summary(status) if "certificate" in line]
    view = terminal(status)
    assert "client CA ok until 2027-01-29 00:53:20 UTC, in 60 d 0 h (CN=monitoring-ca" in view
    if word is None:
        assert lines == [] and "renew it" not in view
        assert "server certificate ok until 2026-12-30 00:53:20 UTC, in 30 d 0 h" in view
        return
    (line,) = lines
    assert line.startswith(f"{word} the server certificate of the web configuration: ")
    assert "(CN=helios-exporter from tls_server_config.cert_file" in line
    assert f"server certificate {word} " in view
    assert f"docs/runbooks/{runbook}.md" in view
    assert word in page(status, NOW)


def test_a_change_that_did_not_load_and_a_refused_user_are_shown() -> None:
    status = samples.with_tls(30 * DAY)
    status["web"].update(last_reload_ok=False, refused_users=["prometheus"])
    view = terminal(status)
    assert "last change FAILED did not load" in view
    assert "refused users FAILED prometheus (the deployment example's hash)" in view


class Raising:
    """A collector with a bug: it raises on every rendering."""

    def collect(self) -> Any:
        raise KeyError("slabs")


def test_a_real_sidecar_reports_its_failing_collector_and_its_certificate(tmp_path: Path) -> None:
    """Built as `serve` builds it (`sidecar.build`), with a collector that raises and a server
    certificate that expires in two days: /metrics exports the expiry, /status and the page say
    what fails, what is missing, and that the certificate expires soon."""
    ca = CA(tmp_path / "pki")
    server = ca.issue("soon", server=True, valid_for=dt.timedelta(days=2))
    web = write_web_config(tmp_path / "web.yml", server=server, client_auth="RequireAndVerifyClientCert",
                           client_ca=ca.path)
    config = Config(engine_url="http://engine.invalid", state_dir=tmp_path / "state", no_nvml=True,
                    web_config_file=web)
    sidecar = build(config, transport=httpx.MockTransport(StubEngine()), process=Raising())

    async def go() -> None:
        await sidecar.loop.cycle()
        await sidecar.client.aclose()
    try:
        asyncio.run(go())
        fams = families(sidecar.cache.render(False))
        status = sidecar.status()
        html = sidecar.page()
    finally:
        sidecar.close()
    not_after = x509.load_pem_x509_certificate(server.cert.read_bytes()).not_valid_after_utc
    assert sample(fams, "helios_exporter_tls_certificate_expiry_timestamp_seconds",
                  certificate="server") == not_after.timestamp()
    assert sample(fams, "helios_exporter_tls_certificate_expiry_timestamp_seconds",
                  certificate="client_ca") == ca.cert.not_valid_after_utc.timestamp()
    assert sample(fams, "helios_exporter_collector_success", collector="process") == 0
    (failing,) = [c for c in status["collectors"] if not c["ok"]]
    assert failing["collector"] == "process" and failing["cause"].startswith("KeyError at ")
    assert "'slabs'" not in json.dumps(status)  # the message stays in the log
    assert failing["missing"].startswith("the sidecar's process series (process_*")
    assert [c["certificate"] for c in status["web"]["certificates"]] == ["server", "client_ca"]
    now = time.time()
    view = re.sub(r"\s+", " ", text.render(report.build(status, now), width=100))
    assert "FAILED collector process raised KeyError at" in view
    assert "expires soon the server certificate of the web configuration:" in view
    assert "CN=soon" in view and "in 1 d 23 h" in view
    assert "FAILED collector process raised KeyError at" in re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))
