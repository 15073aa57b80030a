"""Writing a fixture: the expositions, the families list, the sidecar."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tools.engine_fixtures.wheels import Wheel

SIDECAR = "fixture.json"
FAMILIES = "families.json"


def exposed(text: str) -> dict[str, dict[str, Any]]:
    """Family name -> type and label names (le, quantile aside) as parsed."""
    families: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        labels: set[str] = set()
        for sample in family.samples:
            labels.update(k for k in sample.labels if k not in ("le", "quantile"))
        families[family.name] = {"type": family.type, "labels": sorted(labels),
                                 "samples": sorted({s.name for s in family.samples})}
    return families


def name_form(names: list[str], prefix: str) -> str:
    colon = all(name.startswith(prefix + ":") for name in names)
    underscore = all(name.startswith(prefix + "_") for name in names)
    if colon:
        return f"{prefix}:x"
    if underscore:
        return f"{prefix}_x"
    return "mixed"


def write(
    out: Path,
    *,
    engine: str,
    wheel: Wheel,
    expositions: list[tuple[tuple[str, str], str]],
    defined: list[dict[str, Any]],
    stubbed: dict[str, str],
    imported: list[str],
    served_by: str,
    extra_wheels: tuple[Wheel, ...] = (),
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    steps = []
    seen: dict[str, dict[str, Any]] = {}
    for (slug, what), text in expositions:
        (out / f"{slug}.prom").write_text(text, encoding="utf-8")
        steps.append({"file": f"{slug}.prom", "step": what})
        for name, family in exposed(text).items():
            entry = seen.setdefault(name, {**family, "exposed_in": []})
            entry["labels"] = sorted(set(entry["labels"]) | set(family["labels"]))
            entry["exposed_in"].append(f"{slug}.prom")
    families = []
    for family in defined:
        row = dict(family)
        shown = seen.get(family["name"])
        row["exposed_labels"] = shown["labels"] if shown else None
        row["exposed_in"] = shown["exposed_in"] if shown else []
        families.append(row)
    names = [family["name"] for family in defined]
    meta = {
        "engine": engine,
        "version": wheel.version,
        "wheel": {"file": wheel.filename, "sha256": wheel.sha256, "size": wheel.size},
        "other_wheels": [
            {"file": w.filename, "sha256": w.sha256, "size": w.size} for w in extra_wheels
        ],
        "prometheus_client": version("prometheus_client"),
        "name_form": name_form(names, engine),
        "served_by": served_by,
        "imported_from_wheel": imported,
        "stubbed": stubbed,
        "steps": steps,
        "rendered_by": "python -m tools.engine_fixtures render " + engine,
    }
    _dump(out / SIDECAR, meta)
    _dump(out / FAMILIES, {"engine": engine, "version": wheel.version,
                           "name_form": meta["name_form"], "families": families})


def _dump(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
