"""Index a real documentation tree that ships with an installed package, and measure what the issue asks.

    .venv/bin/python bench/index.py [--tree /usr/share/doc/nodejs] [--sections 1000] [--edits 5]

Everything runs in-process on the embedded defaults (SQLite + qdrant-edge) in a temporary data dir, through the
same services `engram serve` uses (ProjectService -> DocumentService -> MemoryService):

1. a full index of the tree (Debian's `nodejs` package docs by default): files/s and chunks/s, against a baseline
   measured in the same process, embedding the same chunk texts with the same embedder and nothing else;
2. a no-change reconcile of the same tree;
3. the same for a tree of ``--sections`` files (the tree's sections, one file each): the time of a no-change
   reconcile of 1,000 files (target: under 1 s), and of a reconcile with one file changed;
4. search quality: 20 questions written from the tree's API docs, each with the section that answers it; a hit is
   that section among the top 3 results (target: 16 of 20);
5. the watcher: a file edited while watching, until its new content is indexed (the issue asks for 2 s).

For work on search quality, ``--data DIR --search-only`` keeps the index in DIR: the first run indexes the tree
there (no embed-only baseline), later runs reconcile it (nothing to embed when the tree is unchanged) and only ask
the 20 questions; ``--show 5`` prints each question's top 5. Delete DIR after changing what gets indexed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.accounts import service as accounts  # noqa: E402
from app.accounts.principal import WRITE, Principal, scopes_for  # noqa: E402
from app.assembly import build_container, close_container  # noqa: E402
from app.errors import NotFound  # noqa: E402
from app.identity import Identity  # noqa: E402
from app.memories.embedder import OnnxMiniLMEmbedder  # noqa: E402
from app.memories.schemas import SearchIn  # noqa: E402
from app.migrate import upgrade_to_head  # noqa: E402
from app.projects import files  # noqa: E402
from app.projects.chunking import chunk_document  # noqa: E402
from app.projects.models import Project  # noqa: E402
from app.projects.registry import find, register  # noqa: E402
from app.projects.walker import DEFAULT_EXCLUDES, DEFAULT_PATTERNS, Rules, walk  # noqa: E402
from app.projects.watcher import ProjectWatcher  # noqa: E402
from app.settings import Settings  # noqa: E402

# (question, file, a piece of the heading path of the section that answers it)
QUESTIONS: list[tuple[str, str, str]] = [
    ("How can I create a folder including any missing parent folders?", "api/fs.md", "mkdir"),
    ("How do I read a text file one line at a time?", "api/readline.md", "line-by-Line"),
    ("Derive a key from a password with a memory-hard function", "api/crypto.md", "scrypt"),
    ("Start another program and stream its output while it runs", "api/child_process.md", "spawn"),
    ("Run a callback repeatedly every few seconds", "api/timers.md", "setInterval"),
    ("How many CPU cores does the machine have, to size a thread pool?", "api/os.md", "os."),
    ("Which event fires when the Node.js process is about to exit?", "api/process.md", "'exit'"),
    ("Start a web server that answers HTTP requests", "api/http.md", "createServer"),
    ("Combine several path segments into a single path", "api/path.md", "path.join"),
    ("Register a listener that runs only the first time an event is emitted", "api/events.md", "once"),
    ("Run CPU-heavy JavaScript in parallel on another thread", "api/worker_threads.md", "Worker"),
    ("Decode a buffer as a UTF-8 or base64 string", "api/buffer.md", "ncoding"),
    ("A high resolution timestamp in milliseconds for measuring durations", "api/perf_hooks.md", "now"),
    ("Resolve a hostname to an IP address the way the operating system does", "api/dns.md", "dns.lookup"),
    ("In a test, check that two objects have strictly equal content", "api/assert.md", "deepStrictEqual"),
    ("Format a string with %s and %d placeholders", "api/util.md", "util.format"),
    ("Connect streams in a chain and learn when all finish or one fails", "api/stream.md", "pipeline"),
    ("Compress a buffer with gzip", "api/zlib.md", "gzip"),
    ("Get notified when a file on disk changes", "api/fs.md", "watch"),
    ("Where are the command line arguments the script was started with?", "api/process.md", "process.argv"),
]


def hit(source: str | None, path: str, piece: str) -> bool:
    if not source or not source.startswith(path + " > "):
        return False
    return piece in source[len(path) :]


def section_tree(tree: Path, out: Path, count: int, limit: int) -> int:
    """Write the tree's sections as files, one section each, until ``count`` files exist (a real 1,000-file tree)."""
    written = 0
    for found in walk(Rules(tree, DEFAULT_PATTERNS, DEFAULT_EXCLUDES)).found:
        try:
            text = found.read(files.DEFAULT_MAX_BYTES)
        except files.Refused:
            continue
        for number, chunk in enumerate(chunk_document(found.path, text, limit)):
            target = out / found.path.removesuffix(".md") / f"{number:04d}.md"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(chunk.text + "\n")
            written += 1
            if written == count:
                return written
    return written


async def bench(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="engram-bench-index-"))
    data = args.data or tmp / "data"
    settings = Settings(data_dir=data, watch_projects=False, secret_key="bench", plans={
        "free": {"requests_per_minute": 10**9, "key_requests_per_minute": 10**9, "max_memories": 10**9}
    })  # fmt: skip
    # Alembic's env runs its own event loop: off this one.
    await asyncio.to_thread(upgrade_to_head, settings.resolved_database_url)
    embedder = OnnxMiniLMEmbedder(threads=settings.embed_threads)
    container = await build_container(settings, embedder=embedder)
    results: dict[str, Any] = {"tree": str(args.tree)}
    try:
        if args.search_only:
            project = await _indexed_project(container, args.tree)
            principal = Principal(project.user_id, scopes_for(WRITE), via="bench")
            results["search"] = await ask(container, principal, Identity(project.user_id, "nodejs", None), args.show)
            return results
        async with container.db.session() as session:
            user = await accounts.create_user(session, "bench@example.test")
        await register(container.db, user.id, "nodejs", str(args.tree))
        project = await find(container.db, "nodejs", user.id)

        # Baseline: the same chunks, embedded by the same embedder, nothing else.
        walked = walk(Rules(args.tree, DEFAULT_PATTERNS, DEFAULT_EXCLUDES))
        texts = []
        started = time.perf_counter()
        for found in walked.found:
            try:
                text = found.read(settings.max_document_bytes)
            except files.Refused:
                continue
            texts += [c.content(found.path) for c in chunk_document(found.path, text, settings.max_memory_chars)]
        chunk_seconds = time.perf_counter() - started
        embedder.embed_batch(texts[:64])  # warm up
        started = time.perf_counter()
        embedder.embed_batch(texts)
        embed_seconds = time.perf_counter() - started

        started = time.perf_counter()
        full = await container.projects.reconcile(project)
        index_seconds = time.perf_counter() - started
        assert full.chunks_written == len(texts), (full.chunks_written, len(texts))
        results["full_index"] = {
            "files": full.added,
            "chunks": full.chunks_written,
            "skipped": len(full.skipped),
            "seconds": round(index_seconds, 2),
            "files_per_s": round(full.added / index_seconds, 2),
            "chunks_per_s": round(full.chunks_written / index_seconds, 1),
            "baseline_embed_only_chunks_per_s": round(len(texts) / embed_seconds, 1),
            "ratio_index_to_embed_only": round(index_seconds / embed_seconds, 2),
            "chunking_seconds": round(chunk_seconds, 2),
        }
        print("full index", json.dumps(results["full_index"]), flush=True)

        again = [await container.projects.reconcile(project) for _ in range(3)]
        assert all(r.chunks_written == 0 and r.unchanged == full.added for r in again)
        results["no_change_reconcile"] = {"files": full.added, "seconds": statistics.median(r.seconds for r in again)}
        print("no-change reconcile", json.dumps(results["no_change_reconcile"]), flush=True)

        principal = Principal(user.id, scopes_for(WRITE), via="bench")
        results["search"] = await ask(container, principal, Identity(user.id, "nodejs", None), args.show)

        sections = tmp / "sections"
        count = section_tree(args.tree, sections, args.sections, settings.max_memory_chars)
        await register(container.db, user.id, "sections", str(sections))
        cut = await find(container.db, "sections", user.id)
        started = time.perf_counter()
        first = await container.projects.reconcile(cut)
        cut_index = time.perf_counter() - started
        again = [await container.projects.reconcile(cut) for _ in range(3)]
        assert all(r.chunks_written == 0 and r.unchanged == count for r in again)
        edited = sorted(sections.rglob("*.md"))[count // 2]
        edited.write_text(edited.read_text() + "\nOne more paragraph, edited by the benchmark.\n")
        one = await container.projects.reconcile(cut)
        assert one.changed == 1, one
        results["sections_tree"] = {
            "files": count,
            "full_index_seconds": round(cut_index, 2),
            "files_per_s": round(first.added / cut_index, 1),
            "no_change_reconcile_seconds": statistics.median(r.seconds for r in again),
            "one_changed_reconcile_seconds": one.seconds,
        }
        print("sections tree", json.dumps(results["sections_tree"]), flush=True)

        watcher = ProjectWatcher(container.projects, settle_seconds=settings.watch_settle_seconds)
        await watcher.start()
        latencies = []
        try:
            await asyncio.sleep(3)  # let the start-up reconcile (nothing changed) finish first
            targets = sorted(sections.rglob("*.md"))
            for n in range(args.edits):
                target = targets[(n * 97) % len(targets)]
                relative = target.relative_to(sections).as_posix()
                target.write_text(target.read_text() + f"\nWatched edit {n}.\n")
                want = files.content_hash(target.read_bytes())
                started = time.perf_counter()
                while True:
                    stored = await container.documents.snapshot(user.id, "sections")
                    if stored[relative].content_hash == want:
                        break
                    if time.perf_counter() - started > 30:
                        raise RuntimeError(f"edit {n} was not indexed within 30 s")
                    await asyncio.sleep(0.02)
                latencies.append(time.perf_counter() - started)
        finally:
            await watcher.stop()
        results["watcher"] = {
            "edits": len(latencies),
            "median_seconds": round(statistics.median(latencies), 3),
            "max_seconds": round(max(latencies), 3),
            "settle_seconds": settings.watch_settle_seconds,
        }
        print("watcher", json.dumps(results["watcher"]), flush=True)
    finally:
        await close_container(container)
    return results


async def _indexed_project(container: Any, tree: Path) -> Project:
    """The data dir's ``nodejs`` project, registered and indexed on first use, reconciled with the tree after."""
    try:
        project = await find(container.db, "nodejs")
    except NotFound:
        async with container.db.session() as session:
            user = await accounts.create_user(session, "bench@example.test")
        await register(container.db, user.id, "nodejs", str(tree))
        project = await find(container.db, "nodejs", user.id)
    started = time.perf_counter()
    report = await container.projects.reconcile(project)
    print(
        f"reconcile: {report.added} added, {report.changed} changed, {report.chunks_written} chunks written in "
        f"{time.perf_counter() - started:.1f} s",
        flush=True,
    )
    return project


async def ask(container: Any, principal: Principal, identity: Identity, show: int) -> dict[str, Any]:
    """The 20 questions: the rank of each one's section among the top 10 (``show``: print the top ``show``)."""
    ranks = []
    for question, path, piece in QUESTIONS:
        found_results = await container.memories.search(principal, identity, SearchIn(query=question, limit=10))
        rank = next((n for n, r in enumerate(found_results, 1) if hit(r.source, path, piece)), None)
        ranks.append(rank)
        top = found_results[0].source if found_results else None
        print(f"  {'HIT ' if rank and rank <= 3 else 'MISS'} rank={rank} {question!r} top={top!r}", flush=True)
        for n, r in enumerate(found_results[:show], 1):
            print(f"      {n}. {r.score:.3f} {r.source}", flush=True)
    search = {
        "questions": len(QUESTIONS),
        "top3": sum(1 for r in ranks if r is not None and r <= 3),
        "top1": sum(1 for r in ranks if r == 1),
        "mrr_at_10": round(sum(1 / r for r in ranks if r) / len(ranks), 3),
    }
    print("search", json.dumps(search), flush=True)
    return search


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", type=Path, default=Path("/usr/share/doc/nodejs"))
    parser.add_argument("--sections", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=5)
    parser.add_argument("--data", type=Path, help="a data dir to keep (and reuse) instead of a temporary one")
    parser.add_argument("--search-only", action="store_true", help="index (or reuse) --data, then only search")
    parser.add_argument("--show", type=int, default=0, help="print each question's top N results")
    args = parser.parse_args()
    if args.search_only and args.data is None:
        parser.error("--search-only needs --data")
    if not args.tree.is_dir():
        sys.exit(f"{args.tree} is not a folder; pass --tree with an installed package's docs")
    print(json.dumps(asyncio.run(bench(args)), indent=2))


if __name__ == "__main__":
    main()
