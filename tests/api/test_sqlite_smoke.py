"""A smoke run of the API on the embedded defaults (SQLite + in-process index)."""

from tests.harness import RunningServer, make_account


def test_add_search_list_delete_on_sqlite(sqlite_api: RunningServer) -> None:
    me = make_account(sqlite_api)
    with sqlite_api.client(me.key) as http:
        created = http.post("/v1/memories", json={"content": "SQLite keeps the record", "tags": ["embedded"]})
        assert created.status_code == 201, created.text
        memory_id = created.json()["id"]
        found = http.post("/v1/memories/search", json={"query": "where is the record kept"}).json()["results"]
        assert found[0]["id"] == memory_id
        assert [m["id"] for m in http.get("/v1/memories").json()["memories"]] == [memory_id]
        assert http.get("/v1/topics").json()["topics"] == [{"tag": "embedded", "count": 1}]
        assert http.delete(f"/v1/memories/{memory_id}").status_code == 200
        assert http.get("/v1/memories").json()["memories"] == []
        ready = http.get("/readyz").json()
    assert ready["checks"]["vector_index"]["backend"] == "qdrant-edge"
