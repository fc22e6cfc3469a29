"""The lexical half of hybrid search: our tokenizer and the BM25 sparse vectors both stores keep beside the dense one.

A document's vector holds BM25's term-frequency part for each token; Qdrant multiplies in the inverse document
frequency itself (the sparse vector's IDF modifier), measured over the memories the reader may read (the lexical
prefetch's IDF corpus, ``filters.idf_corpus``), so the vector depends on the memory alone: its content, the
content of the memory written just before it (``context``: a reply is found by the question it answers), the dates
it carries (its metadata's date values and when it was created, so "when" and "in May" find it), and whether it is a
section of an indexed document (long-form text, normalised for length as such). A pure function of those fields:
any store, or a machine receiving a synced memory, computes the same vector.

Token ids are CRC-32 of the tenant and the token (``token_id``): stable across processes, machines and versions,
unlike ``hash()``, and each tenant's own, so that the lexical index holds one posting list per tenant and word. With
ids shared by every tenant, a search walked each query word's postings across the whole collection and filtered them
by tenant afterwards: its cost grew with every other tenant's data (a lone search at 100 memories of its own took
2.5 ms beside 10k memories in all and 5.6 ms beside 100k). A point without a tenant, or a query whose filter names
none, uses the token's bare CRC-32. ``SCHEME`` names this mapping: a store whose points were written under another
rewrites their lexical vectors (``relex``).
"""

from __future__ import annotations

import functools
import re
import unicodedata
import zlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import snowballstemmer

# The payload field naming a point's tenant (every read filters on it: ``vector_stores.base.TENANT_FIELD``).
TENANT_FIELD = "user_id"

# BM25 parameters, tuned on conversational memories (short texts); AVG_LEN is the mean weighted token count of a
# document, fixed so that a vector never depends on the rest of the collection.
K1 = 0.9
B = 0.75
AVG_LEN = 24.0
# A section of an indexed document (metadata ``kind`` "document") is long-form text: its term frequencies are
# normalised against a typical markdown section (a real docs tree's sections average about 270 tokens), not against
# a conversational memory. Against AVG_LEN, a 300-token section's every word counted a fifth of the same word in a
# one-line sibling section, which then outranked the section that explains it.
DOCUMENT_AVG_LEN = 256.0
DOCUMENT_KIND = "document"
CONTEXT_WEIGHT = 0.5
DATE_WEIGHT = 1.0
CONTEXT_CHARS = 1000
MAX_TOKEN_CHARS = 40

# English stopwords (the classic Snowball list, plus contractions split at the apostrophe).
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being below between
    both but by can cannot could did do does doing down during each few for from further had has have having
    he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
    nor not now of off on once only or other ought our ours ourselves out over own same she should so some
    such than that the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you your yours yourself
    yourselves d ll m re s t ve don didn doesn isn wasn aren weren hasn haven hadn won wouldn shouldn couldn
    mustn shan let
    """.split()  # noqa: SIM905
)
MONTHS = (
    "january february march april may june july august september october november december".split()  # noqa: SIM905
)
_MONTH_NAMES = frozenset(MONTHS) | {m[:3] for m in MONTHS} | {"sept"}
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_YEAR = re.compile(r"\b(1[89]\d\d|2[01]\d\d)\b")


@dataclass(frozen=True, slots=True)
class Sparse:
    """A sparse vector: token ids and their weights, ids ascending."""

    indices: list[int]
    values: list[float]


@functools.cache
def _stemmer() -> Any:
    return snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    stemmed: str = _stemmer().stemWord(word)
    return stemmed


def _fold(text: str) -> str:
    """Lowercase, accents removed (café -> cafe), typographic apostrophes made plain."""
    if text.isascii():  # nothing to decompose: the per-character pass below was half of indexing a memory's words
        return text.lower()
    text = unicodedata.normalize("NFKD", text.lower().replace("\u2019", "'"))
    return "".join(c for c in text if not unicodedata.combining(c))


def tokenize(text: str) -> list[str]:
    """Words of ``text`` as search tokens: folded, possessives and stopwords dropped, stemmed (Snowball English)."""
    tokens: list[str] = []
    for word in _WORD.findall(_fold(text)):
        if word.endswith("'s"):
            word = word[:-2]
        for part in word.split("'"):
            if part and part not in STOPWORDS and len(part) <= MAX_TOKEN_CHARS:
                tokens.append(_stem(part))
    return tokens


# Changes whenever a document's vector would change for the same payload: stores compare a sample of their points
# with ``payload_vector`` and rewrite every lexical vector when they differ (``vector_stores.relex``).
SCHEME = "tenant-crc32"


@functools.lru_cache(maxsize=4096)
def tenant_seed(tenant: str | None) -> int:
    """The CRC-32 state after the tenant and a NUL: a token's id continues it (``token_id``)."""
    return zlib.crc32(tenant.encode() + b"\0") if tenant else 0


def token_id(token: str, tenant: str | None = None) -> int:
    """CRC-32 of ``tenant``, NUL, ``token`` (of the token alone without a tenant)."""
    return _continued(token, tenant_seed(tenant))


def _continued(token: str, seed: int) -> int:
    """The id of ``token`` from its tenant's ``tenant_seed``, taken once per vector rather than once per token."""
    return zlib.crc32(token.encode(), seed)


def date_tokens(value: Any) -> list[str]:
    """The tokens of a date: an ISO 8601 timestamp becomes its day, month name and year; a text naming a month and a
    year is tokenized as it is. Anything else is not a date and gives nothing."""
    if not isinstance(value, str) or not value or len(value) > 100:
        return []
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        words = set(_WORD.findall(_fold(value)))
        return tokenize(value) if words & _MONTH_NAMES and _YEAR.search(value) else []
    return tokenize(f"{moment.day} {MONTHS[moment.month - 1]} {moment.year}")


def _dates(metadata: Mapping[str, Any] | None, created_at: str | None) -> list[str]:
    tokens = [token for value in (metadata or {}).values() for token in date_tokens(value)]
    if not tokens and created_at:
        # The memory's own time stands in only when the caller gave none: theirs says when it happened.
        tokens = date_tokens(created_at)
    return tokens


def _weights(weighted: Iterable[tuple[list[str], float]], average_length: float, tenant: str | None) -> Sparse:
    seed = tenant_seed(tenant)
    counts: defaultdict[int, float] = defaultdict(float)
    for tokens, weight in weighted:
        for token in tokens:
            counts[_continued(token, seed)] += weight
    length = sum(counts.values())
    norm = K1 * (1 - B + B * length / average_length)
    indices = sorted(counts)
    return Sparse(indices, [counts[i] * (K1 + 1) / (counts[i] + norm) for i in indices])


def document_vector(
    content: str,
    *,
    context: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    created_at: str | None = None,
    tenant: str | None = None,
) -> Sparse:
    """The BM25 term-frequency vector of a memory of ``tenant`` (Qdrant applies the IDF)."""
    return _weights(
        [
            (tokenize(content), 1.0),
            (tokenize(context[:CONTEXT_CHARS]) if context else [], CONTEXT_WEIGHT),
            (_dates(metadata, created_at), DATE_WEIGHT),
        ],
        DOCUMENT_AVG_LEN if metadata and metadata.get("kind") == DOCUMENT_KIND else AVG_LEN,
        tenant,
    )


def payload_vector(payload: Mapping[str, Any]) -> Sparse:
    """``document_vector`` of an index payload (content in ``data``, caller's metadata in ``meta``, tenant in
    ``user_id``)."""
    meta = payload.get("meta")
    tenant = payload.get(TENANT_FIELD)
    return document_vector(
        str(payload.get("data") or ""),
        context=payload.get("context") if isinstance(payload.get("context"), str) else None,
        metadata=meta if isinstance(meta, Mapping) else None,
        created_at=payload.get("created_at") if isinstance(payload.get("created_at"), str) else None,
        tenant=tenant if isinstance(tenant, str) else None,
    )


def query_vector(text: str, tenants: Iterable[str] = ()) -> Sparse:
    """Each distinct token of the query once (weight 1): the score is then the sum of the matched tokens' BM25.

    In the ids of each of ``tenants`` (those the search's filter names): a point matches only its own tenant's ids,
    so a search over several tenants scores each point as a search over its tenant alone would."""
    tokens = set(tokenize(text))
    seeds = {tenant_seed(tenant) for tenant in tenants} or {0}
    indices = sorted({_continued(token, seed) for token in tokens for seed in seeds})
    return Sparse(indices, [1.0] * len(indices))
