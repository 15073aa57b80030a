"""evidence.png's layout, on the committed evidence of a simulator run: phase names that stay
apart, legends that never cover them, a title that says the evidence is simulated."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import matplotlib.pyplot as plt
import pytest

from lab.evidence.plot import figure
from tests.conftest import ROOT

REPORTS = [ROOT / "tests" / "fixtures" / "experiments" / "arms" / "baseline" / "evidence.json",
           ROOT / "tests" / "fixtures" / "experiments" / "probe" / "evidence.json"]


@pytest.fixture(params=REPORTS, ids=["arms", "probe"])
def fig(request: pytest.FixtureRequest) -> Any:
    f = figure(json.loads(request.param.read_text()))
    yield f
    plt.close(f)


def test_neighbouring_phase_names_are_a_line_apart(fig: Any) -> None:
    # Rotated names are parallel lines; the gap between two neighbours, across the text, must
    # hold at least one more line, or the names read as one run of text.
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes[:4]:
        labels = ax.get_xticklabels()
        assert len(labels) >= 12
        xs = [ax.transData.transform((tick, 0))[0] for tick in ax.get_xticks()]
        spacing = min(b - a for a, b in itertools.pairwise(xs))
        height = renderer.get_text_width_height_descent(
            labels[0].get_text(), labels[0].get_fontproperties(), ismath=False)[1]
        across = spacing * math.sin(math.radians(labels[0].get_rotation()))
        assert across >= 2 * height, (ax.get_title(), across, height)


def test_each_legend_sits_below_the_phase_names(fig: Any) -> None:
    renderer = fig.canvas.get_renderer()
    panels = [ax for ax in fig.axes if ax.get_legend() is not None]
    assert len(panels) == 3
    for ax in panels:
        names = ax.xaxis.get_tightbbox(renderer)
        legend = ax.get_legend().get_window_extent(renderer)
        assert legend.y1 <= names.y0, ax.get_title()
        assert names.y0 - legend.y1 < 20  # right under them, not adrift


def test_simulated_evidence_says_so_in_the_title_and_across_the_picture(fig: Any) -> None:
    assert fig._suptitle.get_text().startswith("SIMULATED ENGINE, not measurements of Helios")
    assert [t.get_text() for t in fig.texts if t is not fig._suptitle] == ["SIMULATED"]
    doc = json.loads(REPORTS[1].read_text())
    real = figure({**doc, "simulated": False})
    try:
        assert "SIMULATED" not in real._suptitle.get_text()
        assert [t for t in real.texts if t is not real._suptitle] == []
    finally:
        plt.close(real)
