"""The format decision of SPEC.md 4.11, without Django."""

import pytest

from config.api.media import choose_format, read_accept


@pytest.mark.parametrize("accept, expected", [
    (None, "json"),
    ("", "json"),
    ("*/*", "json"),
    ("application/json", "json"),
    ("application/toon", "toon"),
    ("text/toon", "toon"),
    ("application/*", "json"),
    ("application/toon, application/json", "toon"),
    ("application/json, application/toon", "toon"),
    ("application/json;q=1, application/toon;q=0.5", "json"),
    ("application/json;q=0.5, application/toon;q=0.9", "toon"),
    ("text/html, */*;q=0.8", "json"),
    ("APPLICATION/TOON", "toon"),
])
def test_accept_decides_toon_or_leaves_it_to_the_next_rule(accept, expected):
    assert choose_format(accept).format == expected


@pytest.mark.parametrize("accept", ["text/html", "image/png, text/csv", "application/json;q=0",
                                    "application/xml", "application/toon;q=0, application/json;q=0"])
def test_accept_admitting_neither_type_is_not_acceptable(accept):
    assert read_accept(accept).acceptable is False


def test_precedence_accept_then_body_then_query():
    assert choose_format("application/toon", "json", "json").format == "toon"
    assert choose_format("*/*", "toon", "json").format == "toon"
    assert choose_format("*/*", "json", "toon").format == "json"
    assert choose_format(None, None, "toon").format == "toon"
    assert choose_format(None, None, None).format == "json"


def test_unknown_format_value_is_reported_with_its_source():
    choice = choose_format(None, "xml", None)
    assert choice.error is not None and choice.error.source == "body"
    choice = choose_format(None, None, "csv")
    assert choice.error.source == "query"
    assert choose_format(None, 5, None).error is not None


def test_a_bad_query_format_does_not_hide_a_valid_body_choice():
    choice = choose_format(None, "toon", "yaml")
    assert choice.format == "toon" and choice.error.source == "query"


def test_malformed_q_value_counts_as_zero():
    assert read_accept("application/json;q=abc").acceptable is False
