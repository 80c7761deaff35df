"""One way to throttle the account forms: a counter per scope, client address and e-mail
in the shared cache, refused once it reaches its limit within its window. Sign-in counts
its failures; sign-up (and its resend) and password reset count every submission, since
each sends an e-mail."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache


def client_address(request) -> str:
    return request.META.get("REMOTE_ADDR", "") if request else ""


def normalized_email(value) -> str:
    return (value or "").strip().lower()


@dataclass(frozen=True)
class Throttle:
    scope: str
    limit_setting: str
    window_setting: str

    @property
    def limit(self) -> int:
        return getattr(settings, self.limit_setting)

    @property
    def window_seconds(self) -> int:
        return getattr(settings, self.window_setting)

    @property
    def minutes(self) -> int:
        return max(1, self.window_seconds // 60)

    def _key(self, request, email) -> str:
        # A digest of the typed e-mail: any text a client sends makes a short, safe cache key.
        typed = hashlib.sha256(normalized_email(email).encode("utf-8", "replace")).hexdigest()[:32]
        return f"{self.scope}:{client_address(request)}:{typed}"

    def refused(self, request, email) -> bool:
        return (cache.get(self._key(request, email)) or 0) >= self.limit

    def count(self, request, email) -> None:
        key = self._key(request, email)
        if not cache.add(key, 1, timeout=self.window_seconds):
            try:
                cache.incr(key)
            except ValueError:  # expired between the add and the incr
                cache.add(key, 1, timeout=self.window_seconds)

    def clear(self, request, email) -> None:
        cache.delete(self._key(request, email))


SIGN_IN = Throttle("login-fail", "LOGIN_FAILURE_LIMIT", "LOGIN_FAILURE_WINDOW_SECONDS")
SIGN_UP = Throttle("signup", "SIGNUP_LIMIT", "SIGNUP_WINDOW_SECONDS")
PASSWORD_RESET = Throttle("password-reset", "PASSWORD_RESET_LIMIT", "PASSWORD_RESET_WINDOW_SECONDS")
