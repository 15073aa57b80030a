"""evidence.md's per-phase table (pure: lab.evidence.report.markdown on constructed
evidence): schema 3's drops and blocked tokens where the engine reports them, `-` where not."""

from __future__ import annotations

from lab.evidence.report import markdown
from tests.lab.evidence_builder import GPU_PREFIX, PROMPT, Arm

DROPS = "stores dropped full / ineligible / failed"
BLOCKED = "blocked tokens / request"


def row(md: str, phase: str) -> dict[str, str]:
    """The cells of one phase's row of the table, by column heading."""
    table = md.split("## Phases\n\n")[1].split("\n\n", maxsplit=1)[0].splitlines()
    heads = [h.strip() for h in table[0].strip("|").split("|")]
    line = next(t for t in table if t.startswith(f"| `{phase}` |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert len(cells) == len(heads), line
    return dict(zip(heads, cells, strict=True))


def test_the_table_shows_drops_and_blocked_tokens_of_a_v3_engine() -> None:
    doc = Arm("base", v3=True).lane("probe-52", [0.4] * 3, drops=(2, 1, 0)).lane(
        "long", [0.35] * 3, n=16, hits=12, drops=(0, 0, 1)).doc()
    md = markdown(doc, None, None)
    missed = row(md, "probe-52/1")
    assert missed[DROPS] == "2 / 1 / 0"
    assert missed[BLOCKED] == f"{PROMPT - GPU_PREFIX:,} evicted"  # every lookup missed
    assert missed["misses by reason"] == "52 evicted"
    hit = row(md, "long/2")
    assert hit[DROPS] == "0 / 0 / 1"
    assert hit[BLOCKED] == f"{(16 - 12) * (PROMPT - GPU_PREFIX) / 16:,.0f} evicted"
    assert "Blocked tokens: the prompt tokens a missed lookup left to be computed" in md


def test_the_table_shows_a_v1_engine_s_drops_and_blocked_tokens_as_unknown() -> None:
    doc = Arm("base").lane("probe-52", [0.4] * 3).doc()
    cells = row(markdown(doc, None, None), "probe-52/1")
    assert (cells[DROPS], cells[BLOCKED]) == ("-", "-")
    assert cells["misses by reason"] == "52 evicted"  # the columns beside them are known


def test_no_blocked_tokens_is_0_and_not_unknown() -> None:
    doc = Arm("base", v3=True).lane("small", [0.3] * 3, n=12, hits=12).doc()
    cells = row(markdown(doc, None, None), "small/1")
    assert (cells[DROPS], cells[BLOCKED]) == ("0 / 0 / 0", "0")
