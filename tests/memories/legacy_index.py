"""Indexes as earlier versions of Engram left them on disk, written with the stores' own engines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.memories import lexical


def shared_token_ids(payload: dict[str, Any]) -> lexical.Sparse:
    """The lexical vector the code before tenant-scoped token ids wrote: each token's bare CRC-32, whoever's."""
    return lexical.payload_vector({key: value for key, value in payload.items() if key != "user_id"})


def with_shared_token_ids(shard_path: Path | None, local_path: Path) -> int:
    """Give every point of the closed index (the qdrant-edge shard at ``shard_path``, else qdrant-client's local
    collection under ``local_path``) the lexical vector of ``shared_token_ids``. Returns how many points it rewrote."""
    if shard_path is not None:
        import qdrant_edge as qe

        shard = qe.EdgeShard.load(str(shard_path))
        records, _ = shard.scroll(qe.ScrollRequest(limit=10_000, with_payload=True))
        vectors = [
            qe.PointVectors(r.id, {"lexical": qe.SparseVector(v.indices, v.values)})
            for r in records
            for v in [shared_token_ids(r.payload or {})]
        ]
        shard.update(qe.UpdateOperation.update_vectors(vectors))
        shard.flush()
        shard.close()
        return len(vectors)
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(local_path))
    found, _ = client.scroll("engram_memories", limit=10_000, with_payload=True)
    points = [
        models.PointVectors(id=r.id, vector={"lexical": models.SparseVector(indices=v.indices, values=v.values)})
        for r in found
        for v in [shared_token_ids(r.payload or {})]
    ]
    client.update_vectors("engram_memories", points=points)
    client.close()
    return len(points)
