"""Every metric a dashboard query names is one the sidecar exports (the metric catalogue,
exporter/catalogue/) or a recording rule in alerts/ defines."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboards.promql import (
    DASHBOARD_FILES,
    all_expressions,
    known_metrics,
    metric_names,
    variable_query_expr,
)


@pytest.mark.parametrize("name", DASHBOARD_FILES)
def test_every_queried_metric_is_exported_or_recorded(dashboards: dict[str, Any], name: str) -> None:
    known = known_metrics()
    unknown = {}
    used: set[str] = set()
    for where, expr in all_expressions(dashboards[name]):
        names = metric_names(expr)
        assert names, f"{where}: no metric found in {expr!r}"
        used |= names
        missing = sorted(n for n in names if n not in known)
        if missing:
            unknown[where] = missing
    assert unknown == {}
    assert used


def test_known_metrics_come_from_every_source() -> None:
    known = known_metrics()
    # the catalogue
    assert "helios_offload_slab_capacity" in known
    assert "helios_offload_slab_record_bytes" in known
    assert "helios_exporter_source_last_success_timestamp_seconds" in known
    assert "helios_restore_phase" in known
    assert "helios_gpu_throttle_reason_active" in known
    assert "helios_gpu_rank_info" in known
    # recording rules
    assert "helios:restore_deadline_time_left:seconds" in known
    # Prometheus' own
    assert "up" in known
    # a name the catalogue lacks is unknown, also beside a family of similar names
    assert "helios_gpu_typo_watts" not in known
    assert "helios_offload_slab_fre" not in known
    assert "helios_engine_native_prompt_tokens_total" in known  # engine pass-through is open


@pytest.mark.parametrize(("expr", "expected"), [
    ('helios_x{job=~"$job", instance=~"$instance"}', {"helios_x"}),
    ("sum by (job, instance, pressure) (rate(helios_a_total{kind=\"row\"}[$__rate_interval]))",
     {"helios_a_total"}),
    ("helios_a / (helios_b > 0)", {"helios_a", "helios_b"}),
    ("1 - helios_free\n/\n(helios_cap > 0)", {"helios_free", "helios_cap"}),
    ("helios_info * on (job, gpu) group_left (name, driver_version) helios_gpu_info",
     {"helios_info", "helios_gpu_info"}),
    ("a unless on (job, generation) (a offset 1m)", {"a"}),
    ("(last_over_time(d{bound=\"restore\"}[3h]) - time()) and on (job) (w == 1)", {"d", "w"}),
    ("helios:offload_lookups:rate5m{job=\"x\"} * 1e3 + 2", {"helios:offload_lookups:rate5m"}),
    ('{__name__="helios_named", job="x"}', {"helios_named"}),
    ("max without (generation) (m) > bool 0", {"m"}),
    ("histogram_quantile(0.99, sum by (le) (rate(h_bucket[$__rate_interval])))", {"h_bucket"}),
    ("count(up == 0) or vector(0)", {"up"}),
])
def test_metric_names_extraction(expr: str, expected: set[str]) -> None:
    assert metric_names(expr) == expected


def test_a_misspelled_metric_is_reported() -> None:
    known = known_metrics()
    names = metric_names('rate(helios_offload_lookup_hit_total{job=~"$job"}[$__rate_interval])')
    assert [n for n in names if n not in known] == ["helios_offload_lookup_hit_total"]


def test_variable_queries_name_their_metric() -> None:
    assert variable_query_expr('label_values(helios_gpu_up{job=~"$job"}, gpu)') == \
        'helios_gpu_up{job=~"$job"}'
    with pytest.raises(ValueError, match="label_values"):
        variable_query_expr("query_result(up)")
