"""mem0's own Qdrant store (qdrant-client) with Engram's payload indexes and filter grammar: a Qdrant server, or
qdrant-client's local mode for tests and small installs."""

from __future__ import annotations

import builtins
import contextlib
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from mem0.vector_stores.qdrant import Qdrant
from pydantic import BaseModel, ConfigDict
from qdrant_client import QdrantClient, models

from app.memories import lexical
from app.memories.vector_stores import hybrid, relex
from app.memories.vector_stores.base import (
    KEYWORD_FIELDS,
    SCROLL_PAGE,
    TENANT_FIELD,
    StoredPoint,
    StoreError,
    pack_vector,
    valid_uuid,
    wanted,
)
from app.memories.vector_stores.filters import FilterError, idf_corpus, parse_filters, tenants, to_client_filter

log = logging.getLogger(__name__)

T = TypeVar("T")


class ServerQdrantConfig(BaseModel):
    """What mem0's VectorStoreFactory passes to ``ServerQdrantStore``."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    collection_name: str = "engram_memories"
    embedding_model_dims: int = 384
    url: str | None = None
    api_key: str | None = None
    path: str | None = None


# The lexical prefetch measures word rarity over the searching tenant's points alone (``SearchParams.idf`` with a
# corpus, ``filters.idf_corpus``): Qdrant has it from 1.19 on. An older server does not know the parameter, and
# every tenant's words would weigh in every tenant's scores.
TENANT_IDF_SINCE = (1, 19)


def scopes_idf_by_tenant(version: str) -> bool:
    """Whether a Qdrant server of ``version`` (as its root endpoint reports it) measures IDF over a corpus filter."""
    try:
        major, minor = (int(part) for part in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= TENANT_IDF_SINCE


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    def wrapper(self: ServerQdrantStore, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            try:
                return method(self, *args, **kwargs)
            except (FilterError, StoreError):
                raise
            except Exception as exc:
                raise StoreError(f"qdrant failure: {exc}") from exc

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    return wrapper


def _formula() -> models.FormulaQuery:
    """``hybrid``'s fusion: the dense weight is DENSE_WEIGHT, plus the document difference for document sections."""
    is_document = models.FieldCondition(key=hybrid.KIND_FIELD, match=models.MatchValue(value=lexical.DOCUMENT_KIND))
    weight = models.SumExpression(
        sum=[
            hybrid.DENSE_WEIGHT,
            models.MultExpression(mult=[hybrid.DOCUMENT_DENSE_WEIGHT - hybrid.DENSE_WEIGHT, is_document]),
        ]
    )
    dense = models.MaxExpression(max=["$score[0]", 0.0])
    lexical_term = models.DivExpression(
        div=models.DivParams(
            left="$score[1]", right=models.SumExpression(sum=["$score[1]", hybrid.SATURATION]), by_zero_default=0.0
        )
    )
    rest = models.SumExpression(sum=[1.0, models.NegExpression(neg=weight)])
    return models.FormulaQuery(
        formula=models.SumExpression(
            sum=[models.MultExpression(mult=[weight, dense]), models.MultExpression(mult=[rest, lexical_term])]
        ),
        defaults={"$score[0]": 0.0, "$score[1]": 0.0},
    )


_FORMULA = _formula()


def _point(point_id: str, vector: Sequence[float], payload: dict[str, Any]) -> models.PointStruct:
    sparse = hybrid.sparse_of(payload)
    vectors: dict[str, Any] = {hybrid.DENSE: list(vector)}
    if sparse.indices:
        vectors[hybrid.LEXICAL] = models.SparseVector(indices=sparse.indices, values=sparse.values)
    return models.PointStruct(id=point_id, vector=vectors, payload=payload)


class ServerQdrantStore(Qdrant):
    """mem0's own Qdrant store with Engram's payload indexes and filter grammar.

    On a server (``url``) calls run concurrently. In qdrant-client's local mode (``path``, tests and small installs)
    every call is serialised: concurrent local-mode calls crash with ``sqlite3.OperationalError``.
    """

    def __init__(
        self,
        collection_name: str = "engram_memories",
        embedding_model_dims: int = 384,
        url: str | None = None,
        api_key: str | None = None,
        path: str | None = None,
    ) -> None:
        if not url and not path:
            raise ValueError("ServerQdrantStore needs a url or a path")
        local = not url
        # True when opening found a dense-only collection (from before hybrid search) and emptied it to rebuild it.
        self.rebuilt = False
        self._lock: contextlib.AbstractContextManager[Any] = threading.RLock() if local else contextlib.nullcontext()
        try:
            with self._lock:
                if local:
                    super().__init__(collection_name, embedding_model_dims, path=path, on_disk=True)
                else:
                    client = QdrantClient(url=url, api_key=api_key)
                    version = client.info().version
                    if not scopes_idf_by_tenant(version):
                        client.close()
                        since = ".".join(map(str, TENANT_IDF_SINCE))
                        raise StoreError(
                            f"the Qdrant server at {url} is version {version}: Engram needs {since} or later "
                            "(it measures how rare a word is among each tenant's own memories)"
                        )
                    super().__init__(collection_name, embedding_model_dims, client=client, on_disk=True)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"cannot open qdrant collection {collection_name!r}: {exc}") from exc
        self.is_local = local
        # mem0's own BM25 (fastembed) would download a model, and ours is fused in ``search``: keep mem0's off.
        self._bm25_encoder = False
        self._has_bm25_slot = False

    def create_col(self, vector_size: int, on_disk: bool, distance: Any = models.Distance.COSINE) -> None:
        """The collection with the dense vector and our lexical one; a dense-only one is emptied to be rebuilt."""
        if self.client.collection_exists(self.collection_name):
            sparse = self.client.get_collection(self.collection_name).config.params.sparse_vectors or {}
            if hybrid.LEXICAL in sparse:
                self._create_filter_indexes()
                return
            # Qdrant cannot add a vector to an existing collection; start-up repair (or `engram reindex`) refills it.
            log.warning("qdrant collection %r predates hybrid search: rebuilding it", self.collection_name)
            self.client.delete_collection(self.collection_name)
            self.rebuilt = True
        self.client.create_collection(
            self.collection_name,
            vectors_config={hybrid.DENSE: models.VectorParams(size=vector_size, distance=distance, on_disk=on_disk)},
            sparse_vectors_config={hybrid.LEXICAL: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        )
        self._create_filter_indexes()

    def _create_filter_indexes(self) -> None:
        """The tenant index (``is_tenant``) plus the fields every read filters on. Local mode has no indexes."""
        if self.is_local:  # set by mem0's Qdrant.__init__ before it creates the collection
            return
        indexes: list[tuple[str, Any]] = [
            (TENANT_FIELD, models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)),
            *((field, models.PayloadSchemaType.KEYWORD) for field in KEYWORD_FIELDS),
        ]
        for field, schema in indexes:
            self.client.create_payload_index(self.collection_name, field_name=field, field_schema=schema, wait=True)

    def _create_filter(self, filters: dict[str, Any]) -> models.Filter | None:
        return to_client_filter(parse_filters(filters))

    @_locked
    def insert(
        self,
        vectors: Sequence[Sequence[float]],
        payloads: Sequence[dict[str, Any]] | None = None,
        ids: Sequence[str] | None = None,
    ) -> None:
        if ids is None:
            ids = [str(uuid.uuid4()) for _ in vectors]
        points = [
            _point(str(pid), vector, dict(payloads[i]) if payloads else {})
            for i, (pid, vector) in enumerate(zip(ids, vectors, strict=True))
        ]
        self.client.upsert(self.collection_name, points=points)

    @_locked
    def search(
        self, query: str, vectors: list[float], top_k: int = 5, filters: dict[str, Any] | None = None
    ) -> list[Any]:
        """Hybrid, in two passes: as ``EdgeVectorStore.search``."""
        limit = wanted(top_k)
        conditions = parse_filters(filters)
        query_filter = to_client_filter(conditions)
        corpus = to_client_filter(idf_corpus(conditions))
        idf = models.SearchParams(idf=models.IdfCorpusParams(corpus=corpus)) if corpus is not None else None
        dense = builtins.list(vectors)
        sparse = lexical.query_vector(query or "", tenants(conditions))
        if sparse.indices:
            first = self._hybrid(dense, sparse, hybrid.FEEDBACK_POOL, query_filter, idf, with_payload=False)
            sparse = hybrid.expand(sparse, [hybrid.lexical_of(p.vector) for p in first])
        return self._hybrid(dense, sparse, limit, query_filter, idf, with_payload=True)

    def _hybrid(
        self,
        dense: builtins.list[float],
        sparse: lexical.Sparse,
        limit: int,
        query_filter: models.Filter | None,
        idf: models.SearchParams | None,
        *,
        with_payload: bool,
    ) -> builtins.list[Any]:
        prefetch = [
            models.Prefetch(query=dense, using=hybrid.DENSE, limit=hybrid.dense_prefetch(limit), filter=query_filter)
        ]
        if sparse.indices:
            vector = models.SparseVector(indices=sparse.indices, values=sparse.values)
            prefetch.append(
                models.Prefetch(
                    query=vector,
                    using=hybrid.LEXICAL,
                    limit=hybrid.lexical_prefetch(limit),
                    filter=query_filter,
                    params=idf,  # on the prefetch that scores the sparse vector: the outer params reach none
                )
            )
        hits = self.client.query_points(
            self.collection_name,
            prefetch=prefetch,
            query=_FORMULA,
            query_filter=query_filter,
            limit=limit,
            with_payload=with_payload,
            with_vectors=False if with_payload else [hybrid.LEXICAL],
        )
        return builtins.list(hits.points)

    def search_batch(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("mem0 batches searches only for fact extraction's entity store, which is off")

    @_locked
    def update(
        self, vector_id: str, vector: Sequence[float] | None = None, payload: dict[str, Any] | None = None
    ) -> None:
        """Like mem0's: both given -> replace the point (lexical vector recomputed); payload only -> merge into it."""
        pid = str(vector_id)
        if vector is not None and payload is not None:
            self.client.upsert(self.collection_name, points=[_point(pid, vector, dict(payload))])
            return
        if payload is not None:
            self.client.set_payload(self.collection_name, payload=dict(payload), points=[pid])
        if vector is not None:
            points = [models.PointVectors(id=pid, vector={hybrid.DENSE: list(vector)})]
            self.client.update_vectors(self.collection_name, points=points)

    list_cols = _locked(Qdrant.list_cols)
    delete_col = _locked(Qdrant.delete_col)
    col_info = _locked(Qdrant.col_info)
    list = _locked(Qdrant.list)
    reset = _locked(Qdrant.reset)

    def keyword_search(self, query: str, top_k: int = 5, filters: dict[str, Any] | None = None) -> None:
        """No BM25 (see the class docstring)."""
        return None

    @_locked
    def delete(self, vector_id: str) -> None:
        if valid_uuid(vector_id):
            Qdrant.delete(self, vector_id)

    @_locked
    def get(self, vector_id: str) -> StoredPoint | None:
        if not valid_uuid(vector_id):
            return None
        found = self.client.retrieve(self.collection_name, ids=[str(vector_id)], with_payload=True)
        return StoredPoint(str(found[0].id), dict(found[0].payload or {})) if found else None

    @_locked
    def ids(self, filters: Mapping[str, Any] | None = None) -> set[str]:
        query_filter = to_client_filter(parse_filters(filters))
        found: set[str] = set()
        offset: Any = None
        while True:
            records, offset = self.client.scroll(
                self.collection_name, scroll_filter=query_filter, limit=SCROLL_PAGE, offset=offset, with_payload=False
            )
            found.update(str(r.id) for r in records)
            if offset is None:
                return found

    @_locked
    def count(self, filters: Mapping[str, Any] | None = None) -> int:
        query_filter = to_client_filter(parse_filters(filters))
        return self.client.count(self.collection_name, count_filter=query_filter, exact=True).count

    @_locked
    def vectors(self, ids: Sequence[str]) -> dict[str, tuple[dict[str, Any], builtins.list[float]]]:
        """The payload and vector of each point among ``ids`` (edge sync ships vectors instead of re-embedding)."""
        wanted_ids = [str(i) for i in ids if valid_uuid(i)]
        if not wanted_ids:
            return {}
        found = self.client.retrieve(self.collection_name, ids=wanted_ids, with_payload=True, with_vectors=True)
        dense = {str(r.id): (dict(r.payload or {}), hybrid.dense_of(r.vector)) for r in found}
        return {pid: (payload, vector) for pid, (payload, vector) in dense.items() if vector is not None}

    @_locked
    def packed_vectors(self, ids: Sequence[str]) -> dict[str, tuple[str, bytes]]:
        """The content and dense vector (``pack_vector``) of each point among ``ids``: what edge sync ships."""
        wanted_ids = [str(i) for i in ids if valid_uuid(i)]
        if not wanted_ids:
            return {}
        found = self.client.retrieve(self.collection_name, ids=wanted_ids, with_payload=["data"], with_vectors=True)
        out: dict[str, tuple[str, bytes]] = {}
        for r in found:
            packed = pack_vector(hybrid.dense_of(r.vector))
            if packed is not None:
                out[str(r.id)] = (str((r.payload or {}).get("data", "")), packed)
        return out

    def relex(self) -> int:
        """Rewrite the lexical vectors that ``lexical`` would now make otherwise (``relex``); how many were."""
        return relex.relex(self._relex_page)

    @_locked
    def _relex_page(self, offset: Any, write: bool) -> tuple[int, Any]:
        records, after = self.client.scroll(
            self.collection_name,
            limit=relex.RELEX_PAGE,
            offset=offset,
            with_payload=True,
            with_vectors=[hybrid.LEXICAL],
        )
        fixes = relex.stale(records)
        if write and fixes:
            self._rewrite(fixes)
            # Another instance may have written one of these points between our read and our write, and ours would
            # then be its old text's vector: read them again and put right what changed under us.
            again = self.client.retrieve(
                self.collection_name, ids=[pid for pid, _ in fixes], with_payload=True, with_vectors=[hybrid.LEXICAL]
            )
            self._rewrite(relex.stale(again))
        return len(fixes), after

    def _rewrite(self, fixes: Sequence[tuple[str, lexical.Sparse]]) -> None:
        if fixes:
            points = [
                models.PointVectors(
                    id=pid, vector={hybrid.LEXICAL: models.SparseVector(indices=s.indices, values=s.values)}
                )
                for pid, s in fixes
            ]
            self.client.update_vectors(self.collection_name, points=points, wait=True)

    @_locked
    def ping(self) -> None:
        self.client.get_collection(self.collection_name)

    def flush(self) -> None:
        """Qdrant makes its own writes durable."""

    @_locked
    def close(self) -> None:
        self.client.close()
