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
from typing import Any

import structlog

from exporter.defaults import AUTH_ANSWER_WITHIN, WEB_CONFIG_RECHECK
from exporter.web import hashes, webconfig
from exporter.web.hashes import TRIALS, Trial, Trials
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
                 recheck: float = WEB_CONFIG_RECHECK, trials: Trials = TRIALS,
                 answer_within: float = AUTH_ANSWER_WITHIN) -> None:
        """Raises `WebConfigError` when the file does not load (a startup error)."""
        self.path = path
        self._clock, self._wall, self._recheck = clock, wall, recheck
        self._trials, self._answer_within = trials, answer_within
        self._config, self._tls = webconfig.load(path, trials=trials)
        _warn(path, self._config, self._tls)
        self._try_in_background(self._config)
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

    @property
    def users(self) -> dict[str, bytes]:
        """The users of the configuration in force, less those whose hash a trial in the
        background found to be the deployment example's."""
        return {user: hashed for user, hashed in self.config.users.items()
                if not ((trial := self._trials.verdict(hashed)) and trial.placeholder)}

    def _try_in_background(self, config: WebConfig) -> None:
        names = {hashed: user for user, hashed in config.users.items()}

        def done(hashed: bytes, trial: Trial) -> None:  # in the trials' thread
            user = names.get(hashed, "?")
            if trial.placeholder:
                log.error("web_config_user_refused", file=str(self.path), user=user,
                          reason=webconfig.PLACEHOLDER_HASH)
            elif trial.seconds > self._answer_within:
                log.warning("basic_auth_slow_hash", file=str(self.path), user=user,
                            cost=hashes.cost(hashed), check_seconds=round(trial.seconds, 2),
                            answer_within_seconds=self._answer_within,
                            consequence="a new password of this user is answered 429 until its "
                            "check finishes and is cached: lower the cost (10 to 12 is usual)")
        self._trials.in_background(
            [h for h in config.users.values() if self._trials.verdict(h) is None], done)

    def status(self) -> dict[str, Any]:
        """The configuration in force, for `/status` (`web`)."""
        tls = self.tls()
        config = self._config
        return {
            "file": str(self.path),
            "tls": self.tls_enabled,
            "certificates": [{"certificate": e.certificate, "not_after": e.not_after,
                              "subject": e.subject, "where": e.where}
                             for e in (tls.expiry if tls is not None else ())],
            "basic_auth_users": len(config.users),
            "refused_users": sorted(set(config.users) - set(self.users)),
            "last_reload_ok": self.last_reload_ok,
            "last_reload_success": self.last_success,
        }

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
            # On the event loop: no trial now (the new hashes are tried in the background).
            config, tls = webconfig.load(self.path, trials=self._trials, trial_budget=0.0)
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
        self._try_in_background(config)
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
