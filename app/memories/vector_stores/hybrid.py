"""How both stores score a search: a dense (cosine) and a lexical (BM25) prefetch, fused by one formula in the query.

score = w * max(cosine, 0) + (1 - w) * bm25 / (bm25 + SATURATION)

with w = DENSE_WEIGHT, or DOCUMENT_DENSE_WEIGHT for a section of an indexed document. Both terms lie in [0, 1], so the
fused score does too and reads the same on every store: about 0 for unrelated text, 0.1-0.2 for a paraphrase sharing
no word, 0.4 and more when the words match as well. DENSE_WEIGHT was tuned on a public conversational benchmark
(bench/quality.py), where a memory is a short turn and a shared word is strong evidence. A document section is long
text that shares many words with questions it does not answer, while the question's own words are often not the
docs' ("folder" for "directory"): there both terms count alike (bench/index.py, 20 questions on a docs tree: the right
section in the top 3 for 14 with DENSE_WEIGHT, 17 for any weight from 0.45 to 0.55). A point one prefetch missed
counts 0 for that term; the prefetches reach far past the caller's limit so that this rarely matters.

bm25 weighs each word by its IDF among the memories the reader may read (``filters.idf_corpus``), in both passes:
another tenant's memories never move a tenant's scores, nor which of its memories feed the second pass.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from itertools import chain
from typing import Any

from app.memories import lexical

DENSE = ""  # the dense vector keeps the unnamed slot it had before hybrid search
LEXICAL = "lexical"
DENSE_WEIGHT = 0.25
DOCUMENT_DENSE_WEIGHT = 0.5
# Where a point says it is a document section (``metadata.kind``, nested under ``meta`` in the payload).
KIND_FIELD = "meta.kind"
SATURATION = 10.0
# The dense prefetch reaches deep: a point the lexical prefetch found but the dense one did not would lose its dense
# term. Scoring a tenant's points is a scan either way (no HNSW on the embedded store), so depth costs little.
DENSE_PREFETCH = 500
LEXICAL_PREFETCH = 100

# Pseudo-relevance feedback (a second pass): the words that stand out in the first pass's best FEEDBACK_DOCS results
# (weighted by how rare they are among its first FEEDBACK_POOL) join the query with weight FEEDBACK_WEIGHT. It finds
# what the question implies but does not say ("activities" -> the hiking and picnics the best hits talk about).
FEEDBACK_DOCS = 4
FEEDBACK_POOL = 100
FEEDBACK_TERMS = 15
FEEDBACK_WEIGHT = 0.25


def dense_of(vectors: Any) -> list[float] | None:
    """The dense vector of a point as a store returns it: by name beside the lexical one (or alone, unnamed)."""
    if isinstance(vectors, dict):
        vectors = vectors.get(DENSE)
    if not isinstance(vectors, list) or not vectors:
        return None
    # Both clients give plain floats: checking each one's type costs a tenth of isinstance per element, which
    # mattered when edge sync reads a whole batch of vectors back.
    if set(map(type, vectors)) == {float}:
        return list(vectors)
    if all(isinstance(x, int | float) for x in vectors):
        return [float(x) for x in vectors]
    return None


def lexical_of(vectors: Any) -> lexical.Sparse | None:
    """The lexical vector of a point as a store returns it (both clients give ``indices`` and ``values``), if any."""
    found = vectors.get(LEXICAL) if isinstance(vectors, dict) else None
    # Not copied: qdrant-edge makes new lists on each read and nothing changes qdrant-client's (a third of the cost).
    return None if found is None else lexical.Sparse(found.indices, found.values)


def dense_prefetch(limit: int) -> int:
    return max(DENSE_PREFETCH, 4 * limit)


def lexical_prefetch(limit: int) -> int:
    return max(LEXICAL_PREFETCH, 4 * limit)


def expand(query: lexical.Sparse, ranked: Sequence[lexical.Sparse | None]) -> lexical.Sparse:
    """The query with feedback terms: ``ranked`` are the lexical vectors of the first pass's results, best first."""
    pool = [v for v in ranked[:FEEDBACK_POOL] if v is not None]
    if len(pool) < 2:
        return query
    # Counted in C: this ran on every search, and counting word by word in Python took 0.3 ms of it.
    seen_in = Counter(chain.from_iterable(vector.indices for vector in pool))
    asked = set(query.indices)
    rarity = len(pool) + 1
    weight: defaultdict[int, float] = defaultdict(float)
    # Only results that share a word with the query vouch for others: a tiny collection's best hits may be unrelated.
    for vector in pool[:FEEDBACK_DOCS]:
        if asked.isdisjoint(vector.indices):
            continue
        for index, value in zip(vector.indices, vector.values, strict=True):
            if index not in asked:
                weight[index] += value * math.log(rarity / (seen_in[index] + 0.5))
    chosen = heapq.nlargest(FEEDBACK_TERMS, ((w, i) for i, w in weight.items() if w > 0))
    terms = dict(zip(query.indices, query.values, strict=True)) | {i: FEEDBACK_WEIGHT for _, i in chosen}
    indices = sorted(terms)
    return lexical.Sparse(indices, [terms[i] for i in indices])


def sparse_of(payload: Mapping[str, Any] | None) -> lexical.Sparse:
    return lexical.payload_vector(payload or {})
