"""Which files of a real folder are documents: patterns, excludes, .gitignore files, links, and refusals."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.projects import files
from app.projects.files import DEFAULT_EXCLUDES, DEFAULT_PATTERNS
from app.projects.walker import Found, Rules, Skip, inspect, walk


def write(root: Path, path: str, data: str | bytes = "# x\n") -> Path:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        target.write_bytes(data)
    else:
        target.write_text(data)
    return target


def rules(root: Path, patterns: tuple[str, ...] = DEFAULT_PATTERNS, excludes: tuple[str, ...] = ()) -> Rules:
    return Rules(root, patterns, [*DEFAULT_EXCLUDES, *excludes])


def test_default_patterns_excludes_and_gitignore_files(tmp_path: Path) -> None:
    for path in (
        "README.md",
        "docs/guide.mdx",
        "docs/deep/a.yaml",
        "ci.yml",
        "pyproject.toml",
        "package.json",
        "src/app.py",
        "notes.txt",
        ".git/HEAD.md",
        "node_modules/x/README.md",
        "pkg/node_modules/y/README.md",
        "vendor/v.md",
        "dist/d.md",
        "build/b.md",
        "docs/build/kept.md",
        ".venv/lib/x.md",
        "secret/key.md",
        "docs/draft.md",
        "docs/sub/local.md",
        "docs/sub/keep.md",
        "generated/out.json",
    ):
        write(tmp_path, path)
    write(tmp_path, ".gitignore", "secret/\n*.log\ndraft.md\n")
    write(tmp_path, "docs/sub/.gitignore", "local.md\n")
    found = walk(rules(tmp_path, excludes=("generated/**",)))
    assert [f.path for f in found.found] == [
        "README.md",
        "ci.yml",
        "docs/build/kept.md",  # build/** is anchored at the root, as in a .gitignore
        "docs/deep/a.yaml",
        "docs/guide.mdx",
        "docs/sub/keep.md",
        "package.json",
        "pyproject.toml",
    ]
    assert found.skipped == []
    only_py = walk(rules(tmp_path, patterns=("src/**/*.py",)))
    assert [f.path for f in only_py.found] == ["src/app.py"]


def test_links_out_of_the_folder_and_loops_are_skipped_with_a_reason(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    outside = write(tmp_path, "outside/secret.md", "# secret\n")
    write(root, "docs/real.md")
    os.symlink(outside, root / "docs" / "leak.md")
    os.symlink(tmp_path / "outside", root / "leakdir")
    os.symlink(root / "docs", root / "docs" / "again")  # a folder linking to itself
    os.symlink(root / "selfloop.md", root / "selfloop.md")
    os.symlink(root / "nowhere.md", root / "broken.md")
    os.symlink(root / "docs" / "real.md", root / "alias.md")  # inside: followed
    found = walk(rules(root))
    assert [f.path for f in found.found] == ["alias.md", "docs/real.md"]
    assert {(s.path, s.reason) for s in found.skipped} == {
        ("docs/leak.md", files.OUTSIDE_PROJECT),
        ("leakdir", files.OUTSIDE_PROJECT),
        ("docs/again", files.SYMLINK_LOOP),
        ("selfloop.md", files.SYMLINK_LOOP),
        ("broken.md", files.UNREADABLE),
    }
    assert isinstance(inspect(rules(root), "docs/leak.md"), Skip)
    assert isinstance(inspect(rules(root), "selfloop.md"), Skip)
    assert inspect(rules(root), "missing.md") is None
    assert inspect(rules(root), "src/app.py") is None  # not a document
    assert isinstance(inspect(rules(root), "docs/real.md"), Found)


def test_reading_refuses_binary_invalid_utf8_and_oversize_files(tmp_path: Path) -> None:
    write(tmp_path, "bin.md", b"\x89PNG\x00\x00")
    write(tmp_path, "latin1.md", "caf\xe9".encode("latin-1"))
    write(tmp_path, "big.md", "word " * 300)
    write(tmp_path, "bom.md", b"\xef\xbb\xbf# Title\n")
    found = {f.path: f for f in walk(rules(tmp_path)).found}
    reasons = {}
    for path in ("bin.md", "latin1.md", "big.md"):
        with pytest.raises(files.Refused) as refused:
            found[path].read(1000)
        reasons[path] = refused.value.reason
    assert reasons == {"bin.md": files.BINARY, "latin1.md": files.INVALID_UTF8, "big.md": files.TOO_LARGE}
    text = found["bom.md"].read(1000)
    assert files.content_hash(text.encode()) == files.content_hash((tmp_path / "bom.md").read_bytes())


def test_an_unreadable_root_is_reported_not_raised(tmp_path: Path) -> None:
    result = walk(rules(tmp_path / "missing"))
    assert result.found == [] and result.skipped[0].path == "." and result.skipped[0].reason == files.UNREADABLE


@pytest.mark.parametrize(
    ("raw", "reason"),
    [("../x.md", "outside_project"), ("a/../../x.md", "outside_project"), ("/etc/x.md", "outside_project"),
     ("C:/x.md", "outside_project"), ("", "invalid_path"), ("a/\x00.md", "invalid_path"), ("./", "invalid_path")],
)  # fmt: skip
def test_paths_outside_the_project_are_refused(raw: str, reason: str) -> None:
    with pytest.raises(files.Refused) as refused:
        files.clean_path(raw)
    assert refused.value.reason == reason


def test_paths_are_normalised() -> None:
    assert files.clean_path("./docs//a.md") == "docs/a.md"
    assert files.clean_path("docs\\win\\a.md") == "docs/win/a.md"
