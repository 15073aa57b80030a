"""Every generated file of the repository, from one list: `scripts/generate` writes them in order,
`scripts/generate --check` exits 1 with a diff when a committed one drifted (scripts/test runs
it, so nothing generated can drift).

    scripts/generate                  # write every derived file and the goldens
    scripts/generate --check          # check them; say which recordings it did not check
    scripts/generate --recorded       # also rerun the recordings (processes, Chromium: minutes)
    scripts/generate NAME ...         # only these (scripts/generate --list names them)

Two kinds of generator:

- *derived*: a pure function of committed sources (alerts/config.yaml, the dashboard builders,
  the option table, stored benchmark results) returning {path: text}. Checked byte for byte.
- *command*: a program that writes its files itself. The goldens are pytest's `--update-golden`
  (checked by the same tests without it); a *recording* (the experiment reports, the status-page
  pictures) runs real processes and is not byte-stable, so `--check` names it as not checked.

A new generator is one entry in GENERATORS, in the order that its inputs are written: a derived
one is a function of the repository root. Each also runs alone: `scripts/generate NAME`. This is
the one entry: the generators' modules (alerts/, dashboards/, deploy/, ...) have no command line
of their own and import nothing from tools/ (tests/repo/test_imports.py holds that).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.generated import splice, sync

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
REGENERATE = "scripts/generate"


@dataclass(frozen=True)
class Derived:
    name: str
    files: Callable[[Path], Mapping[str, str]]  # repository root -> {relative path: text}

    @property
    def command(self) -> str:
        """How to run it alone."""
        return f"{REGENERATE} {self.name}"


@dataclass(frozen=True)
class Command:
    name: str
    command: str
    write: Sequence[str]  # argv that writes the files (run in the repository root)
    check: Sequence[str] | None  # argv that exits 0 when they are current; None: not checkable
    writes: tuple[str, ...]  # what it writes (glob patterns under the repository root)


Generator = Derived | Command


# -- the derived generators -------------------------------------------------------------------
def _alerts(root: Path) -> dict[str, str]:
    from alerts import generate

    config = generate.load_config(root / "alerts" / "config.yaml")
    return {str(path): text for path, text in generate.outputs(config, root).items()}


def _dashboards(root: Path) -> dict[str, str]:
    from dashboards import generate

    rendered = generate.generate(root / "alerts" / "config.yaml")
    return {f"dashboards/{name}": text for name, text in rendered.items()}


def _dashboard_docs(root: Path) -> dict[str, str]:
    """docs/dashboards.md's panel tables, from the dashboards as generated."""
    from dashboards import generate, panels_doc

    page = (root / "docs" / "dashboards.md").read_text(encoding="utf-8")
    for name, text in generate.generate(root / "alerts" / "config.yaml").items():
        marker = f"panels-{name.removesuffix('.json')}"
        page = splice(page, marker, panels_doc.panel_table(json.loads(text)), "docs/dashboards.md")
    return {"docs/dashboards.md": page}


def _deploy(root: Path) -> dict[str, str]:
    from deploy import generate

    return generate.outputs(root)


def _mixin(root: Path) -> dict[str, str]:
    from alerts import mixin

    return mixin.outputs(root / "alerts" / "config.yaml", root)


def _options(root: Path) -> dict[str, str]:
    from exporter.config import markdown_table

    page = root / "README.md"
    return {"README.md": splice(page.read_text(encoding="utf-8"), "options", markdown_table(),
                                "README.md")}


def _interface(root: Path) -> dict[str, str]:
    """The README's metrics table, and docs/interface.md's metric and alert tables."""
    from alerts import generate, render
    from exporter.catalogue import tables

    readme = (root / "README.md").read_text(encoding="utf-8")
    page = (root / "docs" / "interface.md").read_text(encoding="utf-8")
    for section in tables.sections():
        page = splice(page, f"interface-metrics-{section}", tables.interface_table(section),
                      "docs/interface.md")
    config = generate.load_config(root / "alerts" / "config.yaml")
    page = splice(page, "interface-alerts", render.interface_table(config), "docs/interface.md")
    return {"README.md": splice(readme, "metrics", tables.readme_table(), "README.md"),
            "docs/interface.md": page}


def _engines_doc(root: Path) -> dict[str, str]:
    """docs/engines.md: each engine version's mapping table, and the alerts each cannot fire."""
    import yaml

    from exporter.engines import MAPPINGS
    from exporter.engines.doc import mapping_table
    from exporter.engines.inert import table

    rel = "docs/engines.md"
    page = (root / rel).read_text(encoding="utf-8")
    for kind, mapping in MAPPINGS.items():
        page = splice(page, f"engines-{kind}", mapping_table(mapping), rel)
    rules = yaml.safe_load((root / "alerts" / "helios-alerts.yaml").read_text(encoding="utf-8"))
    page = splice(page, "engines-inert-alerts", table(rules, list(MAPPINGS.values())), rel)
    return {rel: page}


def _collector_table(root: Path) -> dict[str, str]:
    """HeliosExporterCollectorFailing's runbook: what each failing collector leaves out."""
    from alerts import generate
    from alerts.groups.exporter import collector_table

    rel = "docs/runbooks/HeliosExporterCollectorFailing.md"
    config = generate.load_config(root / "alerts" / "config.yaml")
    return {rel: splice((root / rel).read_text(encoding="utf-8"), "collectors",
                        collector_table(config), rel)}


def _event_table(root: Path) -> dict[str, str]:
    """Every restore event in every state (exporter/restore/answers.py)."""
    from exporter.restore.answers import markdown_table

    out = {}
    for rel in ("docs/restore.md", "docs/interface.md"):
        out[rel] = splice((root / rel).read_text(encoding="utf-8"), "event-table",
                          markdown_table(), rel)
    return out


def _gate_inputs(root: Path) -> dict[str, str]:
    """docs/experiments.md's table of what each gate of `compare` reads, from the gates' own
    declarations (lab/compare/inputs.py)."""
    from lab.compare.inputs import table

    rel = "docs/experiments.md"
    return {rel: splice((root / rel).read_text(encoding="utf-8"), "gate-inputs", table(), rel)}


def _snapshot_schema(root: Path) -> dict[str, str]:
    """Each snapshot schema's file, and docs/snapshot.md's copies, from the one source
    (exporter/snapshot/source.py)."""
    from exporter.snapshot import schemas as snapshot_schema

    page = (root / "docs" / "snapshot.md").read_text(encoding="utf-8")
    out = {}
    for version, marker in zip(snapshot_schema.SCHEMA_VERSIONS, ("schema", "v3-schema"), strict=True):
        text = snapshot_schema.text(version)
        out[f"exporter/schema/snapshot-v{version}.schema.json"] = text
        page = splice(page, marker, f"```json\n{text}```", "docs/snapshot.md")
    return {**out, "docs/snapshot.md": page}


def _merged(base: Any, more: Any) -> Any:
    """`base` with `more` laid over it, object by object (new keys after the old ones)."""
    if not (isinstance(base, dict) and isinstance(more, dict)):
        return more
    return {**base, **{k: _merged(base[k], v) if k in base else v for k, v in more.items()}}


def _contract_example_v3(root: Path) -> dict[str, str]:
    """The v3 contract example: the v1 example with the v3 additions laid over it, so a field of
    both is written once."""
    folder = root / "tests" / "fixtures" / "snapshots"
    v1, more = (json.loads((folder / name).read_text(encoding="utf-8"))
                for name in ("contract_example.json", "contract_example_v3_additions.json"))
    text = json.dumps(_merged(v1, more), indent=2) + "\n"
    return {"tests/fixtures/snapshots/contract_example_v3.json": text}


def _simulator_snapshots(root: Path) -> dict[str, str]:
    from tools import simulator_snapshots

    return simulator_snapshots.outputs()


def _benchmarks(root: Path) -> dict[str, str]:
    results = json.loads((root / "bench" / "results" / "latest.json").read_text(encoding="utf-8"))
    from bench.report import report

    return {"docs/benchmarks.md": report.render(results)}


def _scale(root: Path) -> dict[str, str]:
    from bench.report import scale as report_scale

    data = json.loads((root / "bench" / "results" / "scale.json").read_text(encoding="utf-8"))
    page = (root / "docs" / "scale.md").read_text(encoding="utf-8")
    return {"docs/scale.md": report_scale.splice_docs(page, data)}


# The test files whose expected output lives under tests/golden/ (the `update_golden` fixture);
# tests/repo/test_generate.py fails when a test file uses the fixture and is not listed here.
GOLDEN_TESTS = (
    "tests/exporter/collectors/test_golden.py",
    "tests/exporter/test_full_exposition.py",
    "tests/alerts/test_alertmanager_templates.py",
)
_PYTEST = (PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *GOLDEN_TESTS)

GENERATORS: tuple[Generator, ...] = (
    Derived("alerts", _alerts),
    Derived("dashboards", _dashboards),
    Derived("dashboard-docs", _dashboard_docs),
    Derived("deploy", _deploy),  # reads alerts/ and dashboards/
    Derived("mixin", _mixin),  # reads alerts/ and dashboards/
    Derived("options", _options),
    Derived("interface", _interface),  # metric and alert tables
    Derived("engines-doc", _engines_doc),  # reads alerts/
    Derived("collector-table", _collector_table),
    Derived("event-table", _event_table),
    Derived("snapshot-schema", _snapshot_schema),
    Derived("gate-inputs", _gate_inputs),
    Derived("contract-example-v3", _contract_example_v3),
    Derived("simulator-snapshots", _simulator_snapshots),
    Derived("benchmarks", _benchmarks),
    Derived("scale", _scale),
    Command("goldens", "pytest --update-golden " + " ".join(GOLDEN_TESTS),
            (*_PYTEST, "--update-golden"), _PYTEST, ("tests/golden/**",)),
    Command("experiment-reports", "python -m tools.experiment_reports",
            (PYTHON, "-m", "tools.experiment_reports"), None,
            ("docs/experiments.md", "docs/experiments/arms/**", "docs/experiments/probe/**",
             "tests/fixtures/experiments/arms/**", "tests/fixtures/experiments/probe/**")),
    Command("observer-cost-report", "python -m tools.observer_cost_report",
            (PYTHON, "-m", "tools.observer_cost_report"), None,
            ("docs/experiments.md", "docs/experiments/observer-cost/**",
             "tests/fixtures/experiments/observer-cost/**")),
    Command("status-page", "python -m tools.status_page docs/status-page",
            (PYTHON, "-m", "tools.status_page", "docs/status-page"), None,
            ("docs/status-page/*.png",)),
)


def recorded(gen: Generator) -> bool:
    """Runs real processes and is not byte-stable: rerun on request only."""
    return isinstance(gen, Command) and gen.check is None


# -- running them -----------------------------------------------------------------------------
def run(gen: Generator, root: Path, check: bool) -> int | None:
    """0 current (or written), 1 drifted (diff on stdout), 2 failed; None: not checkable."""
    if isinstance(gen, Derived):
        try:
            files = gen.files(root)
        except Exception as exc:  # a generator's own error (a bad config): reported, not raised
            print(f"{gen.name}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        return sync(files, root, check)
    argv = gen.check if check else gen.write
    if argv is None:
        return None
    done = subprocess.run(list(argv), cwd=root, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-20_000:])
        sys.stdout.flush()
        sys.stderr.write(done.stderr[-5_000:])
        return 1 if check else 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these generators")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with a diff when a committed file drifted")
    parser.add_argument("--recorded", action="store_true",
                        help="also rerun the recordings (real processes; minutes)")
    parser.add_argument("--list", action="store_true", help="name every generator, in order")
    parser.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.list:
        for gen in GENERATORS:
            kind = "recording" if recorded(gen) else type(gen).__name__.lower()
            print(f"{gen.name:20} {kind:10} {gen.command}")
        return 0
    known = {gen.name for gen in GENERATORS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown generator(s) {', '.join(unknown)}; known: {', '.join(known)}")
    chosen = [g for g in GENERATORS if g.name in args.names or (
        not args.names and (args.recorded or not recorded(g)))]
    worst, skipped = 0, [g for g in GENERATORS if g not in chosen and recorded(g)]
    for gen in chosen:
        started = time.monotonic()
        status = run(gen, args.root, args.check)
        took = time.monotonic() - started
        if status is None:
            skipped.append(gen)
            continue
        said = {0: "current" if args.check else "done", 1: "DRIFTED", 2: "FAILED"}[status]
        print(f"{gen.name}: {said} ({took:.1f} s)", file=sys.stderr)
        worst = max(worst, status)
    if skipped:
        print(("not checked" if args.check else "not rerun") + " (recorded from running "
              "processes; `scripts/generate NAME` reruns one, then review the diff): "
              + ", ".join(g.name for g in skipped), file=sys.stderr)
    if worst == 1:
        print(f"generated files drifted: run `{REGENERATE}` and commit the result",
              file=sys.stderr)
    return worst


if __name__ == "__main__":
    sys.exit(main())
