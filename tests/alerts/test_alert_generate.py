"""alerts/generate.py (`scripts/generate alerts`): committed output is current, config changes
show up, errors are clear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from alerts import render
from tests.helpers import run_generate

Capture = pytest.CaptureFixture[str]


def _run(capsys: Capture, root: Path, *args: str) -> tuple[int, str, str]:
    """`scripts/generate alerts *args --root root`: exit status, stdout, stderr."""
    return run_generate(capsys, "alerts", *args, "--root", str(root))


def _scratch(root: Path, into: Path, config: str | None = None) -> Path:
    """A scratch root with alerts/config.yaml (or `config`), the committed rule files and the
    pages the generator splices into."""
    _copy_docs(root, into)
    (into / "alerts/optional").mkdir(parents=True)
    text = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    (into / "alerts/config.yaml").write_text(config or text, encoding="utf-8")
    for rel in (render.ALERTS_FILE, render.RECORDING_FILE, render.DCGM_FILE, render.FRAGMENT_FILE):
        (into / rel).write_bytes((root / rel).read_bytes())
    return into


def test_committed_output_is_current(root: Path, capsys: Capture) -> None:
    status, out, err = _run(capsys, root, "--check")
    assert status == 0, out + err
    assert out == ""


def test_changed_threshold_is_reported_as_drift(root: Path, tmp_path: Path,
                                                capsys: Capture) -> None:
    config = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    changed = config.replace("power_limit_ratio: 0.98", "power_limit_ratio: 0.95")
    assert changed != config
    status, out, _ = _run(capsys, _scratch(root, tmp_path, changed), "--check")
    assert status == 1
    assert "-          ) >= 0.98" in out
    assert "+          ) >= 0.95" in out
    assert "docs/alerts.md" in out  # the thresholds table follows the config


def test_write_into_a_fresh_root(root: Path, tmp_path: Path, capsys: Capture) -> None:
    runbooks = _copy_docs(root, tmp_path)
    (tmp_path / "alerts").mkdir()
    (tmp_path / "alerts/config.yaml").write_bytes((root / "alerts/config.yaml").read_bytes())
    status, _, err = _run(capsys, tmp_path)
    assert status == 0, err
    for name in (
        "alerts/helios-alerts.yaml",
        "alerts/helios-recording.yaml",
        "alerts/optional/helios-dcgm-recording.yaml",
        "docs/alerts.md",
        *map(str, runbooks),
    ):
        assert (tmp_path / name).read_bytes() == (root / name).read_bytes(), name


def test_selector_is_applied_everywhere(root: Path, generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    custom = type(config)(**{**config.__dict__, "selector": 'job="helios", cluster="eu1"'})
    text = generate.render_alerts(custom) + generate.render_recording(custom)
    assert 'job="helios-exporter"' not in text
    assert 'up{job="helios", cluster="eu1"} == 0' in text


def test_cluster_label_is_configurable(root: Path, generate: Any) -> None:
    config = generate.load_config(root / "alerts/config.yaml")
    custom = type(config)(**{**config.__dict__, "cluster_label": "k8s_cluster"})
    text = generate.render_alerts(custom) + generate.render_recording(custom)
    assert "on (cluster," not in text
    assert "on (k8s_cluster, job, instance)" in text
    assert "{{ with $labels.k8s_cluster }} in cluster {{ . }}{{ end }}" in text
    assert "k8s_cluster=%q,job=%q,instance=%q" in text


def test_cluster_label_must_not_repeat_a_target_label(root: Path, tmp_path: Path,
                                                      capsys: Capture) -> None:
    config = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    changed = config.replace("cluster_label: cluster", "cluster_label: instance")
    assert changed != config
    status, _, err = _run(capsys, _scratch(root, tmp_path, changed), "--check")
    assert status == 2
    assert "cluster_label: 'instance' is also in target_labels" in err


def test_config_errors_are_reported_together(root: Path, tmp_path: Path, capsys: Capture) -> None:
    config = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    broken = (
        config.replace("window_memory: 3h", "window_memory: 1h")
        .replace("at_risk_margin: 15m", "at_risk_margin: soon")
        + "for:\n  HeliosGpuLsot: 1m\n"
    )
    status, _, err = _run(capsys, _scratch(root, tmp_path, broken), "--check")
    assert status == 2
    assert "window_memory: must exceed the 90-minute restore bound" in err
    assert "restore.at_risk_margin: expected a duration" in err
    assert "for: unknown alerts ['HeliosGpuLsot']" in err


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("15m", 900), ("1h30m", 5400)])
def test_durations(generate: Any, text: str, seconds: int) -> None:
    reader = generate.Reader({"d": text})
    assert reader.duration("d").seconds == seconds
    assert reader.errors == []


def test_snapshot_for_must_stay_below_the_down_grace(root: Path, tmp_path: Path,
                                                     capsys: Capture) -> None:
    """After --down-grace the sidecar opens a window and HeliosEngineSnapshotFailing is silenced."""
    config = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    changed = config + "for:\n  HeliosEngineSnapshotFailing: 1m\n"
    status, _, err = _run(capsys, _scratch(root, tmp_path, changed), "--check")
    assert status == 2
    assert "for.HeliosEngineSnapshotFailing: 1m must be shorter than exporter.down_grace (60s)" in err


def test_down_grace_matches_the_sidecar_default(root: Path, generate: Any) -> None:
    from exporter.config import Config as SidecarConfig

    config = generate.load_config(root / "alerts/config.yaml")
    default = SidecarConfig.__dataclass_fields__["down_grace"].default
    assert config.down_grace.seconds == default
    assert config.for_["HeliosEngineSnapshotFailing"].seconds < config.down_grace.seconds


def test_each_alert_is_declared_once_with_its_for(root: Path, generate: Any) -> None:
    """One declaration per alert, in one group module; its `for:` is the one rendered unless
    alerts/config.yaml overrides it."""
    from alerts.groups import ALERT_GROUPS

    config = generate.load_config(root / "alerts/config.yaml")
    names = [a.name for group in ALERT_GROUPS for a in group.alerts(config)]
    assert len(names) == len(set(names))
    for alert in generate.alerts(config):
        assert str(config.for_[alert.name]) == alert.for_, alert.name


def test_a_for_override_replaces_the_declared_one(root: Path, tmp_path: Path, generate: Any) -> None:
    config = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    (tmp_path / "config.yaml").write_text(config + "for:\n  HeliosGpuLost: 7m\n", encoding="utf-8")
    changed = generate.load_config(tmp_path / "config.yaml")
    assert str(changed.for_["HeliosGpuLost"]) == "7m"
    rule = next(a.rule(changed) for a in generate.alerts(changed) if a.name == "HeliosGpuLost")
    assert rule["for"] == "7m"
    assert str(changed.for_["HeliosGpuPowerAtLimit"]) == "15m"  # the others as declared


def test_the_for_placeholder_is_the_rendered_for(root: Path, tmp_path: Path, generate: Any) -> None:
    """A description that names its own `for:` shows the one in force, never the placeholder."""
    from alerts.rules import FOR

    config = (root / "alerts/config.yaml").read_text(encoding="utf-8")
    (tmp_path / "config.yaml").write_text(config + "for:\n  HeliosExporterDown: 9m\n",
                                          encoding="utf-8")
    changed = generate.load_config(tmp_path / "config.yaml")
    text = generate.render_alerts(changed)
    assert FOR not in text
    assert "for 9m{{ if not $labels.instance }}" in text


def test_restore_bound_comes_from_the_sidecar(generate: Any) -> None:
    """window_memory is checked against the sidecar's own default bound, not a second literal."""
    from alerts.config import DEFAULT_RESTORE_BOUND_S
    from exporter.config import Config as SidecarConfig

    assert SidecarConfig.__dataclass_fields__["restore_bound"].default == DEFAULT_RESTORE_BOUND_S


def test_generator_modules_stay_small(root: Path) -> None:
    for path in sorted((root / "alerts").rglob("*.py")):
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 400, f"{path.relative_to(root)}: {lines} lines"


def _copy_docs(root: Path, into: Path) -> list[Path]:
    (into / "docs/runbooks").mkdir(parents=True)
    runbooks = [p.relative_to(root) for p in (root / "docs/runbooks").glob("*.md")]
    for name in [Path("docs/alerts.md"), *runbooks]:
        (into / name).write_text((root / name).read_text(encoding="utf-8"), encoding="utf-8")
    return runbooks


def test_a_hand_edited_set_up_section_is_drift(root: Path, tmp_path: Path, capsys: Capture) -> None:
    """The runbooks' common set-up (docs/runbooks/README.md) and every runbook's Set up section
    (the link to it) are generated (alerts/runbook_setup.py): an edit by hand is reported, and
    regenerating puts it back."""
    _scratch(root, tmp_path)
    page = tmp_path / "docs/runbooks/README.md"
    runbook = tmp_path / "docs/runbooks/HeliosRestoreCheckFailed.md"
    texts = {path: path.read_text(encoding="utf-8") for path in (page, runbook)}
    page.write_text(texts[page].replace("/etc/helios-exporter/events/token",
                                        "/etc/helios-exporter/events-token"), encoding="utf-8")
    runbook.write_text(texts[runbook].replace("(README.md#set-up)", "(README.md)"), encoding="utf-8")
    status, out, _ = _run(capsys, tmp_path, "--check")
    assert status == 1
    assert "docs/runbooks/README.md (generated)" in out
    assert "+TOKEN=$(kubectl" in out
    assert "docs/runbooks/HeliosRestoreCheckFailed.md (generated)" in out
    assert _run(capsys, tmp_path)[0] == 0
    assert {path: path.read_text(encoding="utf-8") for path in texts} == texts


def test_a_runbook_without_the_set_up_markers_is_an_error(root: Path, tmp_path: Path,
                                                         capsys: Capture) -> None:
    _scratch(root, tmp_path)
    runbook = tmp_path / "docs/runbooks/HeliosGpuLost.md"
    runbook.write_text(runbook.read_text(encoding="utf-8").replace("<!-- END GENERATED: setup -->", ""),
                       encoding="utf-8")
    status, _, err = _run(capsys, tmp_path, "--check")
    assert status == 2
    assert "HeliosGpuLost.md: marker" in err
