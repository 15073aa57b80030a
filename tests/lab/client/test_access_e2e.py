"""`phase`, `probe` and `evidence` against a real sidecar behind its web configuration: TLS with
a certificate from a test CA and basic auth on every path but the phases, which the events
token guards (`GET /experiment/phases` and `POST /experiment/phases` alike). The access flags
are those of `status` (lab/client/access.py), and a refusal says which credential was refused."""

from __future__ import annotations

import json
import ssl
from pathlib import Path

import httpx

from tests.lab.rig import Rig, evidence
from tools.harness import Procs
from tools.pki import CA, write_web_config

PASSWORD = "correct horse battery staple"


def test_the_commands_behind_tls_and_basic_auth(procs: Procs, tmp_path: Path,
                                               corpora: dict[str, Path]) -> None:
    ca = CA(tmp_path / "pki")
    web = write_web_config(tmp_path / "web.yml", server=ca.issue("sidecar", server=True),
                           users={"lab": PASSWORD})
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")
    creds = ("--user", "lab", "--password-file", str(password))
    rig = Rig(procs, tmp_path, sidecar_args=("--web-config-file", str(web)),
              access=(*creds, "--ca-file", str(ca.path)), scheme="https",
              verify=ssl.create_default_context(cafile=str(ca.path)))

    # The whole probe with the flags: its phases (bearer token) and its evidence (basic auth).
    done = rig.probe(tmp_path / "p", corpora["small-12"], "--name", "tls")
    assert done.returncode == 0, done.stderr
    assert [p["verdict"] for p in evidence(tmp_path / "p")["probes"]] == ["order_sensitive"]
    done = rig.evidence(tmp_path / "e", "--probe-record", str(tmp_path / "p"))
    assert done.returncode == 0, done.stderr
    assert [p["sent"] for p in evidence(tmp_path / "e")["passes"]] == [12, 12]
    # The same flags serve `phase` (its POST carries the bearer token, not the basic auth).
    assert rig.phase("begin", "by-hand/1").returncode == 0
    assert json.loads(rig.phase("end", "by-hand/1").stdout)["phase"]["valid"] is True

    def evidence_with(*access: str, token: bool = True) -> str:
        done = rig.evidence(tmp_path / "x", *access, token=token)
        assert done.returncode == 1, done.stderr
        return done.stderr.strip()

    ca_file = ("--ca-file", str(ca.path))
    rig.access = ()
    # The sidecar has an events token: it guards GET /experiment/phases, basic auth steps aside.
    assert evidence_with(*creds, *ca_file, token=False).endswith(
        "GET /experiment/phases answered 401: missing or wrong bearer token (check --token-file: "
        "it must hold the sidecar's --events-token-file token)")
    # Every other path still asks for basic auth.
    metrics = httpx.get(rig.sidecar + "/metrics", verify=rig.verify, timeout=10)
    assert metrics.status_code == 401
    assert metrics.headers["www-authenticate"].startswith("Basic")
    assert "TLS certificate not trusted (" in evidence_with(*creds)
    assert "give its CA with --ca-file, or --insecure" in evidence_with(*creds)
    done = rig.evidence(tmp_path / "insecure", *creds, "--insecure")
    assert done.returncode == 0, done.stderr

    # A wrong bearer token is named as such, not as a basic-auth problem.
    rig.access = (*creds, *ca_file)
    # (A file of the client's own: the sidecar reads its token file again when it changes.)
    rig.client_token = tmp_path / "wrong-token"
    rig.client_token.write_text("not-the-Token-0123456789abcdef\n")
    done = rig.phase("begin", "by-hand/2")
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        "POST /experiment/phases answered 401: missing or wrong bearer token (check "
        "--token-file: it must hold the sidecar's --events-token-file token)")
    # A probe that cannot read the phases stops before it sends anything.
    rig.access = ca_file
    done = rig.probe(tmp_path / "q", corpora["small-12"], "--name", "nothing")
    assert done.returncode == 1
    assert "(nothing was sent)" in done.stderr and "check --token-file" in done.stderr
    # Flags that cannot be used are bad input (exit 2), as for `status`.
    rig.access = ("--user", "lab", *ca_file)
    done = rig.evidence(tmp_path / "y")
    assert done.returncode == 2 and "--user and --password-file go together" in done.stderr
