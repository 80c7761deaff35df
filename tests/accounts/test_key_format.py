import re

from accounts import keys


def test_generated_key_has_prefix_and_fifty_base62_characters():
    key = keys.generate()
    assert re.fullmatch(r"mdp_live_[0-9A-Za-z]{50}", key.plaintext)
    assert key.plaintext[9:21] == key.lookup_id


def test_generated_key_passes_its_own_checksum():
    key = keys.generate()
    assert keys.parse(key.plaintext) == key


def test_checksum_is_crc32_of_the_first_44_characters_in_base62():
    import zlib

    key = keys.generate().plaintext
    payload, check = key[9:53], key[53:]
    value = 0
    for char in check:
        value = value * 62 + keys.ALPHABET.index(char)
    assert value == zlib.crc32(payload.encode())


def test_a_single_typo_is_rejected_without_a_lookup():
    key = keys.generate().plaintext
    for position in (9, 30, 52, 58):
        replacement = "A" if key[position] != "A" else "B"
        typo = key[:position] + replacement + key[position + 1:]
        assert keys.parse(typo) is None


def test_malformed_keys_are_rejected():
    good = keys.generate().plaintext
    for bad in ("", "mdp_live_", good[:-1], good + "x", good.replace("mdp_live_", "mdp_test_"),
                good[:20] + "-" + good[21:], "Bearer " + good):
        assert keys.parse(bad) is None


def test_display_shows_only_the_lookup_id():
    key = keys.generate()
    assert key.display == f"mdp_live_{key.lookup_id}…"
    assert key.plaintext[21:] not in key.display
