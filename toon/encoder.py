"""Fast TOON encoder (Token-Oriented Object Notation), spec version 4.0.

Pure computation: this module imports nothing from Django, so it can be tested
and benchmarked on its own.  It is conformance-tested byte for byte against the
official fixtures (``tests/fixtures/toon-spec/encode``).

Public API
----------
``encode(value, *, indent=2, delimiter=",") -> str``
    The whole document, without a trailing newline.
``encode_lines(value, *, indent=2, delimiter=",")``
    Generator of the document's lines (without newlines);
    ``"\\n".join(encode_lines(v)) == encode(v)``.
``iter_encode(value, *, indent=2, delimiter=",", lines_per_chunk=4096)``
    Generator of text chunks (many lines each) whose concatenation equals
    ``encode(v)``; meant for streaming a large body.

Values: ``dict`` (keys: ``str``; ``int``/``float``/``bool``/``None`` keys are
converted as :func:`json.dumps` does), ``list`` and ``tuple``, ``str``, ``int``,
``float``, ``bool`` and ``None``; subclasses of these are accepted too, and an
``enum.Enum`` member encodes as its value.  Anything else raises ``TypeError``;
a reference cycle, an unpaired surrogate in a string, or two keys that collide
after conversion raise ``ValueError``.

Numbers: canonical decimal form (§2) for every finite number, never exponent
notation (``1e-7`` -> ``0.0000001``, ``1e21`` -> ``1000000000000000000000``);
integral floats print as integers with their exact digits (``5.0`` -> ``5``);
``-0.0`` -> ``0``; ``NaN`` and the infinities -> ``null`` (§3).  Non-integral
floats use the shortest digits that round-trip (Python's ``repr``).

Speed: tables (arrays of uniform objects, §9.3, and keyed tables, §9.5) are
built column by column with C-level bulk operations instead of per-value
calls: a column of strings is classified for quoting with a few scans of its
joined text, a column of numbers is formatted in one call.  ``orjson`` (a
project dependency) is used, when importable, purely as a fast
shortest-round-trip number formatter: for a table of number columns and
uniformly quoted (or uniformly bare) string columns one ``orjson.dumps`` of the
row tuples gives text that needs only plain replacements to become the TOON
rows.  Its output is normalised to the canonical form above, so the result is
byte-identical without orjson (``_orjson = None`` forces the pure-Python path,
which the tests run as well).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from enum import Enum
from itertools import compress, islice, repeat
from operator import add, contains, eq, itemgetter
from typing import Any

try:  # optional accelerator for number columns; output is identical without it
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a project dependency
    _orjson = None
_Fragment = getattr(_orjson, "Fragment", None)  # orjson >= 3.9

__all__ = ["SPEC_VERSION", "encode", "encode_lines", "iter_encode"]

SPEC_VERSION = "4.0"
"""Version of the TOON specification this encoder implements."""

_DELIMITERS = (",", "\t", "|")
_NoneType = type(None)

# Value kinds.
_PRIM, _DICT, _LIST = 0, 1, 2
_KIND_BY_TYPE: dict[type, int] = {
    str: _PRIM,
    int: _PRIM,
    float: _PRIM,
    bool: _PRIM,
    _NoneType: _PRIM,
    dict: _DICT,
    list: _LIST,
    tuple: _LIST,
}
_PRIM_TYPES = frozenset((str, int, float, bool, _NoneType))
_NUMERIC_TYPES = frozenset((int, float, _NoneType))  # formatted by orjson as TOON wants
_STR_ONLY = frozenset((str,))
_FLOAT_ONLY = frozenset((float,))
_INT_ONLY = frozenset((int,))
_DICT_ONLY = frozenset((dict,))
_ORJSON_FIRST = frozenset((int, float))  # first value of a column worth trying orjson on


def _kind_of_type(t: type) -> int:
    kind = _KIND_BY_TYPE.get(t)
    if kind is not None:
        return kind
    if issubclass(t, dict):
        kind = _DICT
    elif issubclass(t, (list, tuple)):
        kind = _LIST
    else:
        # str/int/float subclasses are primitives; anything else is rejected
        # by _prim with a TypeError when it is formatted.
        kind = _PRIM
    return kind


# ---------------------------------------------------------------------------
# Strings and keys (§7)
# ---------------------------------------------------------------------------

# §7.3: keys that may stay unquoted (ASCII only).
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
# §7.1: characters that need an escape; surrogates cannot be encoded at all.
_ESCAPE_RE = re.compile('["\\\\\x00-\x1f\ud800-\udfff]')
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_KEYWORDS = frozenset(("true", "false", "null"))
# §7.2 numeric-like test, for strings whose first character is a digit or "+".
_NUMERIC_LIKE = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\Z")
# Bulk checks over "\n" + "\n".join(strings) + "\n" (strings without "\n"):
# a line made only of these characters might be numeric-like (cheap filter) ...
_LINE_CANDIDATE = re.compile(r"\n[0-9+.eE-]*\n")
# ... and the exact test (a leading "-" is caught separately).
_LINE_NUMERIC = re.compile(r"\n\+?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?\n")
# Escapes needed anywhere in a joined column, "\n" (the separator) excepted.
_JOINED_ESCAPE_RE = re.compile('["\\\\\x00-\x09\x0b-\x1f\ud800-\udfff]')


# Characters that force quotes anywhere in a value (§7.2), including the
# delimiter: the document delimiter, which is also the active one of every
# header this encoder writes (§11.1); and the same for a column joined by "\n"
# (the separator is allowed there).  Tab is a control character already.
_SPECIAL = {
    delimiter: (
        re.compile('[:"\\\\\\[\\]{}\x00-\x1f\ud800-\udfff' + extra + "]").search,
        re.compile('[:"\\\\\\[\\]{}\x00-\x09\x0b-\x1f\ud800-\udfff' + extra + "]").search,
    )
    for delimiter, extra in ((",", ","), ("|", "\\|"), ("\t", ""))
}
# Encoded keys, shared by all calls (key encoding does not depend on options).
_KEY_CACHE: dict[str, str] = {}


def _escape_char(match: re.Match[str]) -> str:
    char = match.group()
    escaped = _ESCAPES.get(char)
    if escaped is not None:
        return escaped
    if "\ud800" <= char <= "\udfff":
        raise ValueError(f"String contains an unpaired surrogate: {match.string!r}")
    return f"\\u{ord(char):04x}"


def _quote(value: str) -> str:
    """``value`` as a quoted token, escaped per §7.1."""
    if _ESCAPE_RE.search(value) is None:
        return '"' + value + '"'
    return '"' + _ESCAPE_RE.sub(_escape_char, value) + '"'


def _coerce_key(key: Any) -> str:
    """A non-``str`` mapping key as :func:`json.dumps` converts it."""
    if isinstance(key, str):
        return str.__str__(key)
    if key is None:
        return "null"
    if key is True:
        return "true"
    if key is False:
        return "false"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        if key != key:
            return "NaN"
        if key in (float("inf"), float("-inf")):
            return "Infinity" if key > 0 else "-Infinity"
        return float.__repr__(key)
    raise TypeError(f"Keys must be str, int, float, bool or None, not {type(key).__name__}")


def _check_keys(obj: dict) -> None:
    """Raise if two keys of ``obj`` collide once converted to strings."""
    seen = set()
    for key in obj:
        text = key if type(key) is str else _coerce_key(key)
        if text in seen:
            raise ValueError(f"Duplicate key after conversion to string: {text!r}")
        seen.add(text)


# ---------------------------------------------------------------------------
# Numbers (§2, §3)
# ---------------------------------------------------------------------------


def _expand_exponent(text: str) -> str:
    """Plain decimal form of a repr-style exponent token such as ``1.5e-07``."""
    mantissa, _, exponent = text.lower().partition("e")
    sign = ""
    if mantissa[:1] in "+-":
        sign = "-" if mantissa[0] == "-" else ""
        mantissa = mantissa[1:]
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return "0"
    point = len(whole) - (len(whole + fraction) - len(digits)) + int(exponent)
    digits = digits.rstrip("0") or "0"
    if point <= 0:
        result = "0." + "0" * -point + digits
    elif point >= len(digits):
        result = digits + "0" * (point - len(digits))
    else:
        result = digits[:point] + "." + digits[point:]
    return sign + result


def _float_str(value: float) -> str:
    """Canonical TOON text of a float."""
    if value.is_integer():
        return int.__repr__(int(value))  # exact digits; -0.0 -> "0"
    text = float.__repr__(value)
    if "e" in text:
        return _expand_exponent(text)
    if "n" in text:  # nan, inf, -inf
        return "null"
    return text


def _fix_number_tokens(text: str, column: Any, prim) -> list[str]:
    """Split ``text`` (one number token per element of ``column``, joined by ",")
    into canonical cells.

    Integral floats lose their ``.0``; exponent, non-finite and ``-0`` tokens
    are rare and re-formatted exactly from the value.
    """
    if ".0," in text:
        text = text.replace(".0,", ",")
    if text.endswith(".0"):
        text = text[:-2]
    cells = text.split(",")
    suspects: set[int] = set()
    for marker in ("e", "E", "a", "i"):  # exponent, nan, inf
        if marker in text:
            suspects.update(compress(range(len(cells)), map(contains, cells, repeat(marker))))
    if text == "-0" or text.startswith("-0,") or ",-0," in text or text.endswith(",-0"):
        suspects.update(compress(range(len(cells)), map(eq, cells, repeat("-0"))))
    for index in suspects:
        cells[index] = prim(column[index])
    return cells


def _odd_number_positions(raw: bytes) -> list[int]:
    """Sorted positions, in orjson output for a list of numbers, of tokens
    that are not canonical TOON as they stand: exponents, nan/inf (orjson
    writes null, but be safe) and negative zero."""
    positions = []
    find = raw.find
    for marker in (b"e", b"E", b"a", b"i"):
        position = find(marker)
        while position != -1:
            positions.append(position)
            position = find(marker, position + 1)
    position = find(b"-0.0")
    while position != -1:
        if raw[position - 1] in b",[" and raw[position + 4] in b",]":
            positions.append(position)
        position = find(b"-0.0", position + 1)
    positions.sort()
    return positions


# ---------------------------------------------------------------------------
# Output blocks
# ---------------------------------------------------------------------------


class _Rows:
    """A block of table rows: ``prefix`` + each row string."""

    __slots__ = ("prefix", "rows")

    def __init__(self, prefix: str, rows: Iterable[str]) -> None:
        self.prefix = prefix
        self.rows = rows

    def text(self) -> str:
        prefix = self.prefix
        return prefix + ("\n" + prefix).join(self.rows)

    def lines(self) -> Iterator[str]:
        return map(self.prefix.__add__, self.rows)


class _Text:
    """A block of finished lines held as one string."""

    __slots__ = ("body",)

    def __init__(self, body: str) -> None:
        self.body = body

    def text(self) -> str:
        return self.body

    def lines(self) -> Iterator[str]:
        return iter(self.body.split("\n"))


# ---------------------------------------------------------------------------
# Encoder
# ---------------------------------------------------------------------------


class _Encoder:
    def __init__(self, indent: int, delimiter: str) -> None:
        if isinstance(indent, bool) or not isinstance(indent, int):
            raise TypeError(f"indent must be an int, not {type(indent).__name__}")
        if indent < 1:
            raise ValueError(f"indent must be at least 1, got {indent}")
        if delimiter not in _DELIMITERS:
            raise ValueError(f"delimiter must be ',', '\\t' or '|', got {delimiter!r}")
        delimiter = str.__str__(delimiter)
        self.unit = " " * indent
        self.delim = delimiter
        # §6/§11: the bracket segment names tab and pipe; comma is implicit.
        self.sym = "" if delimiter == "," else delimiter
        self.special, self.joined_special = _SPECIAL[delimiter]

    # -- primitives ---------------------------------------------------------

    def key(self, key: Any) -> str:
        """Encoded object key / field name (§7.3)."""
        if type(key) is str:
            cached = _KEY_CACHE.get(key)
            if cached is not None:
                return cached
            encoded = key if _KEY_RE.match(key) else _quote(key)
            if len(_KEY_CACHE) < 8192 and len(key) <= 64:
                _KEY_CACHE[key] = encoded
            return encoded
        text = _coerce_key(key)
        return text if _KEY_RE.match(text) else _quote(text)

    def string(self, value: str) -> str:
        """A string value, quoted only when §7.2 requires it."""
        if (
            not value
            or self.special(value) is not None
            or value[0] in " -#"
            or value[-1] == " "
            or value in _KEYWORDS
            or (value[0] in "0123456789+" and _NUMERIC_LIKE.match(value) is not None)
        ):
            return _quote(value)
        return value

    def prim(self, value: Any) -> str:
        cls = type(value)
        if cls is str:
            return self.string(value)
        if cls is float:
            return _float_str(value)
        if cls is int:
            return int.__repr__(value)
        if value is None:
            return "null"
        if cls is bool:
            return "true" if value else "false"
        if isinstance(value, str):
            return self.string(str.__str__(value))
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float):
            return _float_str(float(value))
        if isinstance(value, Enum):
            return self.prim(value.value)
        raise TypeError(f"Object of type {cls.__name__} is not TOON serializable")

    # -- columns ------------------------------------------------------------

    def column(self, column: Any, types: frozenset | set) -> list[str] | Any:
        """Format a sequence of primitives into cells (a sequence of str)."""
        if types == _STR_ONLY:
            return self.string_column(column)
        if _orjson is not None and types <= _NUMERIC_TYPES:
            cells = self.number_cells(column)
            if cells is not None:
                return cells
        if types == _FLOAT_ONLY:
            text = ",".join(map(float.__repr__, column))
            return _fix_number_tokens(text, column, self.prim)
        if types == _INT_ONLY:
            return list(map(int.__repr__, column))
        return list(map(self.prim, column))

    def string_mode(self, column: Any) -> tuple[str | None, str]:
        """Classify a non-empty sequence of ``str`` in bulk (§7.2).

        Returns ``(mode, joined)``: ``joined`` is the strings joined by
        newlines; ``mode`` is ``"plain"`` (no string needs quotes),
        ``"quoted"`` (every string needs quotes and none needs an escape) or
        None (mixed, or a string holds a newline).
        """
        joined = "\n".join(column)
        if joined.count("\n") != len(column) - 1:  # a string contains a newline
            return None, joined
        if self.joined_special(joined) is None:
            padded = "\n" + joined + "\n"
            if (
                "\n\n" not in padded  # empty string
                and "\n " not in padded
                and " \n" not in padded
                and "\n-" not in padded
                and "\n#" not in padded
                and "\ntrue\n" not in padded
                and "\nfalse\n" not in padded
                and "\nnull\n" not in padded
                and (
                    _LINE_CANDIDATE.search(padded) is None
                    or _LINE_NUMERIC.search(padded) is None
                )
            ):
                return "plain", joined
        elif _JOINED_ESCAPE_RE.search(joined) is None and all(map(contains, column, repeat(":"))):
            # Every string has a colon (e.g. ISO timestamps) and none needs an
            # escape: all are quoted verbatim.
            return "quoted", joined
        return None, joined

    def string_column(self, column: Any) -> Any:
        """Quote a sequence of ``str`` per §7.2, in bulk where possible."""
        mode, joined = self.string_mode(column)
        if mode == "plain":
            return column
        if mode == "quoted":
            return ('"' + joined.replace("\n", '"\n"') + '"').split("\n")
        return list(map(self.string, column))

    def number_cells(self, values: Any) -> list[str] | None:
        """Cells of a column of numbers and nulls formatted by orjson, or None
        when the column holds anything else (or orjson cannot take it)."""
        try:
            raw = _orjson.dumps(values)
        except (TypeError, ValueError):  # unsupported type, int beyond 64 bits
            return None
        if b'"' in raw or b"{" in raw or b"t" in raw or b"f" in raw or b"[" in raw[1:]:
            return None  # strings, objects, booleans or arrays: not a number column
        return _fix_number_tokens(raw[1:-1].decode(), values, self.prim)

    def table(self, objects: Any, types: set) -> tuple[str, list] | None:
        """Field list and leaf columns of uniform objects (§9.3), or None.

        ``objects`` is a non-empty sequence of dicts and ``types`` their types.
        Each leaf is ``(values, value_types)``; ``value_types`` is None for a
        column whose first value is a number, left for the formatter to
        verify (orjson checks it while formatting, saving a type scan).
        """
        first = objects[0]
        width = len(first)
        if not width:
            return None
        keys = list(first)
        if types == _DICT_ONLY:
            # Same length and every key of the first present => same key set.
            if len(objects) > 1 and len(set(map(len, objects))) != 1:
                return None
            safe_lookup = True
        else:  # dict subclasses: a lookup could insert (defaultdict)
            first_keys = first.keys()
            for obj in objects:
                if len(obj) != width or obj.keys() != first_keys:
                    return None
            safe_lookup = False
        for key in keys:
            if type(key) is not str:
                _check_keys(first)
                break
        guess = _orjson is not None
        names = []
        leaves = []
        for key in keys:
            if safe_lookup:
                try:
                    values = list(map(itemgetter(key), objects))
                except KeyError:
                    return None
            else:
                values = [obj[key] for obj in objects]
            if guess and type(values[0]) in _ORJSON_FIRST:
                names.append(self.key(key))
                leaves.append((values, None))
                continue
            value_types = set(map(type, values))
            if value_types <= _PRIM_TYPES:
                kinds = {_PRIM}
            else:
                kinds = {_kind_of_type(t) for t in value_types}
            if kinds == {_PRIM}:
                names.append(self.key(key))
                leaves.append((values, value_types))
            elif kinds == {_DICT}:  # nested-uniform column candidate
                nested = self.table(values, value_types)
                if nested is None:
                    return None
                names.append(self.key(key) + nested[0])
                leaves.extend(nested[1])
            else:
                return None
        return "{" + self.delim.join(names) + "}", leaves

    def table_columns(self, leaves: list) -> list | None:
        """Format table leaves column by column; None if a column guessed to
        be numeric holds an object or array (the objects are not uniform)."""
        columns = []
        for values, value_types in leaves:
            if value_types is None:
                cells = self.number_cells(values)
                if cells is not None:
                    columns.append(cells)
                    continue
                value_types = set(map(type, values))
                if not value_types <= _PRIM_TYPES and {_kind_of_type(t) for t in value_types} != {_PRIM}:
                    return None
            columns.append(self.column(values, value_types))
        return columns

    def rows(self, columns: list) -> Iterator[str]:
        if len(columns) == 1:
            return iter(columns[0])
        return map(self.delim.join, zip(*columns))

    def table_block(self, leaves: list, depth: int) -> _Rows | _Text | None:
        """The rows of a tabular array at ``depth``, or None (not uniform)."""
        prefix = self.unit * depth
        if _orjson is not None:
            body = self.table_text(leaves, prefix)
            if body is not None:
                return _Text(body)
        columns = self.table_columns(leaves)
        if columns is None:
            return None
        return _Rows(prefix, self.rows(columns))

    def table_text(self, leaves: list, prefix: str) -> str | None:
        """All rows of a table rendered by one orjson call, or None when the
        table does not qualify (the column-wise path then handles it).

        Qualifies: every leaf column holds only numbers and nulls, or only
        strings that all stay bare or are all quoted verbatim (their JSON form
        then equals the TOON one), and no string holds a comma, bracket or
        brace.  Number columns are checked and prepared first (see
        :meth:`number_values`), so the JSON text of the row tuples differs
        from the TOON rows only in the row brackets, the delimiter and the
        quotes of bare strings: plain replacements.
        """
        delim = self.delim
        string_mode = None
        strip_zero = False
        columns = []
        for values, value_types in leaves:
            if value_types is None or value_types <= _NUMERIC_TYPES:
                prepared = self.number_values(values)
                if prepared is None:
                    return None
                values, many_integral = prepared
                strip_zero = strip_zero or many_integral
            elif value_types == _STR_ONLY:
                mode, joined = self.string_mode(values)
                if mode is None or (string_mode is not None and mode != string_mode):
                    return None
                if "," in joined or "[" in joined or "]" in joined or "{" in joined or "}" in joined:
                    return None
                string_mode = mode
            else:
                return None
            columns.append(values)
        try:
            text = _orjson.dumps(list(zip(*columns))).decode()
        except (TypeError, ValueError):
            return None
        if strip_zero:  # integral floats left as floats: drop their ".0"
            text = text.replace(".0,", ",").replace(".0]", "]")
        if string_mode == "plain":
            text = text.replace('"', "")
        if delim != ",":
            text = text.replace(",", delim)
        return prefix + text[2:-2].replace("]" + delim + "[", "\n" + prefix)

    def number_values(self, values: list) -> tuple[list, bool] | None:
        """Check and prepare a number column for :meth:`table_text`.

        None unless every value is a number or null (orjson formats them, and
        anything else shows in its text).  Values whose orjson token is not
        canonical TOON (exponents, ``-0.0``) become ``orjson.Fragment`` objects
        holding the canonical text; a few integral floats become ints (so no
        ``.0`` is written).  Returns ``(values, many_integral)``, the flag
        asking the caller to strip ``.0`` from the text instead, which is
        cheaper when integral floats are many.
        """
        try:
            raw = _orjson.dumps(values)
        except (TypeError, ValueError):  # unsupported type, int beyond 64 bits
            return None
        if b'"' in raw or b"{" in raw or b"t" in raw or b"f" in raw or b"[" in raw[1:]:
            return None  # strings, objects, booleans or arrays
        odd = b"e" in raw or b"E" in raw or b"a" in raw or b"i" in raw or b"-0.0" in raw
        integral = raw.count(b".0,") + raw.endswith(b".0]")
        if not odd and not integral:
            return values, False
        values = list(values)
        count = raw.count
        if odd:
            if _Fragment is None:
                return None
            index = position = 0
            for start in _odd_number_positions(raw):
                index += count(b",", position, start)  # token number
                position = start
                if type(values[index]) is not _Fragment:
                    values[index] = _Fragment(self.prim(values[index]).encode())
        if integral * 8 > len(values):
            return values, True
        if integral:
            find = raw.find
            index = position = 0
            start = find(b".0,")
            while start != -1:
                index += count(b",", position, start)
                position = start
                if type(values[index]) is float:
                    values[index] = int(values[index])
                start = find(b".0,", start + 3)
            if raw.endswith(b".0]") and type(values[-1]) is float:
                values[-1] = int(values[-1])
        return values, False

    # -- structure ----------------------------------------------------------

    def root(self, value: Any) -> Iterator[Any]:
        kind = _kind_of_type(type(value))
        if kind == _DICT:
            if value:
                plan = self.keyed_plan(value)
                if plan is not None:
                    yield from self.keyed("", value, plan, 0)
                else:
                    yield from self.fields(value, 0, None)
            # an empty root object is an empty document (§8)
        elif kind == _LIST:
            if value:
                yield from self.array("", value, 0, True)
            else:
                yield "[]"
        elif type(value) is str and value[:1] == "\ufeff":
            yield _quote(value)  # unquoted it could be taken for a byte-order mark
        else:
            yield self.prim(value)

    def fields(self, obj: dict, depth: int, lead: str | None) -> Iterator[Any]:
        """Fields of a non-empty object at ``depth``; ``lead`` replaces the
        indentation of the first line (the ``- `` of a list item, §10)."""
        indent = self.unit * depth
        prefix = indent if lead is None else lead
        checked = False
        for key, value in obj.items():
            if type(key) is str:
                name = self.key(key)
            else:
                if not checked:
                    _check_keys(obj)
                    checked = True
                name = self.key(key)
            cls = type(value)
            if cls in _PRIM_TYPES:
                yield prefix + name + ": " + self.prim(value)
            else:
                kind = _kind_of_type(cls)
                if kind == _DICT:
                    if not value:
                        yield prefix + name + ":"
                    else:
                        plan = self.keyed_plan(value)
                        if plan is not None:
                            yield from self.keyed(prefix + name, value, plan, depth)
                        else:
                            yield prefix + name + ":"
                            yield from self.fields(value, depth + 1, None)
                elif kind == _LIST:
                    if value:
                        yield from self.array(prefix + name, value, depth, True)
                    else:
                        yield prefix + name + ": []"
                else:
                    yield prefix + name + ": " + self.prim(value)
            prefix = indent

    def array(self, head: str, array: Any, depth: int, tabular: bool) -> Iterator[Any]:
        """A non-empty array whose header line starts with ``head``.

        ``tabular`` is false for an array that is itself a list item, where a
        field list is not allowed (§9.4).
        """
        header = f"{head}[{len(array)}{self.sym}]"
        types = set(map(type, array))
        if types <= _PRIM_TYPES:
            kinds = {_PRIM}
        else:
            kinds = {_kind_of_type(t) for t in types}
        if kinds == {_PRIM}:  # §9.1 inline primitive array
            yield header + ": " + self.delim.join(self.column(array, types))
            return
        if tabular and kinds == {_DICT}:
            plan = self.table(array, types)
            if plan is not None:
                block = self.table_block(plan[1], depth + 1)
                if block is not None:  # §9.3 tabular array
                    yield header + plan[0] + ":"
                    yield block
                    return
        yield header + ":"  # §9.2, §9.4 expanded list
        for item in array:
            yield from self.item(item, depth + 1)

    def item(self, value: Any, depth: int) -> Iterator[Any]:
        """One list item at ``depth`` (§9.4, §10)."""
        indent = self.unit * depth
        kind = _kind_of_type(type(value))
        if kind == _DICT:
            if value:
                yield from self.fields(value, depth + 1, indent + "- ")
            else:
                yield indent + "-"
        elif kind == _LIST:
            if value:
                yield from self.array(indent + "- ", value, depth, False)
            else:
                yield f"{indent}- [0{self.sym}]:"  # never "- []" (§9.2)
        else:
            yield indent + "- " + self.prim(value)

    def keyed_plan(self, obj: dict) -> tuple[str, list] | None:
        """Keyed tabular detection (§9.5)."""
        if len(obj) < 2:
            return None
        values = list(obj.values())
        types = set(map(type, values))
        if types != _DICT_ONLY and {_kind_of_type(t) for t in types} != {_DICT}:
            return None
        plan = self.table(values, types)
        if plan is None:
            return None
        columns = self.table_columns(plan[1])
        if columns is None:
            return None
        return plan[0], columns

    def keyed(self, head: str, obj: dict, plan: tuple[str, list], depth: int) -> Iterator[Any]:
        """An object of uniform objects in keyed tabular form (§9.5)."""
        yield f"{head}[{len(obj)}:{self.sym}]{plan[0]}:"
        for key in obj:
            if type(key) is not str:
                _check_keys(obj)
                break
        entry_keys = [self.key(key) + ": " for key in obj]
        yield _Rows(self.unit * (depth + 1), map(add, entry_keys, self.rows(plan[1])))


def _chunks(value: Any, indent: int, delimiter: str) -> Iterator[Any]:
    encoder = _Encoder(indent, delimiter)
    try:
        yield from encoder.root(value)
    except RecursionError:
        raise ValueError("Circular reference detected, or the value is nested too deeply") from None


def encode(value: Any, *, indent: int = 2, delimiter: str = ",") -> str:
    """Encode ``value`` as a TOON document (no trailing newline)."""
    parts = []
    append = parts.append
    for chunk in _chunks(value, indent, delimiter):
        if type(chunk) is str:
            append(chunk)
        else:
            append(chunk.text())
    return "\n".join(parts)


def encode_lines(value: Any, *, indent: int = 2, delimiter: str = ",") -> Iterator[str]:
    """Yield the lines of the TOON document for ``value``, without newlines."""
    for chunk in _chunks(value, indent, delimiter):
        if type(chunk) is str:
            yield chunk
        else:
            yield from chunk.lines()


def iter_encode(
    value: Any,
    *,
    indent: int = 2,
    delimiter: str = ",",
    lines_per_chunk: int = 4096,
) -> Iterator[str]:
    """Yield the TOON document for ``value`` in text chunks of up to about
    ``lines_per_chunk`` lines; ``"".join(iter_encode(v)) == encode(v)``."""
    if lines_per_chunk < 1:
        raise ValueError("lines_per_chunk must be at least 1")
    pending: list[str] = []
    started = False
    for chunk in _chunks(value, indent, delimiter):
        if type(chunk) is str:
            pending.append(chunk)
            if len(pending) < lines_per_chunk:
                continue
            lines: Iterator[str] = iter(())
        else:
            lines = chunk.lines()
        while True:
            room = lines_per_chunk - len(pending)
            if room > 0:
                pending.extend(islice(lines, room))
                if len(pending) < lines_per_chunk:
                    break  # block exhausted; keep collecting
            text = "\n".join(pending)
            pending.clear()
            yield ("\n" + text) if started else text
            started = True
    if pending:
        text = "\n".join(pending)
        yield ("\n" + text) if started else text
