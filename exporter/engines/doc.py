"""docs/engines.md's tables, from the mappings themselves (`scripts/generate engines-doc`)."""

from __future__ import annotations

from exporter.engines.model import Mapping
from exporter.engines.signals import BY_NAME


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def mapping_table(mapping: Mapping) -> str:
    """signal | catalogue family | how | unit | what the engine gives, or why not | upstream."""
    head = ["signal", "catalogue family", "how", "unit", "from the engine", "upstream change"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row in mapping.rows:
        signal = BY_NAME[row.signal]
        lines.append("| " + " | ".join([
            f"`{row.signal}`", f"`{signal.family}`", f"**{row.how}**" if row.how != "absent"
            else "absent", row.unit, _cell(row.text), _cell(row.gap)]) + " |")
    counts = {how: sum(r.how == how for r in mapping.rows) for how in ("native", "derived",
                                                                        "absent")}
    lines.append("")
    lines.append(f"{counts['native']} native, {counts['derived']} derived, {counts['absent']} "
                 f"absent. Started with: {', '.join(f'`{f}`' for f in mapping.flags)}; "
                 f"liveness: `{mapping.health_path}`.")
    return "\n".join(lines)
