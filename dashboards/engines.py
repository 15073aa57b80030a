"""The offload dashboard's panel for engines of another kind (`serve --engine-kind sglang|vllm`):
which catalogue signals the engine does not export, so a panel without data says why."""

from __future__ import annotations

from grafana_foundation_sdk.models import units

from dashboards.lib import Layout, Scope, q, table_panel


def engine_kind(grid: Layout, scope: Scope) -> None:
    sel = scope.sel('source="absent"')
    grid.row("Engine kind")
    grid.add(table_panel(
        "Not exported by this engine",
        "For an SGLang or vLLM engine (serve --engine-kind): the catalogue signals it does not "
        "export, one row each (helios_engine_signal_coverage{source=\"absent\"}). Panels that "
        "read them say \"not exported by this engine\", and the alerts that need them cannot fire on it: "
        "docs/engines.md lists those alerts by engine version and says what would fill each "
        "gap. Empty for a Helios engine, which exports every signal of its schema.",
        units.Short,
        q(f"helios_engine_signal_coverage{sel}", "", instant=True, table_format=True),
        hide=("Time", "__name__", "Value", "source"),
        no_value="every signal exported (or a Helios engine)"), 24, 6)
