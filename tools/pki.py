"""Certificates made with `cryptography` (a dependency of the exporter) for the tests and benchmarks of TLS: a
CA, server and client certificates (good, expired, from another CA, with other SANs), bcrypt
hashes, and web configuration files (`--web-config-file`)."""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    cert: Path
    key: Path


class CA:
    def __init__(self, folder: Path, name: str = "helios-test-ca") -> None:
        self.folder = folder
        # Taken when the CA is made, never at import: a test that starts long after the import
        # (a loaded machine, a long suite) still gets certificates valid from its own start.
        self.now = now = dt.datetime.now(dt.UTC)
        folder.mkdir(parents=True, exist_ok=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                         crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False,
                                         decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256()))
        self.path = folder / f"{name}.crt"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, *, server: bool, dns: tuple[str, ...] = ("localhost",),
              ips: tuple[str, ...] = ("127.0.0.1",), expired: bool = False,
              client: bool | None = None, valid_for: dt.timedelta | None = None) -> Issued:
        """For a server (`server`) or a client (not `server`); `client=True` with `server` makes
        one for both (as cert-manager's `usages: [server auth, client auth]`). Valid for 7 days
        from an hour ago, or `valid_for` from now (a certificate about to expire)."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        if expired:
            before, after = now - dt.timedelta(days=10), now - dt.timedelta(days=1)
        else:
            before = now - dt.timedelta(hours=1)
            after = now + (valid_for if valid_for is not None else dt.timedelta(days=7))
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        usages = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
        if client or not server:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(before).not_valid_after(after)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256()))
        out = Issued(self.folder / f"{name}.crt", self.folder / f"{name}.key")
        out.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        out.key.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                              serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
        return out


def bcrypt_hash(password: str, cost: int = 4) -> str:
    """exporter-toolkit's docs show `$2y$` hashes (htpasswd's); bcrypt makes `$2b$`, the same
    algorithm: hand out the `$2y$` spelling so that both prefixes are exercised."""
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()
    return "$2y$" + hashed[4:]


def write_web_config(path: Path, *, server: Issued | None = None, users: dict[str, str] | None = None,
                     client_auth: str | None = None, client_ca: Path | None = None,
                     extra_tls: str = "", extra: str = "", cost: int = 4) -> Path:
    """`users`: name -> password, hashed with bcrypt at `cost` (4, the least, keeps tests fast;
    10 is htpasswd's and the docs' choice)."""
    lines = []
    if server is not None:
        lines += ["tls_server_config:", f"  cert_file: {server.cert}", f"  key_file: {server.key}"]
        if client_auth:
            lines.append(f"  client_auth_type: {client_auth}")
        if client_ca:
            lines.append(f"  client_ca_file: {client_ca}")
        lines += [f"  {line}" for line in extra_tls.splitlines() if line]
    if users:
        lines.append("basic_auth_users:")
        lines += [f"  {user}: '{bcrypt_hash(password, cost)}'" for user, password in users.items()]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path
