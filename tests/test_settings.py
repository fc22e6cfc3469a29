"""Where a setting comes from: the constructor, then ``ENGRAM_`` variables, then ``engram.toml``, then the default."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.settings import Settings


@pytest.fixture
def in_empty_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in [n for n in os.environ if n.upper().startswith("ENGRAM_")]:
        monkeypatch.delenv(name)
    return tmp_path


def test_the_constructor_wins_then_the_environment_then_the_config_file(
    in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_empty_folder / "engram.toml").write_text('port = 7000\nhost = "0.0.0.0"\nlog_level = "debug"\n')
    monkeypatch.setenv("ENGRAM_PORT", "7100")
    monkeypatch.setenv("engram_host", "10.0.0.1")  # names are matched in any case
    settings = Settings(log_level="warning")
    assert (settings.port, settings.host, settings.log_level) == (7100, "10.0.0.1", "warning")
    assert Settings().log_level == "debug"
    assert Settings(port=7200).port == 7200


def test_values_are_parsed_as_their_types_and_structures_as_json(
    in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENGRAM_REUSE_PORT", "true")
    monkeypatch.setenv("ENGRAM_ADMISSION_QUEUE_TIMEOUT_SECONDS", "0.75")
    monkeypatch.setenv("ENGRAM_PLANS", '{"free": {"requests_per_minute": 5, "max_memories": 10}}')
    monkeypatch.setenv("ENGRAM_NOT_A_SETTING", "ignored")
    settings = Settings()
    assert settings.reuse_port is True and settings.admission_queue_timeout_seconds == 0.75
    assert settings.plans["free"]["requests_per_minute"] == 5


def test_a_bad_value_names_the_variable(in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENGRAM_PLANS", "{not json")
    with pytest.raises(ValueError, match="ENGRAM_PLANS: not valid JSON"):
        Settings()
    monkeypatch.delenv("ENGRAM_PLANS")
    monkeypatch.setenv("ENGRAM_PORT", "eighty")
    with pytest.raises(ValueError, match="port"):
        Settings()


def test_a_default_is_validated_like_a_given_value(in_empty_folder: Path) -> None:
    assert isinstance(Settings().data_dir, Path)
