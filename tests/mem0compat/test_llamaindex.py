"""A memory integration from PyPI that wraps Mem0's ``MemoryClient`` runs a conversation against Engram unchanged:
LlamaIndex's ``Mem0Memory`` (llama-index-memory-mem0) under a LlamaIndex chat engine.

Two test doubles, both for what this machine cannot reach, and both named: the chat model is LlamaIndex's own
``MockLLM`` (it answers with the prompt it was given, so the reply shows what the memory put before the model), and
Engram's fact extraction talks to ``FakeOpenAI`` (tests/fake_llm.py), because ``Mem0Memory`` always adds with Mem0's
default ``infer`` on. The integration, ``MemoryClient``, Engram, the embedder and the index are all real.

``Mem0Memory.from_client`` cannot be used with mem0ai 2.2.1: it passes ``org_id`` and ``project_id``, which that
``MemoryClient`` no longer takes. The integration's constructor takes a ready client, which is what we give it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

import pytest
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.memory import Memory
from llama_index.memory.mem0 import Mem0Memory
from mem0 import MemoryClient

from tests.conftest import _settings
from tests.fake_llm import FakeOpenAI
from tests.harness import RunningServer, make_account, serve


def _what_the_user_said(body: dict[str, Any]) -> list[str]:
    """The fake extraction: each thing the user said in the conversation becomes one fact."""
    prompt = "\n".join(str(m.get("content", "")) for m in body["messages"])
    new = prompt.rsplit("## New Messages", 1)[-1].split("\n## ", 1)[0]
    return [said for said in re.findall(r"^user: (.+)$", new, re.MULTILINE) if not said.startswith("system:")]


@pytest.fixture
def engram_with_llm(
    pg_database_url: str, embedder: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    with FakeOpenAI(_what_the_user_said) as llm:
        settings = _settings(
            tmp_path_factory.mktemp("llamaindex"), pg_database_url, llm_base_url=llm.base_url, llm_api_key="sk-test"
        )
        with serve(settings, embedder=embedder) as server:  # type: ignore[arg-type]
            yield server


def _chat_memory(client: MemoryClient, user: str) -> Mem0Memory:
    # A whitespace tokenizer: LlamaIndex's default downloads tiktoken's tables, and this machine is offline.
    return Mem0Memory(
        primary_memory=Memory.from_defaults(tokenizer_fn=str.split),
        context={"user_id": user},
        client=client,
    )


def test_a_llamaindex_chat_remembers_through_engram(engram_with_llm: RunningServer) -> None:
    account = make_account(engram_with_llm)
    client = MemoryClient(api_key=account.key, host=engram_with_llm.base_url)
    chat = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=_chat_memory(client, "dana"))
    chat.chat("I am vegetarian and I live in Lisbon.")

    # The model is shown what Engram remembers of dana before it answers (MockLLM answers with its prompt).
    reply = chat.chat("What should I cook tonight?").response
    preferences = reply.split("retrieved from potentially several memory sources:", 1)[1]
    assert "I am vegetarian and I live in Lisbon." in preferences.split("end of the retrieved preferences")[0]

    # A new chat (its own short-term history, empty) still knows: the memory lives in Engram, not in the process.
    later = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=_chat_memory(client, "dana"))
    assert "vegetarian" in later.chat("Any dinner ideas?").response
    # Another end user of the same app gets none of dana's memories.
    stranger = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=_chat_memory(client, "erin"))
    assert "vegetarian" not in stranger.chat("Any dinner ideas?").response

    # What the integration wrote is an ordinary Engram memory of that end user, seen through Engram's own REST.
    with engram_with_llm.client(account.key) as http:
        stored = http.get("/v1/memories", params={"end_user": "dana"}).json()["memories"]
    assert "I am vegetarian and I live in Lisbon." in {m["content"] for m in stored}
    client.client.close()
