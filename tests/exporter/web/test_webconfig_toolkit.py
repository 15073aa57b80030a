"""--web-config-file against configurations shaped like exporter-toolkit's own test data
(tests/fixtures/web-config, written here), each with what exporter-toolkit does with it and what
the sidecar does, in its header:

    # exporter-toolkit: accepts | refuses
    # sidecar: ok | warns <part of the warning> | refuses <part of the error>
    # difference: <the row of docs/interface.md's table of deliberate differences>

Where the two disagree (one accepts, the other refuses, or the sidecar loads with a warning that
it serves otherwise) the file must name its row of that table, and the row must be there.
"""

from __future__ import annotations

import re
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path

import pytest

from exporter.web.tls import TlsSettings
from exporter.web.webconfig import RateLimit, WebConfig, WebConfigError, load
from tools.pki import CA

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures" / "web-config"
INTERFACE = ROOT / "docs" / "interface.md"


@dataclass(frozen=True)
class Expect:
    toolkit: str  # accepts | refuses
    sidecar: str  # ok | warns | refuses
    text: str  # part of the warning or error
    difference: str | None


def expect(path: Path) -> Expect:
    head = dict(re.findall(r"^# (exporter-toolkit|sidecar|difference): (.*)$",
                           path.read_text(), re.MULTILINE))
    verdict, _, text = head["sidecar"].partition(" ")
    return Expect(head["exporter-toolkit"], verdict, text, head.get("difference"))


def differences_table() -> set[str]:
    """The first column of docs/interface.md's table of deliberate differences."""
    text = INTERFACE.read_text()
    start = text.index("| where | exporter-toolkit | the sidecar | why |")
    rows = text[start:].split("\n\n", 1)[0].splitlines()[2:]
    return {row.split("|")[1].strip().replace("`", "") for row in rows}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """server.crt, server.key, client_ca.crt (a CA), empty.pem, as the fixtures name them."""
    folder = tmp_path_factory.mktemp("pki")
    ca = CA(folder / "ca")
    server = ca.issue("server", server=True)
    shutil.copy(server.cert, folder / "server.crt")
    shutil.copy(server.key, folder / "server.key")
    shutil.copy(CA(folder / "clients", "client-ca").path, folder / "client_ca.crt")
    (folder / "empty.pem").write_text("")
    return folder


def _placed(name: str, pki: Path, tmp_path: Path) -> Path:
    for item in pki.iterdir():
        if item.is_file():
            shutil.copy(item, tmp_path / item.name)
    return Path(shutil.copy(FIXTURES / name, tmp_path / name))


FILES = sorted(p.name for p in FIXTURES.glob("*.yml"))


@pytest.mark.parametrize("name", FILES)
def test_each_configuration_as_exporter_toolkit_reads_it(name: str, pki: Path,
                                                         tmp_path: Path) -> None:
    want = expect(FIXTURES / name)
    path = _placed(name, pki, tmp_path)
    if want.sidecar == "refuses":
        with pytest.raises(WebConfigError) as err:
            load(path)
        assert want.text in "\n".join(err.value.errors), err.value.errors
        return
    config, tls = load(path)
    warnings = [*config.warnings, *(tls.warnings if tls else ())]
    if want.sidecar == "warns":
        assert any(want.text in w for w in warnings), warnings
    else:
        assert want.sidecar == "ok" and warnings == [], warnings


@pytest.mark.parametrize("name", FILES)
def test_every_disagreement_is_a_listed_difference(name: str) -> None:
    want = expect(FIXTURES / name)
    assert want.toolkit in ("accepts", "refuses") and want.sidecar in ("ok", "warns", "refuses")
    disagree = (want.toolkit == "refuses") != (want.sidecar == "refuses")
    if disagree:
        assert want.difference, f"{name}: exporter-toolkit {want.toolkit} it: name the difference"
    if want.difference is not None:  # also a warning that says the sidecar serves otherwise
        assert want.difference in differences_table(), (
            f"{name}: {want.difference!r} is not a row of the differences in docs/interface.md")


def test_the_values_exporter_toolkit_would_serve(pki: Path, tmp_path: Path) -> None:
    """What the good configurations mean, field by field, as yaml.v2 decodes them."""
    def loaded(name: str) -> tuple[WebConfig, TlsSettings | None]:
        return load(_placed(name, pki, tmp_path))

    config, _ = loaded("headers.good.yml")
    assert dict(config.headers)["X-XSS-Protection"] == "1"  # a YAML number, read as a string
    assert dict(config.headers)["Strict-Transport-Security"] == \
        "max-age=31536000; includeSubDomains"
    config, _ = loaded("rate_limit_off.good.yml")
    assert config.rate_limit is None
    config, _ = loaded("rate_limit_closed.good.yml")
    assert config.rate_limit is not None and config.rate_limit.burst == 0
    assert config.rate_limit.interval == 1.0
    config, _ = loaded("rate_limit.good.yml")
    assert config.rate_limit == RateLimit(0.1, 20)
    config, _ = loaded("null_sections.good.yml")
    assert (config.headers, config.rate_limit, dict(config.users)) == ((), None, {})
    config, tls = loaded("tls_some_ciphers_client_order.good.yml")
    assert config.tls is not None and config.tls.prefer_server_cipher_suites is False
    assert config.tls.min_version == config.tls.max_version == "TLS12"
    assert tls is not None and not tls.context.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    config, _ = loaded("tls_one_curve.good.yml")
    assert config.tls is not None and config.tls.curve == "secp521r1"
    config, tls = loaded("tls_verify_if_given.good.yml")
    assert config.tls is not None and config.tls.system_roots
    assert tls is not None and tls.context.verify_mode == ssl.CERT_OPTIONAL
    assert tls.context.cert_store_stats()["x509_ca"] > 0  # the system's roots
