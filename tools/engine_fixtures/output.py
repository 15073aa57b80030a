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
    """Family name -> type and label names (le, quantile aside) as parsed, for
    the families with a sample (a labelled family with no child yet shows only
    its HELP and TYPE lines: not exposed)."""
    families: dict[str, dict[str, Any]] = {}
    for family in text_string_to_metric_families(text):
        if not family.samples:
            continue
        labels: set[str] = set()
        for sample in family.samples:
            labels.update(k for k in sample.labels if k not in ("le", "quantile"))
        families[family.name] = {"type": family.type, "labels": sorted(labels),
                                 "samples": sorted({s.name for s in family.samples})}
    # The text format (0.0.4) writes a counter's or histogram's `_created`
    # samples as a gauge family of their own: they belong to the family they time.
    for name in [n for n in families if n.endswith("_created")]:
        base = families.get(name.removesuffix("_created"))
        if base is not None and base["type"] in ("counter", "histogram", "summary"):
            base["samples"] = sorted({*base["samples"], *families.pop(name)["samples"]})
    return families


def name_form(names: list[str], prefix: str) -> str:
    """How the engine's own families are spelled: `prefix:x`, `prefix_x`,
    "mixed", or "none" (the client library's process_*/python_* aside)."""
    forms = {name[len(prefix)] for name in names
             if name.startswith(prefix) and name[len(prefix):len(prefix) + 1] in (":", "_")}
    if len(forms) > 1:
        return "mixed"
    return f"{prefix}{forms.pop()}x" if forms else "none"


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
            entry["samples"] = sorted(set(entry["samples"]) | set(family["samples"]))
            entry["exposed_in"].append(f"{slug}.prom")
    families = []
    for family in defined:
        row = dict(family)
        shown = seen.get(family["name"])
        row["exposed_labels"] = shown["labels"] if shown else None
        row["exposed_in"] = shown["exposed_in"] if shown else []
        row["exposed_samples"] = shown["samples"] if shown else []
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
