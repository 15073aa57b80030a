"""How the command-line clients reach a sidecar behind its web configuration (docs/interface.md
section 3.1): basic auth and TLS from `--user`, `--password-file`, `--ca-file` and `--insecure`.

`status`, `phase`, `evidence`, `probe` and `observer-cost` take the same four flags (OPTIONS), so
one shell variable of flags serves every command, and build their HTTP client here. What a
refused request means is said here too, so every command words a 401 and a TLS failure alike.
"""

from __future__ import annotations

import argparse
import re
import ssl
from typing import Any

import httpx

from exporter.options import Option


class AccessError(ValueError):
    """The flags cannot be used (a command exits 2); the message says why."""


OPTIONS = (
    Option("--user", "text", None, "basic-auth user, when the sidecar requires it"),
    Option("--password-file", "path", None, "file holding the basic-auth password (one line)",
           metavar="F"),
    Option("--ca-file", "path", None, "CA certificate(s) that sign the sidecar's TLS certificate",
           metavar="F"),
    Option("--insecure", "bool", False, "do not verify the sidecar's TLS certificate"),
)


def basic_auth(args: argparse.Namespace) -> httpx.BasicAuth | None:
    if args.user is None and args.password_file is None:
        return None
    if args.user is None or args.password_file is None:
        raise AccessError("--user and --password-file go together")
    try:
        password = args.password_file.read_text().rstrip("\r\n")
    except OSError as exc:
        raise AccessError(f"cannot read --password-file {args.password_file}: "
                          f"{exc.strerror or exc}") from None
    return httpx.BasicAuth(args.user, password)


def verify(args: argparse.Namespace) -> bool | ssl.SSLContext:
    if args.insecure:
        return False
    if args.ca_file is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(args.ca_file))
    except (OSError, ssl.SSLError) as exc:
        raise AccessError(f"cannot use --ca-file {args.ca_file}: {exc}") from None


def client(args: argparse.Namespace, *, timeout: float, user_agent: str,
           transport: httpx.BaseTransport | None = None, base_url: str = "",
           headers: dict[str, str] | None = None) -> httpx.Client:
    """An HTTP client with the basic auth and TLS settings of the flags (AccessError when they
    cannot be used)."""
    return httpx.Client(auth=basic_auth(args), verify=verify(args), timeout=timeout,
                        follow_redirects=False, transport=transport, base_url=base_url,
                        headers={"User-Agent": user_agent, **(headers or {})})


def why(exc: BaseException) -> str:
    """The root cause of a transport error, as words: "connection refused"."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return (f"TLS certificate not trusted ({seen.verify_message}): give its CA with "
                    "--ca-file, or --insecure")
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror[:1].lower() + seen.strerror[1:]
        seen = seen.__cause__ or seen.__context__
    message = str(exc) or type(exc).__name__
    match = re.match(r"\[Errno -?\d+\] (.*)", message)
    message = match.group(1) if match else message
    return message[:1].lower() + message[1:]


def basic_auth_refused(response: httpx.Response) -> str:
    """What a 401 to a basic-auth request (every GET of the sidecar) means."""
    if "authorization" in response.request.headers:
        return "user or password rejected"
    return "the sidecar requires basic auth: give --user and --password-file"


def json_object(response: httpx.Response) -> dict[str, Any] | None:
    """The answer's JSON object; None when it is not one (a login page, a list, not JSON): the
    sign of something other than a sidecar answering."""
    try:
        data = response.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
