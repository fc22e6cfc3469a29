"""Split a document into chunks, each one memory: markdown by its h1/h2/h3 sections, config files by top-level key.

Pure: text in, chunks out. Every chunk fits the memory size limit with its heading path prefixed, is never cut
mid-word (unless one word alone is longer than the limit), and keeps a code fence whole where the fence fits.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

# The rules' version: raised whenever the same file would be cut differently, so that a folder's reconcile re-chunks
# the files that older rules cut (2: HTML comment blocks left out).
CHUNKING = 2
SEPARATOR = " > "
MARKDOWN = frozenset({".md", ".mdx", ".markdown"})
STRUCTURED = {".json": "json", ".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}
# Below this many characters for the text itself, a chunk would be all heading: refuse such a limit.
MIN_BODY = 64
# A heading longer than this is cut short in heading paths (its text stays whole in the chunk).
MAX_TITLE = 160

_YAML_KEY = re.compile(r"""^(?:"[^"\n]*"|'[^'\n]*'|[^\s#:\-?{\[!&*|>'"%@`][^:\n]*?)\s*:(?:\s|$)""")
_TOML_TABLE = re.compile(r"^\s*\[\[?\s*([^\]\n]+?)\s*\]\]?\s*(?:#.*)?$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@dataclass(frozen=True, slots=True)
class Chunk:
    heading_path: tuple[str, ...]
    text: str  # the chunk's own text, without the heading prefix

    def source(self, path: str) -> str:
        """``README.md > Deploy > Fly``: the file and the headings (or top-level key) the chunk sits under."""
        return SEPARATOR.join((path, *self.heading_path))

    def content(self, path: str) -> str:
        """The memory text: the source first, so that a short section still carries its context when embedded."""
        return f"{self.source(path)}\n\n{self.text}"


def kind_of(path: str) -> str:
    """``markdown``, ``json``, ``yaml``, ``toml`` or ``text``, by the file's extension."""
    suffix = path[path.rfind(".") :].lower() if "." in path.rsplit("/", 1)[-1] else ""
    if suffix in MARKDOWN:
        return "markdown"
    return STRUCTURED.get(suffix, "text")


class Unchunkable(ValueError):
    """The memory limit leaves no room for any text after the file's own path."""


def lines_of(text: str) -> list[str]:
    """Lines as markdown-it counts them: only \\n, \\r\\n and \\r end a line (not \\f, \\v or U+2028)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]


def chunk_document(path: str, text: str, limit: int) -> list[Chunk]:
    """The chunks of one file; each one's ``content(path)`` is at most ``limit`` characters."""
    text = text.removeprefix("\ufeff")
    if not text.strip():
        return []
    kind = kind_of(path)
    if kind == "markdown":
        sections = _markdown_sections(text)
    elif kind == "text":
        sections = [((), lines_of(text), [])]
    else:
        if _fits(path, (), text.strip("\n"), limit):
            return [Chunk((), text.strip("\n"))]
        sections = _keyed_sections(kind, text)
    chunks: list[Chunk] = []
    for heading_path, lines, fences in sections:
        heading_path = tuple(_short(title) for title in heading_path)
        # A heading path nearly as long as a memory: keep the innermost heading only, or the file alone.
        for candidate in (heading_path, heading_path[-1:], ()):
            body_limit = limit - len(Chunk(candidate, "").content(path))
            if body_limit >= MIN_BODY:
                break
        else:
            raise Unchunkable(f"a memory limit of {limit} characters leaves no room for text after the path {path}")
        chunks.extend(Chunk(candidate, part) for part in split_lines(lines, body_limit, fences))
    return chunks


def _short(title: str) -> str:
    return title if len(title) <= MAX_TITLE else title[: MAX_TITLE - 1].rstrip() + "…"


def _fits(path: str, heading_path: tuple[str, ...], text: str, limit: int) -> bool:
    return len(Chunk(heading_path, text).content(path)) <= limit


# --- markdown -----------------------------------------------------------------------------------------------------


@cache
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    # Only headings and code blocks matter here. Inline parsing (links, emphasis) and lists are most of the cost;
    # without the list rule, fences in list items (indented up to 3 spaces) are still found.
    return MarkdownIt("commonmark").disable(["inline", "text_join", "list"])


Section = tuple[tuple[str, ...], list[str], list[tuple[int, int]]]


def _markdown_sections(text: str) -> list[Section]:
    """(heading path, lines, code block line ranges) per h1/h2/h3 section; heading-only sections are left out.

    HTML comments standing as blocks of their own (``<!-- ... -->``) are left out: a reader never sees them, and in
    real docs they are version histories, lint directives and TOC markers that filled a section's first 256 tokens
    (all the embedder reads) and its words. A comment inside a code block is code, and stays."""
    lines = lines_of(text)
    body_start = _front_matter_end(lines)
    tokens = _parser().parse("".join(lines[body_start:]))
    boundaries: list[tuple[int, int, str]] = []  # (line, level, heading text)
    blocks: list[tuple[int, int]] = []
    hidden: set[int] = set()
    for index, token in enumerate(tokens):
        if token.map is None:
            continue
        start, end = token.map[0] + body_start, token.map[1] + body_start
        if token.type == "heading_open" and token.level == 0 and token.tag in ("h1", "h2", "h3"):
            title = " ".join(tokens[index + 1].content.split()) or token.tag
            boundaries.append((start, int(token.tag[1]), title))
        elif token.type in ("fence", "code_block"):
            blocks.append((start, end))
        elif token.type == "html_block" and _is_comment(token.content):
            hidden.update(range(start, end))
            if end < len(lines) and not lines[end].strip() and (start == 0 or not lines[start - 1].strip()):
                hidden.add(end)  # one blank line between what came before and after, not two
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []
    edges = [(0, 0, ""), *boundaries, (len(lines), 0, "")]
    for (start, level, title), (end, _, _) in itertools.pairwise(edges):
        if level:
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
        shown = [number for number in range(start, end) if number not in hidden]
        section = [lines[number] for number in shown]
        has_body = any(line.strip() for line in (section[1:] if level else section))
        # A heading with nothing under it before the next heading: its title lives on in the children's paths.
        if has_body:
            # No code block line is hidden, so each block's lines stay consecutive among those shown.
            where = {number: position for position, number in enumerate(shown)}
            fences = [(where[max(a, start)], where[min(b, end) - 1] + 1) for a, b in blocks if a < end and b > start]
            sections.append((tuple(t for _, t in stack) if level else (), section, fences))
    visible = [line for number, line in enumerate(lines) if number not in hidden]
    if not sections and any(line.strip() for line in visible):
        sections.append(((), visible, []))
    return sections


def _is_comment(block: str) -> bool:
    """An HTML block that is one comment and nothing else."""
    block = block.strip()
    return block.startswith("<!--") and block.endswith("-->")


def _front_matter_end(lines: Sequence[str]) -> int:
    """The line after a leading ``---`` ... ``---`` block (YAML front matter), or 0 when there is none."""
    if not lines or lines[0].rstrip() != "---":
        return 0
    for number, line in enumerate(lines[1:], start=1):
        if line.rstrip() in ("---", "..."):
            return number + 1
    return 0


# --- JSON, YAML, TOML ---------------------------------------------------------------------------------------------


def _keyed_sections(kind: str, text: str) -> list[Section]:
    """One section per top-level key (table, for TOML); text that cannot be read that way is one section."""
    if kind == "json":
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):  # not JSON, or nested too deep to read: text it is
            value = None
        if isinstance(value, dict) and value:
            return [
                ((str(key),), lines_of(json.dumps({key: item}, indent=2, ensure_ascii=False)), [])
                for key, item in value.items()
            ]
        return [((), lines_of(text), [])]
    lines = lines_of(text)
    starts: list[tuple[int, str]] = []
    for number, line in enumerate(lines):
        if kind == "yaml":
            match = _YAML_KEY.match(line)
            if match and not line.startswith(("---", "...")):
                starts.append((number, line.split(":", 1)[0].strip().strip("\"'")))
        else:
            table = _TOML_TABLE.match(line)
            if table:
                starts.append((number, table.group(1)))
    if not starts:
        return [((), lines, [])]
    sections: list[Section] = []
    if any(line.strip() for line in lines[: starts[0][0]]):
        sections.append(((), lines[: starts[0][0]], []))
    edges = [*starts, (len(lines), "")]
    for (start, key), (end, _) in itertools.pairwise(edges):
        sections.append(((key,), lines[start:end], []))
    return sections


# --- splitting at paragraphs, lines, words -----------------------------------------------------------------------


def split_lines(lines: Sequence[str], limit: int, fences: Sequence[tuple[int, int]] = ()) -> list[str]:
    """Contiguous runs of paragraphs, each at most ``limit`` characters; code blocks whole where they fit."""
    parts: list[str] = []
    current = ""
    for start, end, is_code in _blocks(lines, fences):
        block = "".join(lines[start:end])
        if len(block.strip("\n")) > limit:
            parts.append(current)
            current = ""
            pieces = _split_code(lines[start:end], limit) if is_code else _pack(lines[start:end], limit)
            parts.extend(pieces)
            continue
        if len((current + block).strip("\n")) > limit:
            parts.append(current)
            current = ""
        current += block
    parts.append(current)
    return [part.strip("\n") for part in parts if part.strip()]


def _blocks(lines: Sequence[str], fences: Sequence[tuple[int, int]]) -> list[tuple[int, int, bool]]:
    """Paragraphs (with the blank lines after them) and code blocks, as line ranges covering every line."""
    fence_at = {start: end for start, end in fences}
    blocks: list[tuple[int, int, bool]] = []
    number = 0
    while number < len(lines):
        if number in fence_at:
            end = max(fence_at[number], number + 1)
            is_code = True
        else:
            end = number
            while end < len(lines) and lines[end].strip() and end not in fence_at:
                end += 1
            end = max(end, number + 1)
            is_code = False
        while end < len(lines) and not lines[end].strip() and end not in fence_at:
            end += 1
        blocks.append((number, end, is_code))
        number = end
    return blocks


def _split_code(lines: Sequence[str], limit: int) -> list[str]:
    """A code fence too long for one chunk, split at lines; each part re-opens and closes the fence."""
    opening = lines[0] if lines and _FENCE_OPEN.match(lines[0]) else None
    if opening is None:
        return _pack(lines, limit)
    body = list(lines[1:])
    while body and not body[-1].strip():
        body.pop()
    closing = body.pop() if body and body[-1].strip().startswith(opening.strip()[:3]) else opening.strip()[:3] + "\n"
    opening = opening if opening.endswith("\n") else opening + "\n"
    closing = closing if closing.endswith("\n") else closing + "\n"
    inner_limit = limit - len(opening) - len(closing)
    if inner_limit < MIN_BODY:
        return _pack(lines, limit)
    return [opening + part + "\n" + closing for part in _pack(body, inner_limit - 1)]


def _pack(lines: Sequence[str], limit: int) -> list[str]:
    """Whole lines while they fit; a line longer than ``limit`` is split between words."""
    parts: list[str] = []
    current = ""
    for line in lines:
        if len(line.rstrip("\n")) > limit:
            parts.append(current)
            current = ""
            parts.extend(_split_words(line.rstrip("\n"), limit))
            continue
        if len((current + line).rstrip("\n")) > limit:
            parts.append(current)
            current = ""
        current += line
    parts.append(current)
    return [part.strip("\n") for part in parts if part.strip()]


def _split_words(text: str, limit: int) -> list[str]:
    """At whitespace; only a single word longer than ``limit`` is cut, as it cannot be kept whole."""
    parts: list[str] = []
    current = ""
    for word in re.findall(r"\S+\s*", text):
        if len(current) + len(word.rstrip()) > limit:
            parts.append(current)
            current = ""
        while len(word.rstrip()) > limit:
            parts.append(word[:limit])
            word = word[limit:]
        current += word
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]
