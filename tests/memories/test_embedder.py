"""The offline MiniLM embedder: shape, normalisation, meaning, batch/single agreement, no network."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

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


IDLE_AFTER_RUNS = """
import time
from app.memories.embedder import OnnxMiniLMEmbedder

embedder = OnnxMiniLMEmbedder(threads=2)
embedder.embed("warm up")
idle = 0.0
for n in range(20):
    embedder.embed(f"a lone query about deploys, number {n}")
    started = time.process_time()
    time.sleep(0.05)
    idle += time.process_time() - started
print(idle / 20)
"""


def test_the_models_threads_stop_spinning_when_a_lone_embedding_returns() -> None:
    """A lone embedding's threads spin between the model's operators, and not a moment after: ONNX Runtime's own
    spinning went on after each run, burning about 30 ms of CPU in the next 50 (measured here), which the event loop
    and the index need. Measured in a process of its own, where nothing else runs."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", IDLE_AFTER_RUNS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cpu_while_idle = float(done.stdout.strip().splitlines()[-1])
    assert cpu_while_idle < 0.005, f"{cpu_while_idle * 1000:.1f} ms of CPU in 50 ms after a run"


def test_an_embedding_spins_its_threads_only_when_the_server_has_nothing_else_in_service() -> None:
    others_in_service = True
    embedder = OnnxMiniLMEmbedder(threads=2, alone=lambda: not others_in_service)
    beside = [embedder.embed(f"query {n} beside other requests") for n in range(5)]
    assert embedder.spinning_runs == 0
    others_in_service = False
    alone = [embedder.embed(f"query {n} beside other requests") for n in range(5)]
    assert embedder.spinning_runs == 5
    for a, b in zip(beside, alone, strict=True):
        assert cosine(a, b) >= 0.9999


def test_the_servers_embedder_is_alone_while_admission_has_one_request_in_service(tmp_path: Path) -> None:
    from app.admission.gate import Admission
    from app.assembly import admission_config, server_embedder
    from app.settings import Settings

    settings = Settings(data_dir=tmp_path)
    admission = Admission(admission_config(settings))
    embedder = server_embedder(settings, admission)
    assert embedder.alone is not None
    for in_service, alone in ((0, True), (1, True), (2, False), (9, False)):
        admission.in_flight = in_service
        assert embedder.alone() is alone, in_service


ONE_THREAD_BESIDE_OTHERS = """
import time
from app.memories.embedder import OnnxMiniLMEmbedder

embedder = OnnxMiniLMEmbedder(threads=2, alone=lambda: False)
embedder.embed("warm up")
cpu, wall = time.process_time(), time.perf_counter()
for n in range(40):
    embedder.embed(f"a query beside other requests about deploys, number {n}")
print((time.process_time() - cpu) / (time.perf_counter() - wall))
"""


def test_an_embedding_beside_other_requests_takes_one_thread() -> None:
    """Beside other requests a run takes one core, not two: a second thread sleeping between the model's operators
    made no lone text faster here and cost 40% more CPU, which the other requests need. Measured in a process of its
    own: CPU over wall time is at most 1 for one thread (less when the machine is busy), about 1.4 for two."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", ONE_THREAD_BESIDE_OTHERS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    cores = float(done.stdout.strip().splitlines()[-1])
    assert cores < 1.15, f"{cores:.2f} cores busy during runs beside other requests"
