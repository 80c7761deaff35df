"""`Authorization: Bearer <API_KEY>` for DRF."""

from __future__ import annotations

# Django's cached_property, not functools': on Python 3.11 the latter holds one lock for all
# instances while computing, so one slow account query held up every request of the process.
from django.utils.functional import cached_property
from rest_framework.authentication import BaseAuthentication

from config.api.errors import Unauthorized

from .models import Account
from .selectors import account_recent
from .verification import CachedKey, api_key_authenticate, api_key_verified_here


class ApiCaller:
    """The authenticated side of an API request: a key and its account (with its plan)."""

    is_authenticated = True
    is_anonymous = False

    def __init__(self, key: CachedKey):
        self.key_id = key.key_id
        self.account_id = key.account_id

    @cached_property
    def account(self) -> Account | None:
        return account_recent(account_id=self.account_id)

    def __str__(self) -> str:
        return f"account {self.account_id} (key {self.key_id})"


def bearer_token(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; '' when the header is there
    but malformed; None when there is no header."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return ""
    return token.strip()


def caller_for_token(token: str | None) -> ApiCaller:
    if token is None:
        raise Unauthorized()
    if not token:
        raise Unauthorized("The Authorization header must be 'Bearer <API_KEY>'.")
    key = api_key_authenticate(presented=token)
    if key is None:
        raise Unauthorized("The API key is not valid or has been revoked.")
    return ApiCaller(key)


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request):
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        if token is None:
            return None  # the permission then answers 401 (or lets a public view through)
        caller = caller_for_token(token)
        return caller, caller

    def authenticate_here(self, request):
        """`authenticate`'s answer when this process can give it without asking a cache or
        the database (it verified the key and read its account lately): what an answer on
        the event loop (config/loop.py) relies on. None when it cannot say so."""
        token = bearer_token(request.META.get("HTTP_AUTHORIZATION"))
        key = api_key_verified_here(presented=token) if token else None
        account = account_recent(account_id=key.account_id, held_only=True) if key is not None else None
        if account is None:
            return None
        caller = ApiCaller(key)
        caller.__dict__["account"] = account  # the cached_property's value: read already
        return caller, caller

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'


# The scheme's OpenAPI description is registered wherever DRF loads the scheme, not at start-up:
# loading drf-spectacular cost every management command and worker 0.12 s.
from . import schema  # noqa: E402,F401
