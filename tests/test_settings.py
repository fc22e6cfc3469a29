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
    monkeypatch.delenv("ENGRAM_PORT")
    monkeypatch.setenv("ENGRAM_LOG_FORMAT", "yaml")  # refused at start, not a traceback once logging is set up
    with pytest.raises(ValueError, match=r"log_format.*'auto' or 'json' or 'text'"):
        Settings()


def test_a_default_is_validated_like_a_given_value(in_empty_folder: Path) -> None:
    assert isinstance(Settings().data_dir, Path)


def test_a_value_outside_its_bounds_is_refused_naming_where_it_came_from(
    in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = in_empty_folder / "engram.toml"
    config.write_text("redis_timeout_seconds = 0\n")
    monkeypatch.setenv("ENGRAM_SYNC_BATCH_SIZE", "5000")
    with pytest.raises(ValueError) as refused:
        Settings()
    assert str(refused.value) == (
        f"redis_timeout_seconds (in {config}): Input should be greater than 0; "
        "sync_batch_size (ENGRAM_SYNC_BATCH_SIZE): Input should be less than or equal to 1000"
    )
    with pytest.raises(ValueError, match=r"^search_threshold: Input should be greater than or equal to 0.0$"):
        Settings(redis_timeout_seconds=1, sync_batch_size=1, search_threshold=-0.5)


def test_each_kind_of_value_is_taken_from_text_and_from_toml_as_its_type(
    in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (in_empty_folder / "engram.toml").write_text(
        'search_threshold = 1\nwatch_projects = false\nqdrant_local_path = "q"\nplans = {pro = {weight = 2}}\n'
    )
    monkeypatch.setenv("ENGRAM_MAX_BATCH_SIZE", " 50 ")
    monkeypatch.setenv("ENGRAM_PORT", "8100.0")  # pydantic's lax mode took a whole number written so
    monkeypatch.setenv("ENGRAM_REUSE_PORT", "Yes")
    monkeypatch.setenv("ENGRAM_DATABASE_URL", "sqlite+aiosqlite:///x.db")
    settings = Settings(embed_threads=4.0)
    assert settings.search_threshold == 1.0 and isinstance(settings.search_threshold, float)
    assert (settings.watch_projects, settings.reuse_port) == (False, True)
    assert settings.qdrant_local_path == Path("q")
    assert settings.plans == {"pro": {"weight": 2}}
    assert (settings.max_batch_size, settings.embed_threads, settings.port) == (50, 4, 8100)
    assert settings.database_url == "sqlite+aiosqlite:///x.db" and settings.redis_url is None


@pytest.mark.parametrize(
    ("given", "why"),
    [
        ({"port": 80.5}, "port: Input should be a valid integer, got a number with a fractional part"),
        ({"port": "80.5"}, "port: Input should be a valid integer, unable to parse string as an integer"),
        ({"port": [80]}, "port: Input should be a valid integer"),
        ({"reuse_port": " true "}, "reuse_port: Input should be a valid boolean, unable to interpret input"),
        (
            {"search_threshold": "half"},
            "search_threshold: Input should be a valid number, unable to parse string as a number",
        ),
        ({"reuse_port": "maybe"}, "reuse_port: Input should be a valid boolean, unable to interpret input"),
        ({"host": 127}, "host: Input should be a valid string"),
        ({"data_dir": 3}, "data_dir: Input is not a valid path"),
        ({"plans": ["free"]}, "plans: Input should be a valid dictionary"),
        (
            {"plans": {"free": {"max_memories": "many"}}},
            "plans: free: max_memories: Input should be a valid integer, unable to parse string as an integer",
        ),
    ],
)
def test_a_value_of_the_wrong_kind_is_refused_saying_why(
    in_empty_folder: Path, given: dict[str, object], why: str
) -> None:
    with pytest.raises(ValueError) as refused:
        Settings(**given)
    assert str(refused.value) == why


def test_the_rules_between_settings_hold_and_the_public_url_loses_its_trailing_slash(in_empty_folder: Path) -> None:
    with pytest.raises(ValueError, match=r"^admission limits must satisfy min_limit <= initial_limit <= max_limit$"):
        Settings(admission_min_limit=9, admission_initial_limit=8)
    assert Settings(public_base_url="https://engram.example/").public_base_url == "https://engram.example"


def test_replace_checks_its_changes_as_the_constructor_does_and_leaves_the_original(in_empty_folder: Path) -> None:
    settings = Settings()
    moved = settings.replace(host="0.0.0.0", port=9000, public_base_url="https://e.example/")
    assert (moved.host, moved.port, moved.public_base_url) == ("0.0.0.0", 9000, "https://e.example")
    assert (settings.host, settings.port, settings.public_base_url) == ("127.0.0.1", 8000, None)
    with pytest.raises(ValueError, match=r"^port: Input should be a valid integer"):
        settings.replace(port="eighty")
    with pytest.raises(ValueError, match="admission limits"):
        settings.replace(admission_min_limit=100)


def test_an_unknown_setting_is_a_mistake_in_the_code(in_empty_folder: Path) -> None:
    with pytest.raises(TypeError, match="unknown setting 'prot'"):
        Settings(prot=80)
    with pytest.raises(TypeError, match="unknown setting 'prot'"):
        Settings().replace(prot=80)


def test_the_admission_latency_tolerance_reaches_the_adaptive_limit(
    in_empty_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.admission.gate import Admission
    from app.assembly import admission_config

    monkeypatch.setenv("ENGRAM_ADMISSION_LATENCY_TOLERANCE", "3")
    assert Admission(admission_config(Settings())).limit.tolerance == 3.0
    monkeypatch.setenv("ENGRAM_ADMISSION_LATENCY_TOLERANCE", "1")
    with pytest.raises(ValueError, match=r"(?i)admission_latency_tolerance"):
        Settings()
