"""The web configuration in force, re-read when its file, or a file it names, changes.

exporter-toolkit reads its file again for every request and TLS handshake, so a rotated
certificate or a changed password applies without a restart. The sidecar does the same at most
once a second (`WEB_CONFIG_RECHECK`): a new connection or a request that needs the configuration
compares the files' identities (device, inode, size, modification time, so a Kubernetes Secret's
symlink swap counts) and reloads when they changed. Two differences, both in the operator's
favour: a file that no longer loads is logged (once) and the last good configuration stays in
force, where exporter-toolkit would fail every scrape; and turning TLS on or off needs a restart
(the listener's mode is fixed when it starts; exporter-toolkit fixes it the same way).
`helios_exporter_web_config_last_reload_successful` says which case holds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import structlog

from exporter.defaults import WEB_CONFIG_RECHECK
from exporter.web import webconfig
from exporter.web.tls import TlsSettings
from exporter.web.webconfig import WebConfig, WebConfigError

log = structlog.get_logger("helios_exporter.web")

Signature = tuple[tuple[str, int, int, int, int] | tuple[str], ...]


def signature(files: tuple[Path, ...]) -> Signature:
    out: list[tuple[str, int, int, int, int] | tuple[str]] = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            out.append((str(path),))
        else:
            out.append((str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(out)


class WebConfigState:
    def __init__(self, path: Path, *, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 recheck: float = WEB_CONFIG_RECHECK) -> None:
        """Raises `WebConfigError` when the file does not load (a startup error)."""
        self.path = path
        self._clock, self._wall, self._recheck = clock, wall, recheck
        self._config, self._tls = webconfig.load(path)
        _warn(path, self._config, self._tls)
        self.tls_enabled = self._config.tls is not None
        self._signature = signature(self._config.files())
        self._failed: Signature | None = None
        self._checked = clock()
        self.last_reload_ok = True
        self.last_success = wall()
        self.reloads = {"success": 0, "failure": 0}

    @property
    def config(self) -> WebConfig:
        self.check()
        return self._config

    def tls(self) -> TlsSettings | None:
        """What the next connection is upgraded with (None: plain HTTP)."""
        self.check()
        return self._tls

    def check(self) -> None:
        now = self._clock()
        if now - self._checked < self._recheck:
            return
        self._checked = now
        current = signature(self._config.files())
        if current in (self._signature, self._failed):  # unchanged, or already reported
            return
        try:
            config, tls = webconfig.load(self.path)
            if (config.tls is not None) != self.tls_enabled:
                raise WebConfigError([
                    f"turning TLS {'on' if config.tls else 'off'} needs a restart of the sidecar"])
        except WebConfigError as exc:
            self._failed = current
            self.last_reload_ok = False
            self.reloads["failure"] += 1
            log.error("web_config_reload_failed", file=str(self.path), errors=exc.errors,
                      keeping="the last configuration that loaded")
            return
        self._config, self._tls = config, tls
        _warn(self.path, config, tls)
        self._signature = signature(config.files())
        self._failed = None
        self.last_reload_ok = True
        self.last_success = self._wall()
        self.reloads["success"] += 1
        log.info("web_config_reloaded", file=str(self.path), tls=self.tls_enabled,
                 basic_auth_users=len(config.users))


def _warn(path: Path, config: WebConfig, tls: TlsSettings | None) -> None:
    for warning in (*config.warnings, *(tls.warnings if tls is not None else ())):
        log.warning("web_config_warning", file=str(path), warning=warning)
