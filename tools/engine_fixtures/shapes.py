"""The simulator's engine shapes (simulator/shapes/), written from the
committed fixtures: every family of the engine's own prefix in the fixture's
fullest step, with its type, help, label names and label sets; and which of
them the engine creates only at their first event (absent from the step
before it), and which carry `_created` samples. ``python -m tools.engine_fixtures
shapes`` writes them;
tests/tools/test_engine_shapes.py checks they are what it would write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tools.engine_fixtures.engines import ENGINES, Engine
from tools.engine_fixtures.output import exposed
from tools.engine_fixtures.wheels import ROOT

SHAPES = ROOT / "simulator" / "shapes"


@dataclass(frozen=True)
class Source:
    """The fixture step a shape copies, and the step before its first events."""

    full: str
    before: str


SOURCES = {
    "sglang": Source(full="03-reuse-from-host.prom", before="02-stores-without-reuse.prom"),
    "vllm": Source(full="03-loads-and-failures.prom", before="01-startup.prom"),
}


def module_name(engine: Engine) -> str:
    return f"{engine.name}_{engine.wheel.version.replace('.', '_')}"


def families(engine: Engine) -> list[dict[str, Any]]:
    source = SOURCES[engine.name]
    text = (engine.folder / source.full).read_text(encoding="utf-8")
    shown = exposed(text)
    before = exposed((engine.folder / source.before).read_text(encoding="utf-8"))
    rows = []
    for family in text_string_to_metric_families(text):
        if family.name not in shown or not family.name.startswith(engine.name):
            continue
        series: list[dict[str, str]] = []
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k not in ("le", "quantile")}
            if labels not in series:
                series.append(labels)
        created = any(n.endswith("_created") for n in shown[family.name]["samples"])
        rows.append({"name": family.name, "type": family.type, "help": family.documentation,
                     "labels": tuple(shown[family.name]["labels"]),
                     "series": tuple(series), "lazy": family.name not in before,
                     "created": created})
    return rows


def render(engine: Engine) -> str:
    lines = [
        f'"""{engine.name} {engine.wheel.version}\'s /metrics families, as its own code '
        "exposes them (tests/fixtures/engines/",
        f"{engine.folder.name}/{SOURCES[engine.name].full}). Written by "
        "``python -m tools.engine_fixtures shapes``: do not edit.",
        '"""',
        "",
        "# ruff: noqa: E501",
        "from __future__ import annotations",
        "",
        "from simulator.shapes import Family",
        "",
        f"ENGINE = {engine.name!r}",
        f"VERSION = {engine.wheel.version!r}",
        "FAMILIES = (",
    ]
    for row in families(engine):
        lines.append(f"    Family({row['name']!r}, {row['type']!r}, {row['help']!r},")
        lines.append(f"           {row['labels']!r}, {row['series']!r}, lazy={row['lazy']!r}"
                     f"{', created=True' if row['created'] else ''}),")
    lines.append(")")
    return "\n".join(lines) + "\n"


def write(out: Path = SHAPES) -> list[Path]:
    written = []
    for name in SOURCES:  # the engines the simulator has a flavor for
        engine = ENGINES[name]
        path = out / f"{module_name(engine)}.py"
        path.write_text(render(engine), encoding="utf-8")
        written.append(path)
    return written
