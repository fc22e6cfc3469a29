"""The feedback pass's query: the words that stand out in the first pass's best results join the question."""

from __future__ import annotations

from app.memories import lexical
from app.memories.vector_stores import hybrid


def _doc(text: str) -> lexical.Sparse:
    return lexical.document_vector(text)


def _words(vector: lexical.Sparse) -> set[int]:
    return set(vector.indices)


def test_every_word_of_the_best_results_joins_when_they_offer_fewer_than_the_allowance() -> None:
    query = lexical.query_vector("hiking")
    best = _doc("hiking trails mountains lakes picnics sunsets friends kayak tents maps")  # nine words beside it
    pool = [best, _doc("unrelated filler words"), _doc("more unrelated filler")]
    expanded = hybrid.expand(query, pool)
    assert _words(expanded) == _words(query) | _words(best)
    assert all(
        value == hybrid.FEEDBACK_WEIGHT
        for index, value in zip(expanded.indices, expanded.values, strict=True)
        if index not in _words(query)
    )


def test_at_most_the_allowance_joins_the_rarest_first() -> None:
    query = lexical.query_vector("hiking")
    many = " ".join(f"word{n}" for n in range(hybrid.FEEDBACK_TERMS + 10))
    common = "trail " * 3
    best = _doc(f"hiking {many} {common}")
    # "trail" is in every result of the pool: it says nothing about this one, so it is the first word left out.
    pool = [best, *(_doc(f"{common} filler{n}") for n in range(20))]
    expanded = hybrid.expand(query, pool)
    added = _words(expanded) - _words(query)
    assert len(added) == hybrid.FEEDBACK_TERMS
    assert lexical.token_id("trail") not in added


def test_results_that_share_no_word_with_the_question_vouch_for_nothing() -> None:
    query = lexical.query_vector("hiking")
    pool = [_doc("kayak tents maps"), _doc("sunsets friends lakes")]
    assert hybrid.expand(query, pool) == query
    assert hybrid.expand(query, [_doc("hiking trails")]) == query  # one result is no pool to tell rare words by
