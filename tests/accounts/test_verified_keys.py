"""The lately-verified keys: an announced revocation drops its user's keys, and a lookup that began before one never
stores what it read."""

from __future__ import annotations

import time

from app.accounts.principal import Principal
from app.accounts.revocations import erasure_mark
from app.accounts.verified_keys import VerifiedKeys

ALICE = Principal(user_id="u_alice", scopes=frozenset({"write"}), key_id="key_a")
BOB = Principal(user_id="u_bob", scopes=frozenset({"write"}), key_id="key_b")


def test_a_revocation_drops_that_users_keys_and_no_one_elses() -> None:
    keys = VerifiedKeys()
    keys.put("egk_alice", ALICE, epoch=keys.epoch)
    keys.put("egk_bob", BOB, epoch=keys.epoch)
    keys.forget("u_alice")
    assert keys.get("egk_alice") is None
    assert keys.get("egk_bob") is BOB


def test_an_erased_account_is_named_by_its_mark_and_still_dropped() -> None:
    keys = VerifiedKeys()
    keys.put("egk_alice", ALICE, epoch=keys.epoch)
    keys.forget(erasure_mark("u_alice"))
    assert keys.get("egk_alice") is None


def test_a_lookup_that_began_before_a_revocation_stores_nothing() -> None:
    keys = VerifiedKeys()
    began = keys.epoch
    keys.forget("u_alice")  # announced while the lookup read the database
    keys.put("egk_alice", ALICE, epoch=began)
    assert keys.get("egk_alice") is None


def test_an_entry_is_checked_again_once_it_is_old() -> None:
    keys = VerifiedKeys(max_age=0.05)
    keys.put("egk_alice", ALICE, epoch=keys.epoch)
    assert keys.get("egk_alice") is ALICE
    time.sleep(0.1)
    assert keys.get("egk_alice") is None


def test_it_holds_at_most_its_size_dropping_the_oldest() -> None:
    keys = VerifiedKeys(size=2)
    for n in range(3):
        keys.put(f"egk_{n}", ALICE, epoch=keys.epoch)
    assert keys.get("egk_0") is None and keys.get("egk_2") is ALICE
