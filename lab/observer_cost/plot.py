"""observer-cost.png (matplotlib, the `plot` extra): every repetition, and each difference with
its interval.

Top, one panel per concurrency: each repetition's mean latency relative to its off arm's mean, in
the order run, for both sources (the engine's histogram and the client's clock share the axis
because both are relative); an invalid repetition is crossed out and named. Bottom: the on arm
against the off arm per concurrency and source, the estimate with its interval, beside 0 and, on a
simulator whose trace was on in the on arm, the cost it was set to. Importing this module raises
ImportError without matplotlib.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, never a display

import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

from lab.observer_cost.doc import VERDICT_WORDS, what_ran

DPI = 110
# Okabe-Ito: off and on arms, the two sources.
OFF, ON, BAD = "#0072B2", "#D55E00", "#CC0000"
SOURCES = ("engine", "client")
SOURCE_MARKERS = {"engine": "o", "client": "s"}
SOURCE_LABELS = {"engine": "engine histogram", "client": "client clock"}


def _relative(value: float | None, base: float | None) -> float | None:
    return None if value is None or not base else (value / base - 1) * 100


def _traced(doc: Mapping[str, Any]) -> bool:
    """The simulator said its trace was on at every edge of every on repetition."""
    on = [s for s in doc["steps"] if s["arm"] == "on" and s.get("begin") and s.get("end")]
    traces = [((s[e] or {}).get("engine") or {}).get("trace") for s in on for e in ("begin", "end")]
    return bool(traces) and all(t is not None and t.get("enabled") for t in traces)


def picture(doc: Mapping[str, Any], path: Path) -> None:
    fig = figure(doc)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)


def figure(doc: Mapping[str, Any]) -> Any:
    results = doc["results"]
    n = len(results)
    fig = plt.figure(figsize=(max(10.0, 5.0 * n), 8.6), constrained_layout=True, dpi=DPI)
    grid = fig.add_gridspec(2, n, height_ratios=[1.5, 1.0])
    for i, result in enumerate(results):
        _repetitions(fig.add_subplot(grid[0, i]), doc, result)
    _differences(fig.add_subplot(grid[1, :]), doc)
    fig.suptitle(f"Observer cost on the {what_ran(doc)}: {doc['name']} "
                 f"({doc['repetitions']} pairs, order from seed {doc['seed']})",
                 fontsize=11)
    return fig


def _repetitions(ax: Any, doc: Mapping[str, Any], result: Mapping[str, Any]) -> None:
    c = result["concurrency"]
    steps = [s for s in doc["steps"] if s["concurrency"] == c and s["arm"] is not None]
    ys_all: list[float] = []
    for k, src in enumerate(("engine", "client")):
        base = (result["arms"]["off"].get(src) or {}).get("mean")
        for j, s in enumerate(steps):
            y = _relative(s["figures"][src]["mean"], base)
            if y is None:
                continue
            ys_all.append(y)
            colour = ON if s["arm"] == "on" else OFF
            filled = src == "engine"
            ax.plot(j + 1 + (k - 0.5) * 0.18, y, SOURCE_MARKERS[src], ms=7, color=colour,
                    mfc=colour if filled else "white", mew=1.5)
        for arm, colour in (("off", OFF), ("on", ON)):
            mean = (result["arms"][arm].get(src) or {}).get("mean")
            y = _relative(mean, base)
            if y is not None:
                ax.axhline(y, color=colour, lw=1, ls="-" if src == "engine" else ":", alpha=0.7)
    bad = [s for s in steps if not s["valid"]]
    for s in bad:  # crossed out where its first known figure is
        j = steps.index(s)
        for src in ("engine", "client"):
            y = _relative(s["figures"][src]["mean"],
                          (result["arms"]["off"].get(src) or {}).get("mean"))
            if y is not None:
                ax.plot(j + 1 + (SOURCES.index(src) - 0.5) * 0.18, y, "x", ms=16, mew=2.5,
                        color=BAD)
                break
        ax.annotate("invalid", (steps.index(s) + 1, 0), xytext=(0, -28),
                    textcoords="offset points", ha="center", color=BAD, fontsize=8,
                    xycoords=("data", "axes fraction"))
    ax.set_xticks(range(1, len(steps) + 1),
                  [f"{s['arm']}-{s['number']}" for s in steps], rotation=30, fontsize=8.5)
    ax.set_xlim(0.4, len(steps) + 0.6)
    if ys_all:
        lo, hi = min([*ys_all, 0.0]), max([*ys_all, 0.0])
        pad = max(0.5, (hi - lo) * 0.15)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_ylabel("repetition mean vs the off arm's mean (%)")
    verdict = VERDICT_WORDS[result["verdict"]]
    judged = ("" if result["estimate"] is None else
              f": {result['estimate'] * 100:+.1f} % [{result['low'] * 100:+.1f}, "
              f"{result['high'] * 100:+.1f}]")
    ax.set_title(f"C{c}, in the order run{judged}\n{verdict}"
                 + (f" ({len(bad)} invalid)" if bad else ""), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    handles = [Line2D([], [], ls="", marker="o", color=OFF, label="off"),
               Line2D([], [], ls="", marker="o", color=ON, label="on"),
               Line2D([], [], ls="", marker="o", color="gray", label="engine histogram"),
               Line2D([], [], ls="", marker="s", color="gray", mfc="white", mew=1.5,
                      label="client clock")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", ncol=2, framealpha=0.8)


def _differences(ax: Any, doc: Mapping[str, Any]) -> None:
    labels, y = [], 0
    level = doc["level"] * 100
    for result in doc["results"]:
        for src in ("engine", "client"):
            d = (result.get("by_source") or {}).get(src)
            judged = src == doc["latency_source"]
            labels.append(f"C{result['concurrency']} {SOURCE_LABELS[src]}"
                          + (" (judged)" if judged else ""))
            if d is None:
                ax.annotate("no difference: " + VERDICT_WORDS[result["verdict"]], (0, y),
                            xytext=(6, -3), textcoords="offset points", fontsize=8.5, color=BAD)
            else:
                est, lo, hi = (d[k] * 100 for k in ("estimate", "low", "high"))
                colour = ON if d["resolved"] else "dimgray"
                ax.errorbar(est, y, xerr=[[est - lo], [hi - est]], fmt=SOURCE_MARKERS[src],
                            ms=7, color=colour, capsize=5, lw=2 if judged else 1.2,
                            mfc=colour if src == "engine" else "white", mew=1.5)
                ax.annotate(f"{est:+.2f} % [{lo:+.2f}, {hi:+.2f}]"
                            + ("" if d["resolved"] else ": not resolved"),
                            (hi, y), xytext=(8, -3), textcoords="offset points", fontsize=8.5)
            y += 1
    ax.axvline(0, color="black", lw=1)
    cost = doc.get("simulator_trace_cost")
    if doc.get("simulated") and cost and _traced(doc):
        ax.axvline(cost * 100, color=ON, ls="--", lw=1)
        ax.annotate(f"trace cost set: {cost * 100:g} % of each generated token",
                    (cost * 100, 1.0), xycoords=("data", "axes fraction"), xytext=(4, -12),
                    textcoords="offset points", fontsize=8, color=ON)
    ax.set_yticks(range(len(labels)), labels, fontsize=9)
    ax.set_ylim(len(labels) - 0.4, -0.6)
    left, right = ax.get_xlim()
    ax.set_xlim(min(left, -1.0), max(right, 1.0) + (right - left) * 0.45)
    ax.set_xlabel(f"on over off within each pair, geometric mean, minus 1 (%), with its "
                  f"{level:.0f} % interval from the pairs")
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("The difference, per concurrency and source (grey: the interval includes 0)",
                 fontsize=10)
