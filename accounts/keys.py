"""The API key format, free of Django.

    mdp_live_ + 12-char lookup id + 32-char secret + 6-char checksum   (all base62)

The checksum is CRC32 of the 44 preceding base62 characters, written in base62 and padded
to 6 characters, as GitHub's tokens do: typos are refused without a database query and
secret scanners can match `mdp_live_[0-9A-Za-z]{50}`."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import zlib
from dataclasses import dataclass

PREFIX = "mdp_live_"
ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
LOOKUP_LEN, SECRET_LEN, CHECKSUM_LEN = 12, 32, 6
BODY_LEN = LOOKUP_LEN + SECRET_LEN + CHECKSUM_LEN
PATTERN = re.compile(rf"^{PREFIX}[0-9A-Za-z]{{{BODY_LEN}}}$")


def _base62(number: int, width: int) -> str:
    digits = []
    while number:
        number, rest = divmod(number, 62)
        digits.append(ALPHABET[rest])
    return "".join(reversed(digits)).rjust(width, "0")


def checksum(payload: str) -> str:
    return _base62(zlib.crc32(payload.encode("ascii")), CHECKSUM_LEN)


def _random_base62(length: int) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


@dataclass(frozen=True)
class ParsedKey:
    plaintext: str
    lookup_id: str

    @property
    def display(self) -> str:
        return display_prefix(self.lookup_id)


def display_prefix(lookup_id: str) -> str:
    return f"{PREFIX}{lookup_id}…"


def generate() -> ParsedKey:
    payload = _random_base62(LOOKUP_LEN + SECRET_LEN)
    plaintext = f"{PREFIX}{payload}{checksum(payload)}"
    return ParsedKey(plaintext=plaintext, lookup_id=payload[:LOOKUP_LEN])


def parse(candidate: str) -> ParsedKey | None:
    """The key's parts when it is well formed and its checksum holds, else None."""
    if len(candidate) != len(PREFIX) + BODY_LEN or not PATTERN.match(candidate):
        return None
    body = candidate[len(PREFIX):]
    payload, check = body[:-CHECKSUM_LEN], body[-CHECKSUM_LEN:]
    if not hmac.compare_digest(checksum(payload), check):
        return None
    return ParsedKey(plaintext=candidate, lookup_id=payload[:LOOKUP_LEN])


def fingerprint(plaintext: str, pepper: bytes) -> str:
    """A keyed hash of the whole key for the warm path cache: useless without the pepper,
    which never leaves the servers."""
    return hmac.new(pepper, plaintext.encode("ascii"), hashlib.sha256).hexdigest()
