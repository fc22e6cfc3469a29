"""What each Mem0 Platform call means in Engram: every one goes through MemoryService, so every rule of Engram
(scopes, limits, tenant isolation, the history, the change log) holds for Mem0's client too. Nothing here is a
second store."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from app.accounts import repository as accounts
from app.accounts.principal import Principal
from app.db import Database
from app.errors import AppError, NotFound, NotSupported, ValidationFailed
from app.identity import Identity, validate_name
from app.mem0compat import filters as mem0_filters
from app.mem0compat.mapping import APP_ID_KEY, split_metadata, to_mem0
from app.mem0compat.repository import ever_named, live_records
from app.memories.records import to_out
from app.memories.schemas import MAX_END_USER, MemoryIn, MemoryPatch, SearchIn
from app.memories.scopes import readable_keys
from app.memories.service import MemoryService, resolve_identity
from app.validation_words import in_words

# Deletes go in chunks: each is all or none, as Engram's own batch delete is.
DELETE_CHUNK = 100
MAX_TOP_K = 100
# How far down the ranking a search looks for matches of a filter the index cannot apply (metadata, categories,
# dates, NOT): far enough for an account of tens of thousands of memories, bounded so one search stays cheap.
MAX_SEARCH_DEPTH = 6400
MAX_PAGE_SIZE = 1000
MAX_BATCH = 1000
# Fields of an add that change nothing here (Engram always answers synchronously, in one output format).
_IGNORED_ADD_FIELDS = frozenset({"async_mode", "version", "output_format", "org_id", "project_id", "filters"})
_SUPPORTED_ADD_FIELDS = frozenset({"messages", "metadata", "infer", *mem0_filters.ENTITY_IDS})
# Search options that would need what Engram does not have; a false or empty value asks for nothing.
_UNSUPPORTED_SEARCH_FIELDS = ("rerank", "keyword_search", "fields", "reference_date", "latest_only", "show_expired")
# Exportable memory fields: a schema naming only these can be filled without an LLM.
_EXPORT_FIELDS = frozenset(
    {"id", "memory", "user_id", "agent_id", "app_id", "run_id", "metadata", "categories", "created_at", "updated_at"}
)


def _text_field(body: Mapping[str, Any], key: str, *, max_length: int = 64) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > max_length:
        raise ValidationFailed(f"{key} must be a non-empty string of at most {max_length} characters", field=key)
    return value


def _entities(body: Mapping[str, Any]) -> dict[str, str | None]:
    """The entity ids of an add: top level (as Mem0's client sends them) or inside ``filters``."""
    nested = body.get("filters") or {}
    if not isinstance(nested, Mapping):
        raise ValidationFailed("filters must be an object", field="filters")
    merged = {key: body.get(key, nested.get(key)) for key in mem0_filters.ENTITY_IDS}
    entities = {
        "user_id": _text_field(merged, "user_id", max_length=MAX_END_USER),
        "agent_id": _text_field(merged, "agent_id"),
        "app_id": _text_field(merged, "app_id", max_length=128),
        "run_id": _text_field(merged, "run_id"),
    }
    for key, part in (("run_id", "session"), ("agent_id", "agent")):
        if entities[key] is not None:
            try:
                validate_name(entities[key] or "", part)
            except AppError as exc:
                raise ValidationFailed(f"{key}: {exc.message} (it is Engram's {part} name)", field=key) from None
    return entities


def _messages(body: Mapping[str, Any]) -> list[str]:
    messages = body.get("messages")
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    if not isinstance(messages, list) or not messages:
        raise ValidationFailed("messages must be a non-empty list of {role, content}", field="messages")
    texts: list[str] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
            raise ValidationFailed(f"messages[{i}] must be {{role, content}} with text content", field="messages")
        if message.get("role") == "system":  # instructions to a model, not something said to remember
            continue
        if message["content"].strip():
            texts.append(message["content"])
    if not texts:
        raise ValidationFailed("messages hold no user or assistant text to remember", field="messages")
    return texts


def _metadata(value: Any, app_id: str | None) -> dict[str, Any]:
    if value is None:
        metadata: dict[str, Any] = {}
    elif isinstance(value, Mapping):
        metadata = dict(value)
    else:
        raise ValidationFailed("metadata must be an object", field="metadata")
    if APP_ID_KEY in metadata:
        raise ValidationFailed(f"metadata key {APP_ID_KEY!r} is reserved: it holds app_id", field="metadata")
    if app_id is not None:
        metadata[APP_ID_KEY] = app_id
    return metadata


def _validation(exc: ValidationError) -> ValidationFailed:
    return ValidationFailed(in_words(exc))


def _int(value: Any, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValidationFailed(f"{name} must be an integer", field=name) from None
    if isinstance(value, bool) or not low <= number <= high:
        raise ValidationFailed(f"{name} must be between {low} and {high}", field=name)
    return number


class Mem0Service:
    """Mem0 Platform calls on behalf of a principal, over Engram's MemoryService."""

    def __init__(self, db: Database, memories: MemoryService) -> None:
        self.db = db
        self.memories = memories

    async def ping(self, principal: Principal) -> dict[str, Any]:
        """What Mem0's client reads when it starts: the account as one project."""
        async with self.db.session() as session:
            user = await accounts.get_user(session, principal.user_id)
        return {
            "status": "ok",
            "message": "API key is valid (Engram)",
            "org_id": principal.user_id,
            "project_id": principal.user_id,
            "user_email": user.email if user is not None else None,
        }

    async def add(self, principal: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """Store the messages: each as it is with infer false, or what the LLM extracts from them with infer on."""
        unknown = sorted(
            key
            for key, value in body.items()
            if key not in _SUPPORTED_ADD_FIELDS and key not in _IGNORED_ADD_FIELDS and value not in (None, False, "")
        )
        if unknown:
            raise NotSupported(f"not supported by Engram: {', '.join(unknown)}")
        entities = _entities(body)
        texts = _messages(body)
        infer = body.get("infer", True)
        if not isinstance(infer, bool):
            raise ValidationFailed("infer must be true or false", field="infer")
        metadata = _metadata(body.get("metadata"), entities["app_id"])
        if infer:  # one conversation, one extraction (as Mem0 reads it)
            texts = ["\n".join(texts)]
        try:
            items = [
                MemoryIn(content=text, metadata=metadata, end_user=entities["user_id"], scope="user", infer=infer)
                for text in texts
            ]
        except ValidationError as exc:
            raise _validation(exc) from None
        identity = None
        if entities["run_id"] is not None or entities["agent_id"] is not None:
            identity = Identity(principal.user_id, entities["run_id"], entities["agent_id"])
        created = await self.memories.add(principal, identity, items)
        return {"results": [{**to_mem0(m), "event": m.event, "data": {"memory": m.content}} for m in created]}

    async def search(self, principal: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """Best matches first among the memories the filters name (all the key reads when they name none)."""
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValidationFailed("query must be non-empty text", field="query")
        for option in _UNSUPPORTED_SEARCH_FIELDS:
            if body.get(option):
                raise NotSupported(f"not supported by Engram: search option {option!r}")
        top_k = _int(body.get("top_k"), "top_k", 10, 1, MAX_TOP_K)
        threshold = body.get("threshold")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, int | float)):
            raise ValidationFailed("threshold must be a number between 0 and 1", field="threshold")
        wanted = self._filter(principal, body)
        try:
            request = SearchIn(query=query, limit=top_k, threshold=threshold)
        except ValidationError as exc:
            raise _validation(exc) from None
        # A filter the index cannot fully express is applied here, on the best candidates: when too few of them
        # match, look deeper (each pass four times as far), so that a match ranked far down is still found.
        depth = top_k if wanted.exact else max(top_k * 5, 50)
        while True:
            hits = await self.memories.search(principal, None, request, entities=wanted.pushdown or None, depth=depth)
            results = [m for m in (to_mem0(h) for h in hits) if wanted.matches(m)]
            if len(results) >= top_k or len(hits) < depth or depth >= MAX_SEARCH_DEPTH:
                return {"results": results[:top_k]}
            depth = min(depth * 4, MAX_SEARCH_DEPTH)

    def _filter(self, principal: Principal, body: Mapping[str, Any]) -> mem0_filters.Filter:
        """The filters of a read, with the top-level ``categories`` / dates the client may send beside them."""
        raw = body.get("filters")
        if raw is not None and not isinstance(raw, Mapping):
            raise ValidationFailed("filters must be an object", field="filters")
        extra: list[dict[str, Any]] = []
        if body.get("categories"):
            if not isinstance(body["categories"], list):
                raise ValidationFailed("categories must be a list", field="categories")
            extra.append({"categories": {"in": body["categories"]}})
        if body.get("start_date"):
            extra.append({"created_at": {"gte": body["start_date"]}})
        if body.get("end_date"):
            extra.append({"created_at": {"lte": body["end_date"]}})
        if body.get("metadata"):
            extra.append({"metadata": body["metadata"]})
        combined: dict[str, Any] | None = dict(raw) if raw else None
        if extra:
            combined = {"AND": [*([combined] if combined else []), *extra]}
        _within_binding(principal, combined)
        return mem0_filters.parse(combined)

    async def _matching(self, principal: Principal, wanted: mem0_filters.Filter) -> list[dict[str, Any]]:
        """Every memory of the account the filter names, newest first, in Mem0's shape."""
        # What the key reads through /v1 naming no session (as search reads): scope user, and its own private ones.
        keys = readable_keys(resolve_identity(principal, None, None, None))
        async with self.db.session() as session:
            records = await live_records(session, principal.user_id, keys, wanted.pushdown)
        return [m for m in (to_mem0(to_out(r)) for r in records) if wanted.matches(m)]

    async def get_all(
        self, principal: Principal, body: Mapping[str, Any], page: Any, page_size: Any, base_url: str
    ) -> dict[str, Any]:
        """One page of the memories the filters name, newest first: ``{count, next, previous, results}``."""
        number = _int(page, "page", 1, 1, 10**9)
        size = _int(page_size, "page_size", 100, 1, MAX_PAGE_SIZE)
        for option in ("show_expired", "latest_only", "fields"):
            if body.get(option):
                raise NotSupported(f"not supported by Engram: get_all option {option!r}")
        found = await self._matching(principal, self._filter(principal, body))
        start = (number - 1) * size
        link = f"{base_url}/v3/memories/?page={{}}&page_size={size}"
        return {
            "count": len(found),
            "next": link.format(number + 1) if start + size < len(found) else None,
            "previous": link.format(number - 1) if number > 1 and start - size < len(found) else None,
            "results": found[start : start + size],
        }

    async def get(self, principal: Principal, memory_id: str) -> dict[str, Any]:
        """One memory by id; another account's id answers as if it did not exist."""
        return to_mem0(await self.memories.get(principal, None, memory_id))

    async def update(self, principal: Principal, memory_id: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Change a memory's text or metadata (its app_id stays)."""
        patch = await self._patch(principal, memory_id, body)
        return to_mem0(await self.memories.update(principal, None, memory_id, patch))

    async def _patch(self, principal: Principal, memory_id: str, body: Mapping[str, Any]) -> MemoryPatch:
        if not isinstance(body, Mapping):
            raise ValidationFailed("the body must be an object")
        for option in ("timestamp", "expiration_date", "immutable"):
            if body.get(option) is not None and body.get(option) is not False:
                raise NotSupported(f"not supported by Engram: updating {option}")
        unknown = sorted(set(body) - {"text", "metadata", "timestamp", "expiration_date", "immutable", "memory_id"})
        if unknown:
            raise ValidationFailed(f"unknown fields: {', '.join(unknown)}")
        text, metadata = body.get("text"), body.get("metadata")
        if text is None and metadata is None:
            raise ValidationFailed("give text or metadata to update")
        if metadata is not None:
            _, app_id = split_metadata((await self.memories.get(principal, None, memory_id)).metadata)
            metadata = _metadata(metadata, app_id)
        try:
            return MemoryPatch(content=text, metadata=metadata)
        except ValidationError as exc:
            raise _validation(exc) from None

    async def delete(self, principal: Principal, memory_ids: Sequence[str]) -> int:
        """Delete memories by id, in chunks that are each all or none."""
        for start in range(0, len(memory_ids), DELETE_CHUNK):
            await self.memories.delete(principal, None, memory_ids[start : start + DELETE_CHUNK])
        return len(memory_ids)

    async def delete_matching(self, principal: Principal, entities: Mapping[str, Any]) -> int:
        """Delete every memory of the named entities; naming none is refused (Mem0's ``reset`` names each)."""
        # A read key hears 403 whether or not anything matches: "deleted (0)" would tell it that it may delete.
        principal.require_write()
        named = {k: v for k, v in entities.items() if k in mem0_filters.ENTITY_IDS and v not in (None, "")}
        if not named:
            raise ValidationFailed("name at least one of user_id, agent_id, app_id or run_id to delete by")
        _within_binding(principal, named)
        ids = [m["id"] for m in await self._matching(principal, mem0_filters.parse(named))]
        return await self.delete(principal, ids)

    async def history(self, principal: Principal, memory_id: str) -> list[dict[str, Any]]:
        """A memory's changes, oldest first, as Mem0's history entries."""
        page = await self.memories.history(principal, None, memory_id, limit=1000)
        async with self.db.session() as session:
            from app.memories import repository

            record = await repository.any_record(session, principal.user_id, memory_id)
        metadata, _ = split_metadata(record.metadata_ if record else None)
        return [
            {
                "id": f"{memory_id}:{i}",
                "memory_id": memory_id,
                "input": [],
                "old_memory": entry.old_content,
                "new_memory": entry.new_content,
                "user_id": record.end_user if record else None,
                "categories": list(record.tags or []) if record else [],
                "event": entry.event,
                "metadata": metadata,
                "created_at": entry.created_at.isoformat(),
                "updated_at": entry.created_at.isoformat(),
            }
            for i, entry in enumerate(page.history)
        ]

    async def batch_update(self, principal: Principal, body: Any) -> dict[str, Any]:
        """Update many memories, all or none: every one is checked before any is changed."""
        memories = self._batch(body)
        patches: dict[str, MemoryPatch] = {}
        for item in memories:
            memory_id = item.get("memory_id")
            if not isinstance(memory_id, str):
                raise ValidationFailed("each memory needs a memory_id", field="memories")
            await self.memories.get(principal, None, memory_id)  # a missing id changes nothing
            patch = await self._patch(principal, memory_id, item)
            if memory_id in patches:  # named again: as if applied in turn, the later fields win
                earlier = patches[memory_id].model_dump(exclude_none=True)
                patch = MemoryPatch.model_validate({**earlier, **patch.model_dump(exclude_none=True)})
            patches[memory_id] = patch
        await self.memories.update_many(principal, None, patches)
        return {"message": f"Successfully updated {len(memories)} memories"}

    async def batch_delete(self, principal: Principal, body: Any) -> dict[str, Any]:
        """Delete many memories by id (each chunk of 100 all or none)."""
        ids = []
        for item in self._batch(body):
            if not isinstance(item.get("memory_id"), str):
                raise ValidationFailed("each memory needs a memory_id", field="memories")
            ids.append(item["memory_id"])
        for memory_id in ids:  # every id is checked first, so a missing one deletes nothing
            await self.memories.get(principal, None, memory_id)
        await self.delete(principal, list(dict.fromkeys(ids)))
        return {"message": f"Successfully deleted {len(ids)} memories"}

    def _batch(self, body: Any) -> list[Mapping[str, Any]]:
        memories = body.get("memories") if isinstance(body, Mapping) else None
        if not isinstance(memories, list) or not memories or not all(isinstance(m, Mapping) for m in memories):
            raise ValidationFailed("memories must be a non-empty list of objects", field="memories")
        if len(memories) > MAX_BATCH:
            raise ValidationFailed(f"a batch holds at most {MAX_BATCH} memories", field="memories")
        return memories

    async def entities(self, principal: Principal) -> dict[str, Any]:
        """The users, agents, apps and runs the account's memories name, with how many memories each has."""
        counts: dict[tuple[str, str], int] = {}
        first: dict[tuple[str, str], str] = {}
        last: dict[tuple[str, str], str] = {}
        for memory in await self._matching(principal, mem0_filters.parse(None)):
            for kind, key in (("user", "user_id"), ("agent", "agent_id"), ("app", "app_id"), ("run", "run_id")):
                if memory[key]:
                    entity = (kind, memory[key])
                    counts[entity] = counts.get(entity, 0) + 1
                    first[entity] = min(first.get(entity, memory["created_at"]), memory["created_at"])
                    last[entity] = max(last.get(entity, memory["updated_at"]), memory["updated_at"])
        results = [
            {
                "id": name,
                "name": name,
                "type": kind,
                "total_memories": count,
                "owner": principal.user_id,
                "organization": principal.user_id,
                "metadata": None,
                "created_at": first[(kind, name)],
                "updated_at": last[(kind, name)],
            }
            for (kind, name), count in sorted(counts.items())
        ]
        return {"count": len(results), "results": results}

    async def delete_entity(self, principal: Principal, kind: str, name: str) -> dict[str, Any]:
        """Delete one user, agent, app or run with all its memories."""
        key = {"user": "user_id", "agent": "agent_id", "app": "app_id", "run": "run_id"}.get(kind)
        if key is None:
            raise ValidationFailed("entity type must be user, agent, app or run", field="type")
        if not await self.delete_matching(principal, {key: name}) and not await self._ever_named(principal, kind, name):
            raise NotFound(f"no {kind} {name!r}")
        return {"message": "Entity deleted successfully!"}

    async def _ever_named(self, principal: Principal, kind: str, name: str) -> bool:
        if kind == "app":  # kept in metadata: no column to ask, so an app without live memories is gone
            return False
        field = mem0_filters.ENTITY_FIELDS[{"user": "user_id", "agent": "agent_id", "run": "run_id"}[kind]]
        async with self.db.session() as session:
            return await ever_named(session, principal.user_id, field, name)

    async def create_export(self, principal: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """Accept an export: it is computed when read, so its id carries the request (nothing is kept)."""
        schema = _schema(body.get("schema"))
        request = {"schema": schema, "filters": self._export_filters(body)}
        self._filter(principal, {"filters": request["filters"]})  # refuse a bad filter or schema now, not when read
        _shape([], schema)
        export_id = base64.urlsafe_b64encode(json.dumps(request, sort_keys=True).encode()).decode().rstrip("=")
        return {"message": "Memory export request received. It is ready now.", "id": export_id}

    async def get_export(self, principal: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """The memories an export names, in the schema's fields when those are memory fields (no LLM needed)."""
        export_id = body.get("memory_export_id") or body.get("id")
        if export_id is not None:
            request = _decode_export(export_id)
            schema, raw_filters = request.get("schema"), request.get("filters")
        else:
            schema, raw_filters = (
                _schema(body.get("schema")) if body.get("schema") else None,
                self._export_filters(body),
            )
        memories = await self._matching(principal, self._filter(principal, {"filters": raw_filters}))
        return _shape(memories, schema)

    def _export_filters(self, body: Mapping[str, Any]) -> dict[str, Any] | None:
        raw = body.get("filters")
        if raw is not None and not isinstance(raw, Mapping):
            raise ValidationFailed("filters must be an object", field="filters")
        named = {k: body[k] for k in mem0_filters.ENTITY_IDS if body.get(k) is not None}
        parts = [p for p in (dict(raw) if raw else None, named or None) if p]
        return parts[0] if len(parts) == 1 else ({"AND": parts} if parts else None)


def _within_binding(principal: Principal, raw: Any) -> None:
    """Refuse, for a credential bound to one session and agent, filters that name another run_id or agent_id (or
    every one, ``*``): as on every route, naming another session or agent answers 403, not a quietly narrowed read."""
    if not principal.bound:
        return
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            if key in ("run_id", "agent_id"):
                for name in _names_in(value):
                    principal.act_as(name if key == "run_id" else None, name if key == "agent_id" else None)
            else:
                _within_binding(principal, value)
    elif isinstance(raw, list):
        for item in raw:
            _within_binding(principal, item)


def _names_in(value: Any) -> list[str]:
    """Every name a filter's value holds: itself, or those under its operators (``in``, ``eq``, ``ne``...)."""
    if isinstance(value, Mapping):
        return [name for inner in value.values() for name in _names_in(inner)]
    if isinstance(value, list):
        return [name for inner in value for name in _names_in(inner)]
    return [str(value)] if value is not None else []


def _schema(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise ValidationFailed(
                "schema must be a JSON schema (an object, or its JSON text)", field="schema"
            ) from None
    if not isinstance(raw, dict):
        raise ValidationFailed("schema must be a JSON schema object", field="schema")
    return raw


def _decode_export(export_id: Any) -> dict[str, Any]:
    try:
        text = str(export_id)
        decoded = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise NotFound(f"no export {export_id}") from None
    if not isinstance(decoded, dict):
        raise NotFound(f"no export {export_id}")
    return decoded


def _shape(memories: list[dict[str, Any]], schema: dict[str, Any] | None) -> dict[str, Any]:
    """Memories in the fields a schema asks for. A schema whose fields are memory fields (at the top, or in the items
    of one array property) is filled as it is; anything else would need an LLM to write, which Engram does not do."""
    if schema is None:
        return {"memories": memories}
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not properties:
        raise NotSupported("export schema has no properties: Engram fills memory fields, it does not use an LLM")
    fields = set(properties)
    if fields <= _EXPORT_FIELDS:
        return {"memories": [{k: m.get(k) for k in properties} for m in memories]}
    arrays = [k for k, v in properties.items() if isinstance(v, dict) and v.get("type") == "array"]
    if len(arrays) == 1:
        items = properties[arrays[0]].get("items") or {}
        inner = items.get("properties") if isinstance(items, dict) else None
        if isinstance(inner, dict) and inner and set(inner) <= _EXPORT_FIELDS:
            return {arrays[0]: [{k: m.get(k) for k in inner} for m in memories]}
    others = sorted(fields - _EXPORT_FIELDS)
    raise NotSupported(
        f"export schema asks for {', '.join(others) or 'nested fields'}, which only an LLM could write; Engram fills "
        f"the memory fields {', '.join(sorted(_EXPORT_FIELDS))}, at the top or in the items of one array"
    )
