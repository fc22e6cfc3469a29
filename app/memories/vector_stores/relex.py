"""Lexical vectors brought back in line with ``lexical`` after its mapping changed (``lexical.SCHEME``).

A point's lexical vector is a pure function of its payload, so a store can rewrite it in place, without the
database and without embedding anything again. Both stores walk their points a page at a time with ``relex``; each
page is read, compared and rewritten by the store (``fix_page``), which keeps writes to those points out meanwhile
where it can.

The first page decides whether anything is to be done, and is rewritten last: a run that stops half-way (the server
stopped, the machine lost power) leaves it stale, so the next start sees that and walks everything again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from app.memories import lexical
from app.memories.vector_stores import hybrid

# Points read and rewritten at a time: the edge store holds its write lock over a page, so a page is short.
RELEX_PAGE = 256

# ``fix_page(offset, write)``: the page at ``offset`` (None: the first), how many of its points were stale, and the
# next page's offset (None after the last). Stale points are rewritten only when ``write``.
FixPage = Callable[[Any, bool], tuple[int, Any]]


def relex(fix_page: FixPage) -> int:
    """Rewrite every stale lexical vector; how many were. Nothing is read past the first page when it is current."""
    stale, offset = fix_page(None, False)
    if not stale:
        return 0
    fixed = 0
    while offset is not None:
        count, offset = fix_page(offset, True)
        fixed += count
    count, _ = fix_page(None, True)
    return fixed + count


def stale(records: Iterable[Any]) -> list[tuple[str, lexical.Sparse]]:
    """The records (either store's, read with their payload and lexical vector) whose vector is not what ``lexical``
    makes of the payload now, by id, with the vector it makes."""
    out: list[tuple[str, lexical.Sparse]] = []
    for record in records:
        current = lexical.payload_vector(record.payload or {})
        if not same(hybrid.lexical_of(record.vector), current):
            out.append((str(record.id), current))
    return out


def same(stored: lexical.Sparse | None, current: lexical.Sparse) -> bool:
    """Equal as token -> weight maps, to float32 precision (the stores keep weights as float32)."""
    if stored is None:
        return not current.indices
    kept = dict(zip(stored.indices, stored.values, strict=True))
    if kept.keys() != set(current.indices):
        return False
    pairs = zip(current.indices, current.values, strict=True)
    return all(math.isclose(kept[i], v, rel_tol=1e-5, abs_tol=1e-6) for i, v in pairs)
