"""The documents a clone holds are the ones it points to, and the API reference covers the API."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_document_the_readme_names_is_in_the_repository():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`((?:docs|data|bench|tests)/[\w./-]+\.md)`", readme))
    assert "docs/API.md" in named
    assert [path for path in sorted(named) if not (ROOT / path).exists()] == []
    assert "SPEC.md" not in readme and "../shared" not in readme


def test_the_api_reference_lists_every_endpoint_a_client_can_call(db):
    from tests.security.conftest import api_paths

    reference = (ROOT / "docs" / "API.md").read_text()
    missing = []
    for path in api_paths():
        if "/schema" in path or "/docs" in path or "no/such/route" in path:
            continue
        tail = re.sub(r"^/(api/)?v1", "", path).replace("binance/BTC/USDT", "{exchange}/{base}/{quote}")
        last = tail.rsplit("/", 1)[-1]
        if tail not in reference and f".../{last}" not in reference and f"/{last}`" not in reference:
            missing.append(path)
    assert missing == []
