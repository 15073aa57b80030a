"""URLs as the sidecar shows and logs them: without the password of their userinfo.

`--engine-url http://admin:hunter2@engine:8000` is used as given (httpx sends the credentials as
basic auth), but wherever the URL is shown (/status, the status page, the terminal view) or logged
(`sidecar_starting`, every source error that names it), the password is `***`. A user name
without a password may itself be a token (`https://<token>@host`): it is hidden the same way.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

HIDDEN = "***"


def redact_url(url: str) -> str:
    """`url` with the secret part of its userinfo replaced by `***`; unchanged without one."""
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL after all: show nothing of it that could be a secret
        return url if "@" not in url else HIDDEN
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url
    user, colon, _ = userinfo.partition(":")
    shown = f"{user}:{HIDDEN}" if colon else HIDDEN
    return urlunsplit(parts._replace(netloc=f"{shown}@{host}"))
