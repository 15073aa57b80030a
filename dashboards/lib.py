"""Shared pieces of the Helios dashboards: selectors, variables, annotations, panel factories, a
grid layout and the JSON rendering.

Every panel gets a unit and a description here (the factories require both), every query runs
on the dashboard's `$datasource`, and thresholds that alerts also use are read from
`alerts/config.yaml`, so a dashboard turns red where the alert fires. Every selector, grouping
and join goes through `Scope`, which keeps the cluster label (`$cluster`) in all of them, so two
clusters with the same job and instance never mix under a global view (Thanos, Mimir).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import common as cb
from grafana_foundation_sdk.builders import dashboard as db
from grafana_foundation_sdk.builders import prometheus, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm
from grafana_foundation_sdk.models import prometheus as prom_models

from alerts.config import ConfigError
from alerts.generate import DEFAULT_CONFIG, load_config

ROOT = Path(__file__).resolve().parent.parent
ALERTS_CONFIG = DEFAULT_CONFIG

DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="${datasource}")
# What Grafana substitutes for "All" in the multi-value variables: match every value.
ALL = ".*"
GRID_WIDTH = 24
# The cluster label when alerts/config.yaml does not name one (`cluster_label`), as the rules do.
DEFAULT_CLUSTER_LABEL = "cluster"
# The labels that identify one sidecar target within a cluster.
TARGET_LABELS = ("job", "instance")

@dataclass(frozen=True)
class Settings:
    """Values shared with the alerting rules (alerts/config.yaml), so colours match alerts."""

    window_memory: str  # how long Prometheus remembers a window's last state (last_over_time)
    at_risk_margin_s: float  # HeliosRestoreBoundAtRisk fires this long before the deadline
    page_headroom_ratio: float  # page slab free ratio that counts as headroom
    power_limit_ratio: float  # HeliosGpuPowerAtLimit threshold
    cluster_label: str = DEFAULT_CLUSTER_LABEL  # the label that names a cluster in a global view
    # HeliosExporterCertificateExpiring / ...ExpiryImminent fire this long before expiry
    certificate_ticket_s: float = 14 * 86400.0
    certificate_page_s: float = 3 * 86400.0

    @classmethod
    def load(cls, path: Path = ALERTS_CONFIG) -> Settings:
        """Through the alerts' own reader (alerts/config.py), every problem reported at once."""
        try:
            config = load_config(path)
        except (ConfigError, OSError, yaml.YAMLError) as exc:
            raise SystemExit(f"{path}: {exc}") from None
        return cls(
            window_memory=config.window_memory.text,
            at_risk_margin_s=float(config.at_risk_margin.seconds),
            page_headroom_ratio=config.page_headroom_ratio,
            power_limit_ratio=config.power_limit_ratio,
            cluster_label=config.cluster_label or DEFAULT_CLUSTER_LABEL,
            certificate_ticket_s=float(config.certificate_ticket.seconds),
            certificate_page_s=float(config.certificate_page.seconds),
        )


# -- selectors and queries ---------------------------------------------------------------------

@dataclass(frozen=True)
class Scope:
    """Selectors, groupings and joins of one dashboard: every one carries the cluster label.

    `sel()` -> {cluster=~"$cluster", job=~"$job", instance=~"$instance", ...}
    `by("gpu")` -> "cluster, job, instance, gpu" (for `sum by (...)` and `on (...)`)
    """

    cluster_label: str = DEFAULT_CLUSTER_LABEL

    def sel(self, *matchers: str, generation: bool = False, gpu: bool = False) -> str:
        """Label matchers for the dashboard's variables plus `matchers`."""
        parts = [f'{self.cluster_label}=~"$cluster"', 'job=~"$job"', 'instance=~"$instance"']
        if generation:
            parts.append('generation=~"$generation"')
        if gpu:
            parts.append('gpu=~"$gpu"')
        return "{" + ", ".join([*parts, *matchers]) + "}"

    def by(self, *labels: str) -> str:
        """The label list that keeps one sidecar (in one cluster) apart, plus `labels`."""
        return ", ".join([self.cluster_label, *TARGET_LABELS, *labels])

    def variable(self, name: str, label: str, metric: str, *, multi: bool, description: str,
                 default: str | None = None, matchers: Sequence[str] = (),
                 include_all: bool = True) -> db.QueryVariable:
        """A label_values() variable over `metric` restricted to the current cluster and
        `matchers` (earlier variables), e.g. label_values(m{cluster=~"$cluster"}, job)."""
        selector = "{" + ", ".join([f'{self.cluster_label}=~"$cluster"', *matchers]) + "}"
        return query_variable(name, label, metric + selector, multi=multi, description=description,
                              default=default, include_all=include_all)

    def cluster_variable(self, metric: str) -> db.QueryVariable:
        # Multi-value with All (= .*), which also matches series without the label: one
        # Prometheus per cluster, queried directly, has no cluster label at all.
        return query_variable(
            "cluster", "Cluster", f"label_values({metric}, {self.cluster_label})", multi=True,
            description=f"The {self.cluster_label} label of a global view (Thanos, Mimir, "
                        "federation); All matches series without it too.", raw=True)

    def job_variable(self, metric: str) -> db.QueryVariable:
        return self.variable("job", "Job", metric, multi=False, default="helios-exporter",
                             description="Prometheus job of the sidecars (alerts assume "
                                         "helios-exporter).")

    def instance_variable(self, metric: str, *, multi: bool) -> db.QueryVariable:
        # No All: a dashboard opens on the first sidecar (Grafana picks the first value of a
        # variable without a current one). All over a fleet draws a line per engine and
        # label in every panel: at 1,000 engines eight thousand lines a panel, answered in
        # seconds each (docs/scale.md).
        return self.variable("instance", "Sidecar", metric, multi=multi, matchers=['job=~"$job"'],
                             description="The sidecar's instance label: one per engine.",
                             include_all=False)

    def restore_window_annotation(self, memory: str) -> db.AnnotationQuery:
        return annotation(
            "Restore window",
            f"last_over_time(helios_restore_window_open{self.sel()}[{memory}]) == 1",
            "orange", "Restore window open ({{instance}})")

    def phase_annotation(self) -> db.AnnotationQuery:
        # The sidecar exports a phase only while it is open, so the series' presence is the
        # annotation's region. A phase shorter than the scrape interval may not show: its exact
        # edges are in GET /experiment/phases and the evidence report.
        return annotation(
            "Experiment phase",
            f"helios_experiment_phase_open{self.sel()} == 1",
            "purple", "Phase {{phase}} ({{instance}})")

    def generation_annotation(self) -> db.AnnotationQuery:
        # A generation series that did not exist a minute earlier: the engine was (re)started.
        # Each generation has its own series with a constant start time, so changes() would
        # never fire.
        return annotation(
            "New generation",
            f"helios_monitoring_generation_info{self.sel()} unless on ({self.by('generation')}) "
            f"(helios_monitoring_generation_info{self.sel()} offset 1m)",
            "blue", "New generation {{generation}} ({{instance}})")


def q(expr: str, legend: str = "", *, instant: bool = False, ref: str = "A",
      table_format: bool = False) -> prometheus.Dataquery:
    query = (prometheus.Dataquery().datasource(DATASOURCE).expr(expr).ref_id(ref)
             .legend_format(legend or "__auto"))
    if table_format:
        query = query.format(prom_models.PromQueryFormat.TABLE)
    return query.instant() if instant else query.range()


# -- variables and annotations -----------------------------------------------------------------

def datasource_variable() -> db.DatasourceVariable:
    return (db.DatasourceVariable("datasource").label("Data source").type("prometheus")
            .description("Prometheus that scrapes the helios-exporter sidecars."))


def query_variable(name: str, label: str, metric: str, *, multi: bool, description: str,
                   default: str | None = None, raw: bool = False,
                   include_all: bool = True) -> db.QueryVariable:
    """label_values(<metric>, <name>), or `metric` as the whole query when `raw`. A multi-value
    variable offers All, its default, unless `include_all` is false: then it has no current
    value and Grafana selects the first one on load."""
    variable = (db.QueryVariable(name).label(label).datasource(DATASOURCE)
                .query(metric if raw else f"label_values({metric}, {name})")
                .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
                .sort(dm.VariableSort.ALPHABETICAL_ASC).description(description))
    if multi and include_all:
        variable = variable.multi(True).include_all(True).all_value(ALL)
        variable = variable.current(dm.VariableOption(selected=True, text="All", value="$__all"))
    elif multi:
        variable = variable.multi(True)
    elif default is not None:
        variable = variable.current(dm.VariableOption(selected=True, text=default, value=default))
    return variable


# Prometheus annotation fields the SDK's AnnotationQuery has no setter for (titleFormat), by
# annotation name; render() adds them.
ANNOTATION_TITLES: dict[str, str] = {}


def annotation(name: str, expr: str, color: str, title: str) -> db.AnnotationQuery:
    ANNOTATION_TITLES[name] = title
    return (db.AnnotationQuery().name(name).datasource(DATASOURCE).expr(expr).icon_color(color)
            .enable(True).hide(False))


# -- panels ------------------------------------------------------------------------------------

def steps(*pairs: tuple[float | None, str]) -> db.ThresholdsConfig:
    return (db.ThresholdsConfig().mode(dm.ThresholdsMode.ABSOLUTE)
            .steps([dm.Threshold(value=v, color=c) for v, c in pairs]))


def states(*entries: tuple[str, str, str]) -> list[dm.ValueMapping]:
    """Value mappings (value, text, colour) for 0/1 gauges."""
    return [dm.ValueMap({value: dm.ValueMappingResult(text=text, color=color, index=i)})
            for i, (value, text, color) in enumerate(entries)]


UP_DOWN = states(("1", "up", "green"), ("0", "DOWN", "red"))
PASS_FAIL = states(("1", "pass", "green"), ("0", "FAIL", "red"))


@dataclass
class PanelArgs:
    title: str
    description: str
    unit: str
    targets: Sequence[prometheus.Dataquery]


def _common(panel: Any, args: PanelArgs) -> Any:
    panel = (panel.title(args.title).description(args.description).unit(args.unit)
             .datasource(DATASOURCE))
    for target in args.targets:
        panel = panel.with_target(target)
    return panel


def stat_panel(title: str, description: str, unit: str, *targets: prometheus.Dataquery,
               thresholds: db.ThresholdsConfig | None = None,
               mappings: list[dm.ValueMapping] | None = None, text_mode: str = "auto",
               no_value: str | None = None, color: str = "background") -> stat.Panel:
    panel: stat.Panel = _common(stat.Panel(), PanelArgs(title, description, unit, targets))
    panel = (panel.reduce_options(cb.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
             .text_mode(cm.BigValueTextMode(text_mode)).color_mode(cm.BigValueColorMode(color))
             .graph_mode(cm.BigValueGraphMode.NONE))
    panel = panel.thresholds(thresholds or steps((None, "green")))
    if mappings:
        panel = panel.mappings(mappings)
    if no_value:
        panel = panel.no_value(no_value)
    return panel


def ts_panel(title: str, description: str, unit: str, *targets: prometheus.Dataquery,
             thresholds: db.ThresholdsConfig | None = None, min_val: float | None = None,
             max_val: float | None = None, stacked: bool = False, no_value: str | None = None,
             right_axis: tuple[str, str] | None = None) -> timeseries.Panel:
    """A time series; `right_axis` = (series name regexp, unit) moves those series right."""
    panel: timeseries.Panel = _common(timeseries.Panel(), PanelArgs(title, description, unit, targets))
    panel = (panel.legend(cb.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST)
                          .placement(cm.LegendPlacement.BOTTOM).show_legend(True))
             .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI)
                      .sort(cm.SortOrder.DESCENDING))
             .line_width(1).fill_opacity(10).span_nulls(False))
    if thresholds is not None:
        panel = panel.thresholds(thresholds).thresholds_style(
            cb.GraphThresholdsStyleConfig().mode(cm.GraphTresholdsStyleMode.LINE))
    if min_val is not None:
        panel = panel.min(min_val)
    if max_val is not None:
        panel = panel.max(max_val)
    if stacked:
        panel = panel.stacking(cb.StackingConfig().mode(cm.StackingMode.NORMAL)).fill_opacity(40)
    if no_value:
        panel = panel.no_value(no_value)
    if right_axis is not None:
        regexp, unit_right = right_axis
        panel = panel.override_by_regexp(regexp, [
            dm.DynamicConfigValue(id_val="unit", value=unit_right),
            dm.DynamicConfigValue(id_val="custom.axisPlacement", value="right"),
        ])
    return panel


def timeline_panel(title: str, description: str, *targets: prometheus.Dataquery,
                   mappings: list[dm.ValueMapping], unit: str = "none",
                   no_value: str | None = None) -> statetimeline.Panel:
    panel: statetimeline.Panel = _common(statetimeline.Panel(),
                                         PanelArgs(title, description, unit, targets))
    panel = (panel.mappings(mappings).show_value(cm.VisibilityMode.NEVER).merge_values(True)
             .row_height(0.8).fill_opacity(80).line_width(0)
             .legend(cb.VizLegendOptions().show_legend(False)
                     .display_mode(cm.LegendDisplayMode.HIDDEN).placement(cm.LegendPlacement.BOTTOM))
             .tooltip(cb.VizTooltipOptions().mode(cm.TooltipDisplayMode.SINGLE)
                      .sort(cm.SortOrder.NONE))
             .thresholds(steps((None, "green"))))
    if no_value:
        panel = panel.no_value(no_value)
    return panel


def table_panel(title: str, description: str, unit: str, *targets: prometheus.Dataquery,
                hide: Sequence[str] = ("Time", "__name__"), rename: dict[str, str] | None = None,
                no_value: str | None = None) -> table.Panel:
    """One row per series of an instant query; `hide` / `rename` columns (labels, Value)."""
    panel: table.Panel = _common(table.Panel(), PanelArgs(title, description, unit, targets))
    panel = panel.with_transformation(dm.DataTransformerConfig(
        id_val="organize", options={"excludeByName": dict.fromkeys(hide, True),
                                    "renameByName": rename or {}}))
    panel = panel.cell_height(cm.TableCellHeight.SM).show_header(True)
    if no_value:
        panel = panel.no_value(no_value)
    return panel


# -- layout and rendering ----------------------------------------------------------------------

class Layout:
    """Places panels left to right in rows of 24 grid units and numbers them (rows included)."""

    def __init__(self, dashboard: db.Dashboard) -> None:
        self.dashboard = dashboard
        self._next_id = 1
        self._x = 0
        self._y = 0
        self._row_height = 0

    def _id(self) -> int:
        self._next_id += 1
        return self._next_id - 1

    def row(self, title: str) -> None:
        self._newline()
        row = db.Row(title).id(self._id()).grid_pos(dm.GridPos(h=1, w=GRID_WIDTH, x=0, y=self._y))
        self.dashboard.with_row(row)
        self._y += 1

    def add(self, panel: Any, w: int, h: int) -> None:
        if self._x + w > GRID_WIDTH:
            self._newline()
        panel.id(self._id()).grid_pos(dm.GridPos(h=h, w=w, x=self._x, y=self._y))
        self.dashboard.with_panel(panel)
        self._x += w
        self._row_height = max(self._row_height, h)

    def _newline(self) -> None:
        if self._x:
            self._y += self._row_height
        self._x = 0
        self._row_height = 0


def base_dashboard(title: str, uid: str, description: str, tags: Sequence[str]) -> db.Dashboard:
    return (db.Dashboard(title).uid(uid).description(description).tags(["helios", *tags])
            .refresh("30s").time("now-3h", "now").timezone("browser").editable()
            .tooltip(dm.DashboardCursorSync.CROSSHAIR)
            .link(db.DashboardLink("Helios dashboards").type(dm.DashboardLinkType.DASHBOARDS)
                  .tags(["helios"]).as_dropdown(True).include_vars(True).keep_time(True)))


def render(dashboard: db.Dashboard) -> str:
    """Stable JSON text (sorted keys, two-space indent, final newline)."""
    data = json.loads(json.dumps(dashboard.build(), cls=JSONEncoder))
    for entry in data.get("annotations", {}).get("list", []):
        title = ANNOTATION_TITLES.get(entry.get("name", ""))
        if title is not None:
            entry.update(titleFormat=title, tagKeys="instance")
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
