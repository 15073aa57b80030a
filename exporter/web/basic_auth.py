"""Basic-auth credentials checked against the bcrypt hashes of `basic_auth_users`.

As exporter-toolkit does: bcrypt runs one check at a time (it is meant to be slow: ~60 ms at cost
10), an unknown user is checked against a dummy hash so that timing does not tell which users
exist, and a successful check is cached, so that a scrape every few seconds does not pay bcrypt
each time. Unlike exporter-toolkit, the cache keys are HMACs under a key drawn at start (no
password is kept in memory, and a lookup's timing says nothing about it), only successes are
cached (wrong guesses are slowed down instead, exporter/web/auth.py), the dummy hash has the
cost of the configured ones, and bcrypt runs in a worker thread so the event loop keeps serving
meanwhile. A changed hash (a reloaded configuration) changes the key: old entries never match.

Passwords longer than 72 bytes are cut to 72, which is what Go's bcrypt (and so exporter-toolkit)
compares.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
from collections import OrderedDict
from collections.abc import Mapping

import bcrypt

BCRYPT_MAX_PASSWORD = 72


class BasicAuth:
    def __init__(self, max_cached: int = 64) -> None:
        self._key = os.urandom(32)
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._max = max_cached
        self._lock = asyncio.Lock()
        self._dummies: dict[bytes, bytes] = {}

    def cached(self, users: Mapping[str, bytes], user: str, password: bytes) -> bool:
        """True when these exact credentials were verified before (against the hash the user has
        now): no bcrypt, a keyed hash and a lookup."""
        hashed = users.get(user)
        if hashed is None:
            return False
        key = self._cache_key(user, hashed, password)
        if key in self._ok:
            self._ok.move_to_end(key)
            return True
        return False

    def _cache_key(self, user: str, hashed: bytes, password: bytes) -> bytes:
        name = user.encode()
        return hmac.new(self._key, b"%d:%b%d:%b%b" % (len(name), name, len(hashed), hashed,
                                                      password), hashlib.sha256).digest()

    async def verify(self, users: Mapping[str, bytes], user: str, password: bytes) -> bool:
        if self.cached(users, user, password):
            return True
        hashed = users.get(user)
        key = b"" if hashed is None else self._cache_key(user, hashed, password)
        async with self._lock:
            reference = hashed if hashed is not None else await asyncio.to_thread(self._dummy, users)
            matches = await asyncio.to_thread(check_password, password, reference)
        if not matches or hashed is None:
            return False
        self._ok[key] = None
        while len(self._ok) > self._max:
            self._ok.popitem(last=False)
        return True

    def _dummy(self, users: Mapping[str, bytes]) -> bytes:
        """A hash of a random password at the highest cost configured (made once per cost)."""
        cost = max((h.split(b"$")[2] for h in users.values()), default=b"10")
        if cost not in self._dummies:
            self._dummies[cost] = bcrypt.hashpw(os.urandom(16), bcrypt.gensalt(int(cost)))
        return self._dummies[cost]


def check_password(password: bytes, hashed: bytes) -> bool:
    """One bcrypt check, as Go's bcrypt (and so exporter-toolkit) makes it."""
    try:
        return bcrypt.checkpw(password[:BCRYPT_MAX_PASSWORD], hashed)
    except ValueError:  # a hash bcrypt cannot read (the web configuration's trial check refuses those)
        return False
