"""evidence.png: four panels over the phases (matplotlib, the `plot` extra).

Lookups by outcome, row pressure against page headroom, host-tier reuse per request, and mean
latency; the probe verdicts in the title; evidence of the simulated engine says SIMULATED in the
title and across the picture. Importing this module raises ImportError without
matplotlib; lab/evidence/document.py then says how to get the picture.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: never a display, also on a workstation with one

import matplotlib.pyplot as plt
from matplotlib.transforms import offset_copy

from exporter.labels import MISS_REASONS
from lab.evidence.doc import figures, headline

# Colour-blind-safe (Okabe-Ito), one colour per outcome in every picture.
HIT = "#009E73"
MISS_COLOURS = {"evicted": "#D55E00", "no_prefix": "#999999", "key_mismatch": "#CC79A7",
                "no_checkpoint": "#E69F00", "not_durable": "#56B4E9", "too_short": "#F0E442",
                "other": "#000000"}
MAX_TITLE_PAIRS = 6
DPI = 110
ROW, HEADROOM, REUSED, RESTORED, STORES = "#0072B2", "#E69F00", "#56B4E9", "#009E73", "#D55E00"


def _value(v: float | None) -> float:
    return 0.0 if v is None else float(v)


def _compact(value: float) -> str:
    return f"{value / 1000:.1f}k" if value >= 1000 else f"{value:.0f}"


def _label_bars(ax: Any, bars: Any, fmt: str, skip: Sequence[bool] = (),
                rotation: float = 0) -> None:
    for i, bar in enumerate(bars):
        height = bar.get_height()
        if height and not (i < len(skip) and skip[i]):
            text = _compact(height) if fmt == "compact" else fmt.format(height)
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, height),
                        ha="center", va="bottom", fontsize=7.5, xytext=(0, 2), rotation=rotation,
                        textcoords="offset points")


def _legend(ax: Any, *handles_labels: tuple[list[Any], list[str]]) -> None:
    """One legend under the panel, for both y axes; placed by `_below_ticks` once the tick
    labels are drawn."""
    handles = [h for hl in handles_labels for h in hl[0]]
    labels = [label for hl in handles_labels for label in hl[1]]
    ax.legend(handles, labels, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.3),
              ncol=min(2, len(labels)), frameon=False)


def _below_ticks(fig: Any, axes: Sequence[Any]) -> None:
    """Move each panel's legend just below its tick labels, however long the phase names
    are: their depth is measured in points (which the layout does not change) and the legend
    hangs that far under the panel."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        bottom = ax.get_window_extent(renderer).y0
        labels = ax.xaxis.get_tightbbox(renderer)
        depth = (bottom - labels.y0) * 72 / fig.dpi if labels is not None else 0.0
        legend.set_bbox_to_anchor(
            (0.5, 0.0), transform=offset_copy(ax.transAxes, fig=fig, y=-(depth + 4),
                                              units="points"))


def picture(doc: Mapping[str, Any], path: Path) -> None:
    fig = figure(doc)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def figure(doc: Mapping[str, Any]) -> Any:
    """The four panels as a matplotlib Figure (the caller closes it)."""
    phases: Sequence[Mapping[str, Any]] = [p for p in doc.get("phases") or []
                                           if p.get("state") == "ended"]
    names = [p["name"] + ("" if p.get("valid") else " (invalid)") for p in phases]
    figs = [figures(p) for p in phases]
    x = list(range(len(phases)))
    width = max(11.0, 1.1 * len(phases) + 4)
    fig, axes = plt.subplots(2, 2, figsize=(width, 10.5), constrained_layout=True, dpi=DPI)
    (lookups, rows), (reuse, latency) = axes

    bars = lookups.bar(x, [_value(f["hits"]) for f in figs], color=HIT, label="hits")
    _label_bars(lookups, bars, "{:.0f} hits")
    bottom = [_value(f["hits"]) for f in figs]
    for reason in MISS_REASONS:
        values = [_value(f["misses"].get(reason)) for f in figs]
        if any(values):
            lookups.bar(x, values, bottom=bottom, color=MISS_COLOURS[reason],
                        label=f"miss: {reason}")
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    lookups.set_ylim(0, max([*bottom, 1.0]) * 1.12)  # room for the labels under the title
    lookups.set_title("Lookups: hits and misses by reason")
    lookups.set_ylabel("lookups in the phase")
    _legend(lookups, lookups.get_legend_handles_labels())

    w = 0.38
    a = rows.bar([i - w / 2 for i in x], [_value(f["row_pressure_attempts"]) for f in figs], w,
                 color=ROW, label="row-pressure eviction attempts")
    b = rows.bar([i + w / 2 for i in x], [_value(f["row_pressure_with_page_headroom"])
                                          for f in figs], w, color=HEADROOM,
                 label="... of them with >= 25% pages free")
    _label_bars(rows, a, "{:.0f}")
    # The headroom bar is labelled only where it differs from all attempts (else labels collide).
    _label_bars(rows, b, "{:.0f}", [f["row_pressure_with_page_headroom"] == f["row_pressure_attempts"]
                                    for f in figs])
    rows.set_title("Row pressure while pages had headroom")
    rows.set_ylabel("eviction attempts")
    free = rows.twinx()
    free.plot(x, [_value(f["page_free_begin"]) * 100 for f in figs], "v", color="black",
              label="page slab free at begin (%)")
    free.plot(x, [_value(f["page_free_end"]) * 100 for f in figs], "^", color="dimgray",
              label="page slab free at end (%)")
    free.set_ylim(0, 105)
    free.set_ylabel("page slab free (%)")
    # Bars in the lower part, the page-free markers (near 100 % when pages idle) above them.
    rows.set_ylim(0, max([_value(f["row_pressure_attempts"]) for f in figs] + [1.0]) * 1.7)
    _legend(rows, rows.get_legend_handles_labels(), free.get_legend_handles_labels())

    a = reuse.bar([i - w / 2 for i in x], [_value(f["tokens_reused_per_request"]) for f in figs],
                  w, color=REUSED, label="prompt tokens reused / request")
    restored = [_value(f["host_tokens_restored"]) / f["requests"] if f["requests"] else 0.0
                for f in figs]
    b = reuse.bar([i + w / 2 for i in x], restored, w, color=RESTORED,
                  label="host tokens restored / request")
    _label_bars(reuse, a, "compact", rotation=90)  # upright: side-by-side values never collide
    _label_bars(reuse, b, "compact", rotation=90)
    reuse.set_title("Host tier per request")
    # Log-like: the 9-token template, a few thousand restored and a long context's 49k in one view.
    reuse.set_yscale("symlog", linthresh=10)
    reuse.set_ylabel("tokens per request (log scale)")
    stores = reuse.twinx()
    stores.plot(x, [_value(f["stores_per_request"]) for f in figs], "D", color=STORES,
                label="host stores / request")
    stores.set_ylim(0, max([_value(f["stores_per_request"]) for f in figs] + [1.0]) * 1.3)
    stores.set_ylabel("stores per request")
    reuse.set_ylim(0, max([_value(f["tokens_reused_per_request"]) for f in figs] + [10.0]) * 4)
    _legend(reuse, reuse.get_legend_handles_labels(), stores.get_legend_handles_labels())

    bars = latency.bar(x, [_value(f["mean_latency_seconds"]) for f in figs], color=ROW)
    _label_bars(latency, bars, "{:.3f}")
    latency.set_ylim(0, max([_value(f["mean_latency_seconds"]) for f in figs] + [0.001]) * 1.12)
    latency.set_title("Mean end-to-end latency (engine histogram)")
    latency.set_ylabel("seconds per request")

    # A new engine incarnation between two phases: a dashed line (nothing carries across it).
    changes = [i - 0.5 for i in x[1:] if phases[i]["generation"] != phases[i - 1]["generation"]]
    for ax in (lookups, rows, reuse, latency):
        # 40 degrees with the text's end on its tick: neighbouring names never touch.
        ax.set_xticks(x, names, rotation=40, ha="right", rotation_mode="anchor", fontsize=8.5)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
        for at in changes:
            ax.axvline(at, color="gray", linestyle="--", linewidth=0.8)
    probes = doc.get("probes") or []
    lines = [f"{p['prime']} -> {p['replay']}: {headline(p)}" for p in probes[:MAX_TITLE_PAIRS]]
    if len(probes) > MAX_TITLE_PAIRS:
        lines.append(f"(+{len(probes) - MAX_TITLE_PAIRS} more verdicts in evidence.md)")
    title = "Experiment phases" + (" (dashed: new engine generation)" if changes else "")
    if doc.get("simulated"):
        # Wherever the picture travels, it says what it is: in the title and across it.
        title = "SIMULATED ENGINE, not measurements of Helios: " + title
        fig.text(0.5, 0.5, "SIMULATED", fontsize=110, color="#B00020", alpha=0.10,
                 rotation=30, ha="center", va="center", zorder=0)
    fig.suptitle("\n".join([title, *lines]), fontsize=11)
    _below_ticks(fig, (lookups, rows, reuse, latency))
    return fig
