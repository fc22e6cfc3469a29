"""The tokenizer and the BM25 sparse vectors of hybrid search: pure functions of a memory's fields."""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

from app.memories import lexical


def test_tokenize_folds_drops_stopwords_and_stems() -> None:
    assert lexical.tokenize("The Café's espresso machines are RUNNING!") == ["cafe", "espresso", "machin", "run"]
    assert lexical.tokenize("Caroline\u2019s adoption; she's adopting") == ["carolin", "adopt", "adopt"]
    assert lexical.tokenize("deploy_prod v2.3 ZX-4471") == ["deploy", "prod", "v2", "3", "zx", "4471"]
    assert lexical.tokenize("I don't know what it is") == ["know"]
    assert lexical.tokenize("") == []
    assert lexical.tokenize("a" * 41 + " ok") == ["ok"]


def test_date_tokens() -> None:
    assert lexical.date_tokens("2023-05-08T13:56:00+00:00") == ["8", "may", "2023"]
    assert lexical.date_tokens("1:56 pm on 8 May, 2023") == ["1", "56", "pm", "8", "may", "2023"]
    assert lexical.date_tokens("D1:3") == []
    assert lexical.date_tokens("may I help") == []  # a month name without a year is not a date
    assert lexical.date_tokens(42) == []


def test_document_vector_is_bm25_term_frequency() -> None:
    one = lexical.document_vector("deploy deploy fly")
    weights = dict(zip(one.indices, one.values, strict=True))
    deploy, fly = lexical.token_id("deploy"), lexical.token_id("fli")
    assert set(weights) == {deploy, fly}
    assert one.indices == sorted(one.indices)
    assert weights[deploy] > weights[fly] > 0  # saturating term frequency
    assert weights[deploy] < 2 * weights[fly]
    # Longer documents weigh each occurrence less (length normalisation).
    longer = lexical.document_vector("deploy fly " + " ".join(f"word{i}" for i in range(30)))
    assert dict(zip(longer.indices, longer.values, strict=True))[fly] < weights[fly]


def test_a_document_section_is_normalised_for_length_as_long_form_text() -> None:
    section = "Compress a buffer with gzip. " + " ".join(f"option{i} explained" for i in range(120))
    sibling = "Class: Gzip. Compress data using gzip."
    gzip = lexical.token_id("gzip")

    def weight(text: str, metadata: dict[str, str] | None) -> float:
        vector = lexical.document_vector(text, metadata=metadata)
        return dict(zip(vector.indices, vector.values, strict=True))[gzip]

    document = {"kind": lexical.DOCUMENT_KIND, "source": "api/zlib.md > Zlib"}
    # As conversational memories, the long section's word counts a fraction of the one-liner's.
    assert weight(section, None) < 0.3 * weight(sibling, None)
    # As document sections, the long one keeps most of its weight: length is judged against a typical section.
    assert weight(section, document) > 0.6 * weight(sibling, document)
    # A one-liner changes little: it is short against either length.
    assert weight(sibling, document) <= weight(sibling, None) * 1.5
    assert weight(section, document) > 2 * weight(section, None)
    # Only the kind decides: other memories keep the conversational normalisation.
    assert weight(section, {"kind": "note"}) == weight(section, None)


def test_document_vector_takes_context_and_dates() -> None:
    plain = lexical.document_vector("Melanie: Some fun ones like charades")
    with_context = lexical.document_vector(
        "Melanie: Some fun ones like charades", context="What activities did you do at the picnic?"
    )
    added = set(with_context.indices) - set(plain.indices)
    assert added == {lexical.token_id(t) for t in ("activ", "picnic")}
    dated = lexical.document_vector("We met", metadata={"date": "8 May, 2023", "n": 3})
    assert {lexical.token_id(t) for t in ("may", "2023")} <= set(dated.indices)
    # The memory's creation time stands in only when its metadata has no date.
    created = lexical.document_vector("We met", created_at="2026-11-23T10:00:00+00:00")
    assert lexical.token_id("novemb") in created.indices
    both = lexical.document_vector("We met", metadata={"date": "8 May, 2023"}, created_at="2026-11-23T10:00:00+00:00")
    assert lexical.token_id("novemb") not in both.indices


def test_payload_vector_reads_the_index_payload() -> None:
    payload = {"data": "Deploys run on fly", "context": "How do we ship?", "meta": {"when": "2024-02-01"}}
    assert lexical.payload_vector(payload) == lexical.document_vector(
        "Deploys run on fly", context="How do we ship?", metadata={"when": "2024-02-01"}
    )
    assert lexical.payload_vector({"data": 3, "context": ["x"], "meta": "y"}) == lexical.document_vector("3")


def test_query_vector_counts_each_token_once() -> None:
    query = lexical.query_vector("deploy and deploy to fly?")
    assert query.indices == sorted({lexical.token_id("deploy"), lexical.token_id("fli")})
    assert query.values == [1.0, 1.0]
    assert lexical.query_vector("what is it?").indices == []


def test_vectors_are_the_same_in_another_process() -> None:
    """Token ids must not depend on the process (Python's hash() does): a synced machine computes the same."""
    code = "from app.memories import lexical; print(lexical.document_vector('Caroline went to the support group'))"
    root = Path(__file__).resolve().parents[2]
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True, timeout=60
    ).stdout.strip()
    assert other == str(lexical.document_vector("Caroline went to the support group"))


def test_the_compiled_stemmer_cuts_words_as_the_reference_snowball_does() -> None:
    """Stems are token ids in every index: the stemmer that runs (PyStemmer, 20x faster) must cut every word as the
    pure-Python Snowball reference does, or a search would miss what an older index holds."""
    from snowballstemmer.english_stemmer import EnglishStemmer

    assert type(lexical._stemmer()).__module__ == "Stemmer"
    reference = EnglishStemmer()
    words = sorted(
        set(lexical._WORD.findall(" ".join(p.read_text().lower() for p in Path(lexical.__file__).parent.rglob("*.py"))))
        | {"running", "generously", "hopefulness", "caresses", "ponies", "skies", "dying", "news", "proceedings"}
    )
    assert len(words) > 1000
    assert [lexical._stemmer().stemWord(w) for w in words] == [reference.stemWord(w) for w in words]


def test_ascii_text_folds_as_unicode_text_does() -> None:
    """The fast path for plain ASCII gives what normalising would."""
    for text in ("Plain ASCII, Mixed CASE 123", "it's o'clock", ""):
        assert lexical._fold(text) == text.lower()
    assert lexical._fold("Crème Brûlée\u2019s") == "creme brulee's"


def test_token_ids_are_each_tenants_own() -> None:
    # One posting list per tenant and word: another tenant's memories are never walked by a search.
    assert lexical.token_id("deploy", "u_1") == zlib.crc32(b"u_1\0deploy")
    assert lexical.token_id("deploy") == zlib.crc32(b"deploy")
    mine = lexical.document_vector("Deploy the fly app", tenant="u_1")
    theirs = lexical.document_vector("Deploy the fly app", tenant="u_2")
    bare = lexical.document_vector("Deploy the fly app")
    assert set(mine.indices).isdisjoint(theirs.indices)
    assert set(mine.indices).isdisjoint(bare.indices)
    assert sorted(mine.values) == sorted(theirs.values) == sorted(bare.values), "the same weights"
    assert lexical.payload_vector({"data": "Deploy the fly app", "user_id": "u_1"}) == mine


def test_a_query_is_in_the_token_ids_of_the_tenants_it_searches() -> None:
    mine = lexical.document_vector("Deploy the fly app", tenant="u_1")
    theirs = lexical.document_vector("Deploy the fly app", tenant="u_2")
    assert set(lexical.query_vector("fly deploy", ["u_1"]).indices) <= set(mine.indices)
    assert set(lexical.query_vector("fly deploy", ["u_1"]).indices).isdisjoint(theirs.indices)
    both = lexical.query_vector("fly deploy", ["u_1", "u_2"])
    assert len(both.indices) == 4 and set(both.indices) <= set(mine.indices) | set(theirs.indices)
    assert lexical.query_vector("fly deploy").indices == sorted(lexical.token_id(t) for t in ("deploy", "fli"))
