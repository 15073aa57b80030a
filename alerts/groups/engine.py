"""Engine identity: configured pins, and incarnations that no restore window explains."""

from __future__ import annotations

from alerts.config import Config
from alerts.promql import Q
from alerts.rules import Alert, Promise
from alerts.templates import T

GROUP = "helios-engine"

# `pin` label -> (sidecar flag, what a mismatch means, the current value as a template or "").
_IDENTITY = "helios_monitoring_generation_info{{TARGET}}"
PINS = {
    "image_digest": ("--expect-image-digest", "the engine runs another image digest", "image_digest"),
    "package": ("--expect-package", "the engine reports another package", "package"),
    "checkpoint": ("--expect-checkpoint", "the engine serves another checkpoint", "checkpoint"),
    "ranks": ("--expect-ranks", "the snapshot lists another number of ranks", ""),
    "power_limit": (
        "--expect-power-limit-watts",
        "a GPU serving a rank has another enforced power limit",
        "",
    ),
}


def pin_text(t: T) -> str:
    """What the failing `$labels.pin` means, with the engine's current value where known."""
    parts = []
    for i, (pin, (flag, meaning, label)) in enumerate(PINS.items()):
        if label:
            now = t.query(_IDENTITY, f'label "{label}"')
        elif pin == "ranks":
            now = t.value("max without (generation) (helios_engine_ranks{{TARGET}})", "humanize")
        else:
            now = "see helios_gpu_power_limit_watts"
        keyword = "if" if i == 0 else "else if"
        parts.append(
            f'{{{{ {keyword} eq $labels.pin "{pin}" }}}}{meaning} than {flag} (now: {now})'
        )
    return "".join(parts) + "{{ else }}see the runbook{{ end }}"


def alerts(c: Config) -> list[Alert]:
    q, t = Q(c), T(c)
    window = str(c.restart_window)
    return [
        Alert(
            name="HeliosEnginePinMismatch",
            group=GROUP,
            severity="critical",
            # One more poll and scrape confirm a mismatch before it pages.
            for_="1m",
            promised=Promise(
                "the engine does not match a configured pin (label `pin`)",
                since=2,
            ),
            expr=f"{q.sel('helios_engine_pin_ok')} == 0",
            summary=f"Engine on {t.target} does not match its {{{{ $labels.pin }}}} pin",
            description=(
                f"As of {t.now()}, the engine on {t.target} did not match the pinned "
                f"{{{{ $labels.pin }}}}: {pin_text(t)}. Measurements of this engine do not "
                "belong to the pinned configuration until it matches again."
            ),
            meaning=(
                "a configured pin (`helios_engine_pin_ok{pin}`: image_digest, package, "
                "checkpoint, ranks, power_limit) is 0 on a poll where the engine answered"
            ),
        ),
        Alert(
            name="HeliosEngineRestartedOutsideWindow",
            group=GROUP,
            severity="warning",
            for_="0m",
            promised=Promise(
                "a new engine incarnation that no restore window saw coming (section 6.8)",
                since=2,
            ),
            expr=f"increase({q.sel('helios_engine_unplanned_restarts_total')}[{window}]) > 0",
            summary=f"Engine on {t.target} restarted outside a restore window",
            description=(
                f"The engine on {t.target} came back as a new incarnation that no restore "
                f"window saw coming ({{{{ $value | humanize }}}} time(s) in the {window} before "
                f"{t.now()}; generation now "
                + t.query(_IDENTITY, 'label "generation"')
                + "): it restarted while no window was open, or while the sidecar itself was "
                "down (a pod restart takes both). An unplanned incarnation during a run "
                "invalidates the run's measurements; a restore through a window never counts."
            ),
            meaning=(
                f"`helios_engine_unplanned_restarts_total` increased within {window}: a new "
                "incarnation (generation, container or start) while no restore window was open, "
                "or found at the sidecar's start"
            ),
        ),
    ]
