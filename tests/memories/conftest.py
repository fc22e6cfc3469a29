"""Fixtures for the memory engine: one embedder for the whole run (the model loads in about half a second)."""

from __future__ import annotations

import os
import tempfile

# mem0 writes a config.json under MEM0_DIR (default ~/.mem0) when first imported; keep test runs out of $HOME.
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="engram-mem0-"))

import pytest

from app.memories.embedder import OnnxMiniLMEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def embedder() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(threads=1)
