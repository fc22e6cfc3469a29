from app.accounts.keys import KEY_PREFIX, generate_key, hash_key, matches, parse_lookup


def test_keys_have_a_recognisable_prefix_and_at_least_32_random_characters() -> None:
    key = generate_key()
    assert key.plaintext.startswith(KEY_PREFIX)
    assert len(key.plaintext) - len(KEY_PREFIX) - len(key.lookup) >= 32
    assert generate_key().plaintext != key.plaintext


def test_the_lookup_part_is_read_back_only_from_well_formed_keys() -> None:
    key = generate_key()
    assert parse_lookup(key.plaintext) == key.lookup
    assert parse_lookup(key.plaintext[:-1]) is None
    assert parse_lookup("xyz_" + key.plaintext[4:]) is None
    assert parse_lookup(key.plaintext[:-1] + "!") is None


def test_the_stored_hash_is_keyed_and_verified() -> None:
    key = generate_key().plaintext
    stored = hash_key(b"secret-a", key)
    assert key not in stored
    assert matches(b"secret-a", key, stored)
    assert not matches(b"secret-b", key, stored)
    assert not matches(b"secret-a", key[:-1] + ("A" if key[-1] != "A" else "B"), stored)
