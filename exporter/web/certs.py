"""The certificate, key and client CA of `tls_server_config`, each checked on its own.

OpenSSL loads the certificate and the key together and, when something is wrong, names neither
file: cert and key swapped give `[SSL] PEM lib`, a key of another certificate `KEY_VALUES_MISMATCH`
or `NO_CERTIFICATE_ASSIGNED`. Read here first with `cryptography`, every problem names its field
and file and says what is wrong: not PEM, a key where a certificate belongs (or the reverse), not
parseable, encrypted, a key that is not the certificate's. A certificate outside its validity
period is not an error (Go servers, exporter-toolkit's included, serve it, and verifying clients
refuse it, which shows in their scrape error), but a warning the caller logs.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----")


def _blocks(data: bytes) -> list[str]:
    return [m.decode() for m in _BLOCK.findall(data)]


def certificates(data: bytes, where: str, errors: list[str]) -> list[x509.Certificate]:
    """The PEM certificates in `data` (`where` names its field and file); [] after an error."""
    blocks = _blocks(data)
    if not blocks:
        kind = " (it looks like DER: convert it with `openssl x509 -outform PEM`)" \
            if data[:1] == b"\x30" else ""
        errors.append(f"{where}: not PEM: no '-----BEGIN' line{kind}")
        return []
    if "CERTIFICATE" not in blocks:
        if any(b.endswith("PRIVATE KEY") for b in blocks):
            errors.append(f"{where}: holds a private key, not a certificate (are the certificate "
                          "and the key swapped?)")
        else:
            errors.append(f"{where}: no certificate in it (found {', '.join(blocks)})")
        return []
    try:
        return x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        errors.append(f"{where}: not a valid PEM certificate ({exc})")
        return []


def private_key(data: bytes, where: str, errors: list[str]) -> bytes | None:
    """The public half (DER SubjectPublicKeyInfo) of the PEM private key in `data`; None after
    an error."""
    blocks = _blocks(data)
    if not any(b.endswith("PRIVATE KEY") for b in blocks):
        if "CERTIFICATE" in blocks:
            errors.append(f"{where}: holds a certificate, not a private key (are the certificate "
                          "and the key swapped?)")
        elif blocks:
            errors.append(f"{where}: no private key in it (found {', '.join(blocks)})")
        else:
            errors.append(f"{where}: not PEM: no '-----BEGIN' line")
        return None
    if "ENCRYPTED PRIVATE KEY" in blocks or b"Proc-Type: 4,ENCRYPTED" in data:
        errors.append(f"{where}: the key is encrypted: encrypted keys are not supported")
        return None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # encrypted after all
        errors.append(f"{where}: the key is encrypted: encrypted keys are not supported")
        return None
    except (ValueError, UnsupportedAlgorithm) as exc:
        errors.append(f"{where}: not a valid PEM private key ({exc})")
        return None
    return key.public_key().public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo)


def check_pair(cert: bytes, cert_where: str, key: bytes, key_where: str, errors: list[str],
               now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> list[str]:
    """Errors into `errors`; returns the warnings (a certificate outside its validity)."""
    chain = certificates(cert, cert_where, errors)
    public = private_key(key, key_where, errors)
    if not chain or public is None:
        return []
    leaf = chain[0]
    if leaf.public_key().public_bytes(serialization.Encoding.DER,
                                      serialization.PublicFormat.SubjectPublicKeyInfo) != public:
        errors.append(f"{key_where}: not the key of the certificate in {cert_where} (the first "
                      "certificate of the file is the server's; its key must come with it)")
        return []
    return validity(leaf, cert_where, now())


def validity(cert: x509.Certificate, where: str, now: dt.datetime) -> list[str]:
    if now > cert.not_valid_after_utc:
        return [f"{where}: the certificate expired at {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} "
                "UTC: clients that verify it refuse the connection"]
    if now < cert.not_valid_before_utc:
        return [f"{where}: the certificate is not valid before "
                f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC: clients that verify it "
                "refuse the connection"]
    return []

