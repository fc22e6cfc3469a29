"""Reading /metrics the way Prometheus does: the text format, parsed by prometheus_client's own parser."""

from __future__ import annotations

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.harness import RunningServer


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def scrape(server: RunningServer, token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    response = httpx.get(f"{server.base_url}/metrics", headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return response.text


def value(text: str, sample: str, **labels: str) -> float:
    """The value of the sample with exactly these labels; 0 when the series does not exist yet."""
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == sample and s.labels == labels:
                return float(s.value)
    return 0.0


def label_values(text: str, label: str) -> set[str]:
    return {
        s.labels[label] for family in text_string_to_metric_families(text) for s in family.samples if label in s.labels
    }
