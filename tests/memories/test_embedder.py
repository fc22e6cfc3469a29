"""The offline MiniLM embedder: shape, normalisation, meaning, batch/single agreement, no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import numpy as np
import pytest

from app.memories.embedder import OnnxMiniLMEmbedder


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_dims_and_unit_length(embedder: OnnxMiniLMEmbedder) -> None:
    vector = embedder.embed("The user prefers dark mode in every editor.")
    assert embedder.dims == 384
    assert len(vector) == 384
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-4)


def test_paraphrase_scores_above_unrelated(embedder: OnnxMiniLMEmbedder) -> None:
    base = embedder.embed("I like to drink coffee in the morning")
    paraphrase = embedder.embed("Every morning I enjoy a cup of coffee")
    unrelated = embedder.embed("The quarterly tax filing deadline is in April")
    assert cosine(base, paraphrase) > 0.6
    assert cosine(base, unrelated) < 0.3


def test_batch_matches_single(embedder: OnnxMiniLMEmbedder) -> None:
    # Mixed lengths, so chunks are padded and the order has to be restored.
    texts = [("word " * n).strip() + f" number {n}" for n in (40, 2, 17, 3, 60, 1, 9)] * 6
    batch = embedder.embed_batch(texts)
    assert len(batch) == len(texts)
    for text, vector in zip(texts, batch, strict=True):
        assert cosine(vector, embedder.embed(text)) >= 0.999
    assert embedder.embed_batch([]) == []


def test_long_text_is_truncated_not_rejected(embedder: OnnxMiniLMEmbedder) -> None:
    assert len(embedder.embed("token " * 2000)) == 384


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the embedder tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    yield


def test_loads_and_runs_without_network(no_network: None) -> None:
    fresh = OnnxMiniLMEmbedder(threads=1)
    assert len(fresh.embed("offline")) == 384


def test_a_lone_embedding_may_use_more_threads_with_the_same_result(embedder: OnnxMiniLMEmbedder) -> None:
    """Two sessions over one model (alone: several threads; concurrent: one each) give the same vectors."""
    from concurrent.futures import ThreadPoolExecutor

    wide = OnnxMiniLMEmbedder(threads=2)
    texts = [f"memory number {n} about deploys and tests" for n in range(40)]
    alone = [wide.embed(t) for t in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        together = list(pool.map(wide.embed, texts))
    for a, b, c in zip(alone, together, (embedder.embed(t) for t in texts), strict=True):
        assert cosine(a, b) >= 0.9999
        assert cosine(a, c) >= 0.9999
    assert wide._in_flight == 0
