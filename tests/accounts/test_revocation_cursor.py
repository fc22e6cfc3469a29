"""Which revocation rows the database poll has seen: ids may commit out of order on PostgreSQL."""

from __future__ import annotations

from app.accounts.revocations import GAP_SECONDS, RevocationCursor


def test_every_row_is_taken_once_in_whatever_order_the_ids_commit() -> None:
    cursor = RevocationCursor(10)
    assert cursor.take([12], now=0.0) == [12]
    assert cursor.floor == 10  # 11 may still commit: it is looked for again
    assert cursor.take([11, 12], now=1.0) == [11]
    assert cursor.floor == 12
    assert cursor.take([13], now=2.0) == [13]
    assert cursor.take([13], now=3.0) == []


def test_an_id_that_never_commits_is_given_up_after_the_gap_time() -> None:
    cursor = RevocationCursor(0)
    assert cursor.take([2], now=0.0) == [2]
    assert cursor.take([2], now=GAP_SECONDS - 1) == []
    assert cursor.floor == 0
    assert cursor.take([2], now=GAP_SECONDS + 1) == []
    assert cursor.floor == 2


def test_a_sequence_that_jumps_far_is_not_waited_for() -> None:
    cursor = RevocationCursor(0)
    assert cursor.take([100_000], now=0.0) == [100_000]
    assert cursor.floor == 100_000
