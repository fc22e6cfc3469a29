"""Concurrent embeddings share one model run: the same vectors as one by one, and a bad text fails only itself."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from app.admission.batching import BatchingEmbedder
from app.memories.embedder import OnnxMiniLMEmbedder
from app.observability.metrics import Metrics

TEXTS = [
    "the deploy goes through fly.io on Fridays",
    "alice prefers tabs over spaces",
    "kubernetes pods crash-loop after the 1.29 upgrade with cilium as the network plugin",
    "ok",
    "the staging database is restored from last night's backup before every release",
    "bob owns the billing service",
]


class HeldModel:
    """The real model, whose first run waits until the test lets it go: meanwhile the other callers queue up
    behind it, so that they must share the next run (a wrapper to control timing; the vectors are the model's)."""

    def __init__(self, model: OnnxMiniLMEmbedder) -> None:
        self.model = model
        self.dims = model.dims
        self.model_id = model.model_id
        self.release = threading.Event()
        self._first = True

    def embed(self, text: str) -> list[float]:
        if self._first:
            self._first = False
            self.release.wait(timeout=60)
        return self.model.embed(text)

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        return self.model.embed_batch(texts)


def _batched(embedder: OnnxMiniLMEmbedder, texts: list[str]) -> tuple[list[list[float] | BaseException], Metrics]:
    """Embed ``texts`` from as many threads, all but the first queued behind a held first run."""
    metrics = Metrics()
    held = HeldModel(embedder)
    batcher = BatchingEmbedder(held, runners=1, probe=metrics)

    def one(text: str) -> list[float] | BaseException:
        try:
            return batcher.embed(text)
        except Exception as exc:
            return exc

    with ThreadPoolExecutor(len(texts) + 1) as pool:
        first = pool.submit(one, "hold the model")
        _until(lambda: not held._first)  # the first call is inside the model
        rest = [pool.submit(one, text) for text in texts]
        _until(lambda: len(batcher._waiting) == len(texts))
        held.release.set()
        first.result(timeout=60)
        return [f.result(timeout=60) for f in rest], metrics


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # only a hang reaches it
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.001)


def _runs_of_more_than_one(metrics: Metrics) -> float:
    histogram = metrics.stage_batch_size.labels("embedder")
    total = histogram._sum.get()
    count = sum(b.get() for b in histogram._buckets)
    return total - 1 if count == 2 else -1  # the held single run and one batch of the rest


def test_concurrent_texts_share_one_run_and_get_the_vectors_they_would_get_alone(embedder: OnnxMiniLMEmbedder) -> None:
    results, metrics = _batched(embedder, TEXTS)
    assert _runs_of_more_than_one(metrics) == len(TEXTS)
    for text, vector in zip(TEXTS, results, strict=True):
        assert not isinstance(vector, BaseException)
        np.testing.assert_allclose(vector, embedder.embed(text), atol=1e-5)


def test_a_text_the_model_cannot_take_fails_only_its_own_request(embedder: OnnxMiniLMEmbedder) -> None:
    bad = "a lone surrogate \ud800 cannot be encoded"
    texts = [*TEXTS[:3], bad, *TEXTS[3:]]
    results, _ = _batched(embedder, texts)
    for text, result in zip(texts, results, strict=True):
        if text is bad:
            assert isinstance(result, TypeError)
        else:
            assert not isinstance(result, BaseException)
            np.testing.assert_allclose(result, embedder.embed(text), atol=1e-5)


def test_a_lone_text_is_embedded_at_once_unpadded(embedder: OnnxMiniLMEmbedder) -> None:
    metrics = Metrics()
    batcher = BatchingEmbedder(embedder, probe=metrics)
    assert batcher.embed(TEXTS[0]) == embedder.embed(TEXTS[0])
    assert metrics.stage_batch_size.labels("embedder")._sum.get() == 1


@pytest.mark.parametrize("runners", [1, 2])
def test_many_threads_at_once_all_get_their_own_vectors(embedder: OnnxMiniLMEmbedder, runners: int) -> None:
    batcher = BatchingEmbedder(embedder, runners=runners)
    texts = [f"{text} (variant {i})" for i in range(8) for text in TEXTS]
    with ThreadPoolExecutor(16) as pool:
        vectors = list(pool.map(batcher.embed, texts))
    for text, vector in zip(texts[::7], vectors[::7], strict=True):
        np.testing.assert_allclose(vector, embedder.embed(text), atol=1e-5)
