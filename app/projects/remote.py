"""``engram index PATH --url URL --key KEY --session NAME``: index a local folder into a hosted Engram.

The server cannot see this disk, so the client walks the folder with the same rules as a registered project,
asks the server which files it holds (with their content hashes) and sends only what differs: changed files in
all-or-nothing batches, removals of files that left the folder. Nothing here imports the server's engine.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from app.projects import files
from app.projects.files import DEFAULT_EXCLUDES, DEFAULT_PATTERNS
from app.projects.schemas import IndexReport, Skipped
from app.projects.walker import Rules, walk

# A batch stays well under the server's default body limit (1 MiB); a single larger file goes alone.
BATCH_BYTES = 512 * 1024
BATCH_FILES = 64
DELETE_BATCH = 50
UPLOAD = "upload"


class RemoteError(Exception):
    """The server refused the work as a whole (bad key, unknown session name, server down)."""


@dataclass(frozen=True, slots=True)
class Target:
    url: str
    key: str
    session: str

    def documents_path(self) -> str:
        return f"/v1/sessions/{quote(self.session, safe='')}/documents"


def rules_for_folder(root: Path, patterns: Sequence[str], excludes: Sequence[str]) -> Rules:
    chosen = [p for p in patterns if p.strip()] or list(DEFAULT_PATTERNS)
    return Rules(root, chosen, list(dict.fromkeys([*DEFAULT_EXCLUDES, *excludes])))


def sync(rules: Rules, target: Target, http: httpx.Client, max_bytes: int = files.DEFAULT_MAX_BYTES) -> IndexReport:
    """One pass: send what changed, remove what left the folder; the report sums the server's answers."""
    started = time.perf_counter()
    report = IndexReport(session=target.session)
    walked = walk(rules)
    report.skipped.extend(Skipped(path=s.path, reason=s.reason, message=s.message) for s in walked.skipped)
    held = _held(http, target)
    sending: list[dict[str, Any]] = []
    kept: set[str] = set()
    for found in walked.found:
        try:
            text = found.read(max_bytes)
        except files.Refused as refusal:
            report.skipped.append(Skipped(path=found.path, reason=refusal.reason, message=refusal.message))
            continue
        kept.add(found.path)
        remote = held.get(found.path)
        if remote is not None and remote["content_hash"] == files.content_hash(text.encode("utf-8")):
            report.unchanged += 1
            continue
        sending.append({"path": found.path, "content": text, "modified_at": found.modified_at.isoformat()})
    if any(s.path == "." for s in walked.skipped):
        gone: list[str] = []  # the folder itself could not be read: remove nothing on that account
    else:
        gone = sorted(path for path, doc in held.items() if doc.get("origin") == UPLOAD and path not in kept)
    for batch in _batches(sending):
        _put(http, target, batch, report)
    for start in range(0, len(gone), DELETE_BATCH):
        answer = _call(
            http, "DELETE", target.documents_path(), params=[("path", p) for p in gone[start : start + DELETE_BATCH]]
        )
        report.merge(IndexReport.model_validate(answer.json()))
    report.seconds = round(time.perf_counter() - started, 3)
    return report


def client(target: Target) -> httpx.Client:
    headers = {"Authorization": f"Bearer {target.key}", "User-Agent": "engram-index"}
    return httpx.Client(base_url=target.url.rstrip("/"), headers=headers, timeout=httpx.Timeout(30, read=600))


def _held(http: httpx.Client, target: Target) -> dict[str, dict[str, Any]]:
    answer = _call(http, "GET", target.documents_path())
    return {doc["path"]: doc for doc in answer.json()["documents"]}


def _batches(sending: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for document in sending:
        weight = len(json.dumps(document, ensure_ascii=False).encode())
        if current and (len(current) >= BATCH_FILES or size + weight > BATCH_BYTES):
            batches.append(current)
            current, size = [], 0
        current.append(document)
        size += weight
    if current:
        batches.append(current)
    return batches


def _put(http: httpx.Client, target: Target, batch: list[dict[str, Any]], report: IndexReport) -> None:
    """Send a batch; when the server refuses it for one of its files, send them one by one to name that file."""
    try:
        answer = http.put(target.documents_path(), json={"documents": batch})
    except httpx.HTTPError as exc:
        raise RemoteError(f"cannot reach {http.base_url}: {exc}") from None
    if answer.status_code == 200:
        report.merge(IndexReport.model_validate(answer.json()))
        return
    if answer.status_code not in (413, 422):
        raise RemoteError(_describe(answer))
    if len(batch) > 1:
        for document in batch:
            _put(http, target, [document], report)
        return
    error = _error(answer)
    refused = error.get("refused") or [{}]
    reason = refused[0].get("reason") or ("too_large" if answer.status_code == 413 else error.get("code", "refused"))
    report.skipped.append(Skipped(path=batch[0]["path"], reason=reason, message=error.get("message", answer.text)))


def _call(http: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
    try:
        answer = http.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        raise RemoteError(f"cannot reach {http.base_url}: {exc}") from None
    if answer.status_code != 200:
        raise RemoteError(_describe(answer))
    return answer


def _error(answer: httpx.Response) -> dict[str, Any]:
    try:
        error = answer.json().get("error")
    except ValueError:
        return {}
    return error if isinstance(error, dict) else {}


def _describe(answer: httpx.Response) -> str:
    message = _error(answer).get("message") or answer.text[:200]
    return f"the server answered {answer.status_code}: {message}"
