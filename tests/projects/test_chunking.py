"""Chunking rules, on text: sections, heading paths, splitting within the limit, config files by key."""

from __future__ import annotations

import json

import pytest

from app.projects.chunking import Unchunkable, chunk_document, kind_of


def sources(path: str, text: str, limit: int = 16_000) -> list[str]:
    return [c.source(path) for c in chunk_document(path, text, limit)]


def test_markdown_sections_carry_their_heading_path() -> None:
    text = """---
title: front matter is not a heading
---
Intro before any heading.

# Title

## Install
pip install it

#### Deep heading stays inside Install

### From source
```sh
# a comment in a fence is not a heading
make
```

Setext heading
--------------
Under a setext h2.

> # quoted heading is not a boundary

## Empty

# Second
Body.
"""
    chunks = chunk_document("README.md", text, 16_000)
    assert [c.source("README.md") for c in chunks] == [
        "README.md",
        "README.md > Title > Install",
        "README.md > Title > Install > From source",
        "README.md > Title > Setext heading",
        "README.md > Second",
    ]
    assert chunks[0].text.startswith("---\ntitle: front matter")
    assert "#### Deep heading stays inside Install" in chunks[1].text
    assert "# a comment in a fence" in chunks[2].text
    assert "quoted heading" in chunks[3].text
    assert chunks[4].content("README.md") == "README.md > Second\n\n# Second\nBody."


def test_html_comments_standing_alone_are_left_out_of_chunks() -> None:
    text = """# http

## `http.createServer([options])`

<!-- YAML
added: v0.1.13
changes:
  - version: v20.1.0
    pr-url: https://example.test/pull/47405
-->

Returns a new instance of `http.Server`.
<!-- lint disable -->
Text right after the directive, in the same paragraph as before it.

```html
<!-- an HTML comment in a fence is code and stays -->
```

Inline <!-- comments inside a paragraph --> stay with their text.

## `http.get(url)`

<!-- only a comment under this heading -->
"""
    chunks = chunk_document("api/http.md", text, 16_000)
    assert [c.source("api/http.md") for c in chunks] == ["api/http.md > http > `http.createServer([options])`"]
    body = chunks[0].text
    assert "YAML" not in body and "pr-url" not in body and "lint disable" not in body
    assert body.startswith("## `http.createServer([options])`\n\nReturns a new instance of `http.Server`.\n")
    assert "Text right after the directive" in body
    assert "```html\n<!-- an HTML comment in a fence is code and stays -->\n```" in body
    assert "Inline <!-- comments inside a paragraph --> stay" in body
    # A file that is nothing but a comment has nothing to index.
    assert chunk_document("NOTES.md", "<!-- TODO: write this -->\n", 16_000) == []


def test_a_fence_after_a_comment_is_still_kept_whole_when_split() -> None:
    fence = "```py\n" + "\n".join(f"line_{i} = {i}" for i in range(40)) + "\n```\n"
    text = "# Title\n\n<!-- a\nlong\ncomment -->\n\n" + "Words here. " * 30 + "\n\n" + fence
    chunks = chunk_document("doc.md", text, 600)
    assert any(c.text.startswith("```py") and c.text.rstrip().endswith("```") for c in chunks)
    assert not any("comment" in c.text for c in chunks)


def test_a_long_section_splits_at_paragraphs_never_mid_word_and_keeps_fences_whole() -> None:
    paragraphs = [" ".join(f"p{i}w{j}" for j in range(30)) for i in range(12)]
    fence = "```js\n" + "\n".join(f"console.log({i});" for i in range(20)) + "\n```"
    text = "# Doc\n\n" + "\n\n".join(paragraphs[:6]) + "\n\n" + fence + "\n\n" + "\n\n".join(paragraphs[6:])
    limit = 700
    chunks = chunk_document("doc.md", text, limit)
    assert len(chunks) > 3
    for chunk in chunks:
        assert len(chunk.content("doc.md")) <= limit
        assert chunk.source("doc.md") == "doc.md > Doc"
    bodies = [c.text for c in chunks]
    assert sum(fence in body for body in bodies) == 1
    # Every paragraph survives whole in exactly one chunk: the splits fall between paragraphs.
    for paragraph in paragraphs:
        assert sum(paragraph in body for body in bodies) == 1


def test_an_oversize_fence_is_split_at_lines_and_each_part_stays_a_fence() -> None:
    fence = "```python\n" + "\n".join(f"value_{i} = compute({i})" for i in range(200)) + "\n```\n"
    chunks = chunk_document("code.md", "# Code\n\n" + fence, 600)
    parts = [c.text for c in chunks if "value_" in c.text]
    assert len(parts) > 3
    for part in parts:
        body = part.removeprefix("# Code\n\n")
        assert body.startswith("```python\n") and body.endswith("\n```")
    lines = [line for part in parts for line in part.splitlines() if line.startswith("value_")]
    assert lines == [f"value_{i} = compute({i})" for i in range(200)]


def test_a_single_word_longer_than_the_limit_is_the_only_thing_cut() -> None:
    blob = "A" * 1500
    chunks = chunk_document("blob.md", f"# Blob\n\nbefore {blob} after\n", 500)
    assert all(len(c.content("blob.md")) <= 500 for c in chunks)
    joined = "".join(c.text.replace("# Blob", "").replace("before", "").replace("after", "") for c in chunks)
    assert joined.replace("\n", "").replace(" ", "") == blob


def test_json_yaml_toml_are_one_chunk_or_one_per_top_level_key_when_too_long() -> None:
    small = '{"name": "engram", "version": "1.0"}'
    assert sources("package.json", small) == ["package.json"]
    big = json.dumps(
        {"scripts": {f"s{i}": "x" * 20 for i in range(12)}, "description": "y" * 300, "dependencies": {"a": "1"}},
        indent=2,
    )
    chunks = chunk_document("package.json", big, 600)
    assert [c.source("package.json") for c in chunks] == [
        "package.json > scripts",
        "package.json > description",
        "package.json > dependencies",
    ]
    assert json.loads(chunks[2].text) == {"dependencies": {"a": "1"}}

    yaml = "# ci\nname: build\non:\n  push: {}\njobs:\n" + "".join(
        f"  job{i}:\n    runs-on: ubuntu\n" for i in range(20)
    )
    assert [c.heading_path for c in chunk_document("ci.yml", yaml, 500)][:3] == [(), ("name",), ("on",)]
    assert all(c.heading_path[-1:] in ((), ("name",), ("on",), ("jobs",)) for c in chunk_document("ci.yml", yaml, 500))

    toml = (
        'title = "x"\n\n[tool.ruff]\n'
        + "".join(f'k{i} = "{"v" * 30}"\n' for i in range(15))
        + "\n[project]\nname = 'e'\ndescription = '"
        + "d" * 100
        + "'\n"
    )
    assert [c.source("p.toml") for c in chunk_document("p.toml", toml, 700)] == [
        "p.toml",
        "p.toml > tool.ruff",
        "p.toml > project",
    ]


def test_other_text_blank_files_and_kinds() -> None:
    assert chunk_document("empty.md", "  \n\n", 1000) == []
    assert sources("notes.txt", "just text\n") == ["notes.txt"]
    assert sources("only-headings.md", "# A\n## B\n") == ["only-headings.md"]
    assert [kind_of(p) for p in ("a.MD", "b.mdx", "c.yml", "d.yaml", "e.toml", "f.json", "g.rst", ".gitignore")] == [
        "markdown",
        "markdown",
        "yaml",
        "yaml",
        "toml",
        "json",
        "text",
        "text",
    ]
    assert chunk_document("bom.md", "\ufeff# Title\n\nText.\n", 1000)[0].source("bom.md") == "bom.md > Title"


def test_awkward_text_never_breaks_chunking() -> None:
    # Line ends as markdown counts them: \r\n and \r end lines, form feeds and U+2028 do not.
    crlf = chunk_document("win.md", "# A\r\n\r\nOne.\r\n\r\n# B\r\nTwo.\f\u2028still two\r# C\rThree.", 1000)
    assert [(c.source("win.md"), c.text) for c in crlf] == [
        ("win.md > A", "# A\n\nOne."),
        ("win.md > B", "# B\nTwo.\f\u2028still two"),
        ("win.md > C", "# C\nThree."),
    ]
    # A heading too long for the path is cut short there; with a tight limit the path falls back to the file.
    long_title = chunk_document("x.md", "# " + "h" * 300 + "\n\ntext", 1000)
    assert len(long_title[0].heading_path[0]) == 160 and long_title[0].heading_path[0].endswith("…")
    assert chunk_document("x.md", "# " + "h" * 300 + "\n\ntext", 100)[0].heading_path == ()
    with pytest.raises(Unchunkable):
        chunk_document("d/" * 40 + "x.md", "text", 100)
    deep = "[" * 100_000 + "]" * 100_000
    parts = chunk_document("deep.json", deep, 16_000)  # not JSON it can read: split as text
    assert len(parts) == 13 and "".join(p.text for p in parts) == deep
    assert chunk_document("nested.md", "> " * 500 + "# quoted\n\ntext\n", 1000)
