"""How the dashboard shows a memory: its text as safe markdown, a document chunk without its repeated heading path,
and the differences between two versions. Pure."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markupsafe import Markup

# Links the pages may carry; anything else (javascript:, data:, vbscript:, file:, ...) stays text.
_SAFE_SCHEMES = ("http://", "https://", "mailto:")
# Unchanged lines shown around each change; longer unchanged stretches fold to a count.
DIFF_CONTEXT = 2


class _SafeMarkdown(MarkdownIt):
    def validateLink(self, url: str) -> bool:
        lowered = url.strip().lower()
        return lowered.startswith(_SAFE_SCHEMES) or (lowered.startswith(("#", "/")) and not lowered.startswith("//"))


def _parser() -> MarkdownIt:
    # CommonMark with raw HTML off: every "<" the user wrote comes out escaped. Images are not loaded (the page loads
    # nothing from elsewhere, and the CSP would block it anyway): each becomes a link to the picture, "image: <alt>".
    md = _SafeMarkdown("commonmark", {"html": False})
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image_as_link)
    return md


_REL = "nofollow noopener noreferrer"


def _link_open(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    tokens[idx].attrSet("rel", _REL)
    return str(self.renderToken(tokens, idx, options, env))


def _image_as_link(self: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    # The parser kept only images whose address passed validateLink, as for links.
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env)
    label = escapeHtml(f"image: {alt}" if alt else "image")
    return f'<a href="{escapeHtml(str(token.attrGet("src") or ""))}" rel="{_REL}">{label}</a>'


_MD = _parser()


def markdown(text: str) -> Markup:
    """The text as HTML: a small CommonMark subset, raw HTML escaped, links limited to http(s), mailto and local."""
    return Markup(_MD.render(text))


def body_of(content: str, source: str | None) -> str:
    """A document chunk's text without the heading path it starts with (the page shows the source on its own)."""
    if source and content.startswith(source + "\n\n"):
        return content[len(source) + 2 :]
    return content


@dataclass(frozen=True, slots=True)
class DiffLine:
    kind: str  # "same", "removed", "added" or "skipped" (text then says how many unchanged lines)
    text: str


def diff(old: str | None, new: str | None) -> list[DiffLine]:
    """Line by line, what changed from ``old`` to ``new``, with a little unchanged context around each change."""
    before, after = (old or "").splitlines(), (new or "").splitlines()
    lines: list[DiffLine] = []
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for group in matcher.get_grouped_opcodes(DIFF_CONTEXT):
        if lines or group[0][1] > 0:
            lines.append(DiffLine("skipped", "…"))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                lines.extend(DiffLine("same", line) for line in before[i1:i2])
                continue
            lines.extend(DiffLine("removed", line) for line in before[i1:i2])
            lines.extend(DiffLine("added", line) for line in after[j1:j2])
    return lines
