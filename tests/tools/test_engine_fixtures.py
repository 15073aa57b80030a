"""The committed engine fixtures (tests/fixtures/engines/) against the tool
that renders them from the engines' own wheels (tools/engine_fixtures/): the
sidecar names the pinned wheel, every exposition parses, and families.json
says what the expositions hold. Re-rendering needs the wheel in the cache
(.whl/, fetched by ``python -m tools.engine_fixtures render``): skipped, with
the reason, where it is not there."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tools.engine_fixtures import output, wheels
from tools.engine_fixtures.__main__ import render
from tools.engine_fixtures.engines import ENGINES, Engine

COMMITTED = [engine for engine in ENGINES.values() if engine.folder.is_dir()]


def _load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _exposed(folder: Path) -> dict[str, dict[str, Any]]:
    """Family -> type, labels and the files it shows in, parsed afresh."""
    seen: dict[str, dict[str, Any]] = {}
    for prom in sorted(folder.glob("*.prom")):
        for name, family in output.exposed(prom.read_text(encoding="utf-8")).items():
            entry = seen.setdefault(name, {"type": family["type"], "labels": set(), "in": []})
            assert entry["type"] == family["type"], (name, prom.name)
            entry["labels"] |= set(family["labels"])
            entry["in"].append(prom.name)
    return seen


def test_every_pinned_engine_has_its_fixture_committed() -> None:
    assert list(ENGINES.values()) == COMMITTED


@pytest.mark.parametrize("engine", COMMITTED, ids=lambda e: e.folder.name)
def test_the_sidecar_names_the_pinned_wheel(engine: Engine) -> None:
    meta = _load(engine.folder / output.SIDECAR)
    assert (meta["engine"], meta["version"]) == (engine.name, engine.wheel.version)
    assert meta["wheel"] == {"file": engine.wheel.filename, "sha256": engine.wheel.sha256,
                             "size": engine.wheel.size}
    assert engine.wheel.filename.startswith(f"{engine.name}-{engine.wheel.version}-")
    assert [step["file"] for step in meta["steps"]] == sorted(
        p.name for p in engine.folder.glob("*.prom"))


@pytest.mark.parametrize("engine", COMMITTED, ids=lambda e: e.folder.name)
def test_families_json_says_what_the_expositions_hold(engine: Engine) -> None:
    listed = {f["name"]: f for f in _load(engine.folder / output.FAMILIES)["families"]}
    parsed = _exposed(engine.folder)
    assert set(parsed) <= set(listed), sorted(set(parsed) - set(listed))
    for name, family in listed.items():
        shown = parsed.get(name)
        assert family["exposed_in"] == (shown["in"] if shown else []), name
        if shown is None:
            assert family["exposed_labels"] is None, name
            continue
        assert family["type"] == shown["type"], name
        assert family["exposed_labels"] == sorted(shown["labels"]), name
        # what the exposition adds to the labels the code declares: only the
        # multiprocess writer's pid
        assert set(shown["labels"]) - set(family["labels"]) <= {"pid"}, name


@pytest.mark.parametrize("engine", COMMITTED, ids=lambda e: e.folder.name)
def test_the_name_form_is_the_one_the_families_use(engine: Engine) -> None:
    families = _load(engine.folder / output.FAMILIES)
    names = [f["name"] for f in families["families"]]
    assert names and families["name_form"] == output.name_form(names, engine.name)
    assert families["name_form"] in (f"{engine.name}:x", f"{engine.name}_x")


def test_a_wheel_whose_bytes_differ_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / wheels.SGLANG.filename
    fake.write_bytes(b"not the wheel")
    with pytest.raises(wheels.WheelError, match="sha256"):
        wheels.verify(wheels.SGLANG, fake)


def _cached(engine: Engine) -> bool:
    path = engine.wheel.path()
    return path.exists() and wheels.sha256_of(path) == engine.wheel.sha256


@pytest.mark.e2e
@pytest.mark.parametrize("engine", COMMITTED, ids=lambda e: e.folder.name)
def test_re_rendering_from_the_wheel_gives_the_committed_fixture(
    engine: Engine, tmp_path: Path
) -> None:
    if not _cached(engine):
        pytest.skip(f"{engine.wheel.filename} is not in {wheels.CACHE} "
                    "(python -m tools.engine_fixtures render fetches it)")
    render(engine.name, tmp_path)
    assert _load(tmp_path / output.FAMILIES) == _load(engine.folder / output.FAMILIES)
    for prom in sorted(engine.folder.glob("*.prom")):
        fresh = _engine_lines((tmp_path / prom.name).read_text(encoding="utf-8"), engine)
        assert fresh == _engine_lines(prom.read_text(encoding="utf-8"), engine), prom.name


def _engine_lines(text: str, engine: Engine) -> list[str]:
    """The engine's own lines, less their `_created` samples (the time it was
    rendered); the client library's process_* and python_* lines vary by run."""
    lines = [line for line in text.splitlines()
             if line.removeprefix("# HELP ").removeprefix("# TYPE ").startswith(engine.name)
             and "_created{" not in line and "_created " not in line]
    # an engine that times its own work: the series, not their values
    return lines if engine.exact else [line.rsplit(" ", 1)[0] for line in lines]
