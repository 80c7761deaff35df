"""TOON (Token-Oriented Object Notation) encoding, plain Python: no Django, no Celery.
See `toon.encoder` for the rules and the speed notes."""

from .encoder import encode, encode_lines, iter_encode

__all__ = ["encode", "encode_lines", "iter_encode"]
